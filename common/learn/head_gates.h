/*
 * head_gates.h - a gate on every head of a multi-head layer: masking heads,
 * and Michel, Levy and Neubig's importance (introduced in chapter 05's
 * optional section on head importance).
 *
 * Legend: B = batch_size, T = num_queries, H = num_heads, D = num_hiddens,
 * d = D / H.
 *
 * The layer's output is W_o applied to the heads side by side, so it is a
 * sum of one term per head:
 *
 *     y = concat(head_0, ..., head_{H-1}) W_o^T + b_o
 *       = sum_h xi_h head_h W_o[:, h*d:(h+1)*d]^T + b_o,     all xi_h = 1
 *
 * A gate xi_h multiplies head h's output. xi_h = 0 masks the head (as if it
 * were pruned), which is the same as zeroing its d columns of W_o; that is
 * how head_gated_W_o applies gates without touching the layer's code.
 *
 * The importance of head h (Michel, Levy and Neubig, "Are Sixteen Heads
 * Really Better than One?", 2019) is the size of the loss's slope along its
 * gate, averaged over examples x:
 *
 *     I_h = E_x | dL(x) / dxi_h |    at xi = 1
 *
 * and the slope needs no new backward: xi_h scales head h's d columns of
 * concat, so by the chain rule dL/dxi_h is their dot product with the
 * gradient that multihead_backward returns for concat:
 *
 *     dL/dxi_h = sum over t and the d columns c of head h of
 *                concat[b, t, c] * grad_concat[b, t, c]
 */
#ifndef HEAD_GATES_H
#define HEAD_GATES_H

#include "multihead.h"
#include "tensor.h"

/* layer's W_o (D, D), gates (H,) -> a new W_o whose columns of head h are
 * multiplied by gates[h]: use it in a copy of the layer,
 *     MultiHeadAttention gated = *layer;  gated.W_o = head_gated_W_o(layer, gates);
 * and free only gated.W_o afterwards. */
Tensor *head_gated_W_o(const MultiHeadAttention *layer, const float *gates);

/* concat (B, T, D), grad_concat (B, T, D) -> gate gradients (B, H): entry
 * (b, h) is dL/dxi_h summed over sequence b's T rows, where L is the loss
 * whose gradient grad_concat is (new). */
Tensor *head_gate_grads(const Tensor *concat, const Tensor *grad_concat, int num_heads);

#endif
