/*
 * mlp.h - the feed-forward half of a transformer block: a linear layer to
 * 4 D, GELU, a linear layer back to D (introduced in chapter 06's page "A
 * language model").
 *
 * Legend: R = rows (B * T), D = num_hiddens, F = the hidden width, 4 D.
 *
 *     f = x W_fc^T + b_fc         (R, F)
 *     g = gelu(f)                 (R, F)
 *     y = g W_proj^T + b_proj     (R, D)
 *
 * GELU, in the tanh form GPT-2 uses (nn.GELU(approximate='tanh')):
 *
 *     gelu(u) = u * Phi(u) ~= 0.5 u (1 + tanh(c (u + 0.044715 u^3))),
 *     c = sqrt(2 / pi)
 *
 * Phi is the standard normal's distribution function: gelu lets a large
 * positive u through, stops a large negative one, and bends smoothly in
 * between (unlike ReLU, its slope never jumps). With t = tanh(c (u +
 * 0.044715 u^3)) and tanh' = 1 - t^2, the product rule gives
 *
 *     gelu'(u) = 0.5 (1 + t) + 0.5 u (1 - t^2) c (1 + 3 * 0.044715 u^2)
 */
#ifndef MLP_H
#define MLP_H

#include <stddef.h>

/* f (n,) -> g (n,), elementwise; g may be f. */
void gelu_forward(const float *f, float *g, size_t n);
/* f (n,), grad_g (n,) -> grad_f (n,) = grad_g * gelu'(f); grad_f may be grad_g. */
void gelu_backward(const float *f, const float *grad_g, float *grad_f, size_t n);

/* The pair a model runs, so that a program can hand it the fast one
 * (fast_gelu_forward and fast_gelu_backward, fast/fast_exp.h) with the
 * same results within rounding. */
typedef void (*GeluForward)(const float *f, float *g, size_t n);
typedef void (*GeluBackward)(const float *f, const float *grad_g, float *grad_f, size_t n);

#endif
