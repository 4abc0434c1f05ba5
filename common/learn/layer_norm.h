/*
 * layer_norm.h - layer normalisation, forward and backward (introduced in
 * chapter 06's page "A language model").
 *
 * Legend: R = rows (every token of every sequence, B * T), D = num_hiddens.
 *
 * Each row x (D,) is normalised on its own, then scaled and shifted by
 * two learned vectors, as nn.LayerNorm(D) does (eps = 1e-5):
 *
 *     mean = sum_j x_j / D
 *     var  = sum_j (x_j - mean)^2 / D      (divided by D, not D - 1)
 *     rstd = 1 / sqrt(var + eps)
 *     xhat = (x - mean) * rstd             mean 0, variance about 1
 *     y    = xhat * weight + bias
 *
 * The forward keeps mean and rstd of each row (its cache), so the
 * backward needs only x again. With g = dL/dy * weight (the gradient of
 * xhat), the three ways x_j reaches the loss (through x_j itself, the
 * mean and the variance) sum to
 *
 *     dL/dx_j = rstd * (g_j - mean_k(g_k) - xhat_j * mean_k(g_k * xhat_k))
 *
 * the two subtracted means being what normalising took away: shifting a
 * whole row or scaling it changes nothing after the normalisation, so the
 * gradient has no part along those two directions.
 */
#ifndef LAYER_NORM_H
#define LAYER_NORM_H

#define LAYER_NORM_EPS 1e-5f

/* x (R, D), weight (D,), bias (D,) -> y (R, D); mean (R,) and rstd (R,)
 * receive each row's statistics (the cache). y may not alias x. */
void layer_norm_forward(const float *x, const float *weight, const float *bias, float *y,
                        float *mean, float *rstd, int rows, int D);

/* grad_y (R, D), x (R, D) and the forward's mean, rstd -> grad_x (R, D)
 * ADDED into (the residual stream's gradient is already there), and
 * grad_weight (D,), grad_bias (D,) added into, as PyTorch's .grad
 * accumulates. */
void layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                         const float *mean, const float *rstd, float *grad_x,
                         float *grad_weight, float *grad_bias, int rows, int D);

/* The same two, LN_GROUP rows at a time (layer_norm.c says why): the same
 * bits, faster. The language model's blocks call these; the pair above
 * is the one to read (and a learner's layer_norm replaces both). */
void layer_norm_forward_grouped(const float *x, const float *weight, const float *bias,
                                float *y, float *mean, float *rstd, int rows, int D);
void layer_norm_backward_grouped(const float *grad_y, const float *x, const float *weight,
                                 const float *mean, const float *rstd, float *grad_x,
                                 float *grad_weight, float *grad_bias, int rows, int D);

#endif
