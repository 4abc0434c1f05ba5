/*
 * heads.h - splitting into heads and merging back (introduced in chapter 04).
 *
 * Legend: B = batch_size, T = num_queries (or keys), H = num_heads,
 * D = num_hiddens, d = D / H (an error if H does not divide D).
 *
 *   transpose_qkv     (B, T, D) -> (B, T, H, d) -> (B, H, T, d) -> (B*H, T, d)
 *   transpose_output  (B*H, T, d) -> (B, H, T, d) -> (B, T, H, d) -> (B, T, D)
 *
 * Row b * H + h of the (B*H, ...) result is head h of sequence b: the order
 * of torch.repeat_interleave and of PyTorch's own multi-head attention.
 */
#ifndef HEADS_H
#define HEADS_H

#include "valid_lens.h"
#include "tensor.h"

Tensor *transpose_qkv(const Tensor *x, int num_heads);
Tensor *transpose_output(const Tensor *x, int num_heads);
/* The backwards of the two index maps are each other's maps: a gradient
 * moves back to where its value came from, and nothing is added, since
 * every element goes to exactly one place. */
Tensor *transpose_qkv_backward(const Tensor *grad, int num_heads);     /* (B*H, T, d) -> (B, T, D) */
Tensor *transpose_output_backward(const Tensor *grad, int num_heads);  /* (B, T, D) -> (B*H, T, d) */

/* valid_lens (B,) -> (B*H,) and (B, T) -> (B*H, T): each sequence's
 * lengths repeated H times in a row, like torch.repeat_interleave. */
ValidLens *valid_lens_repeat_interleave(const ValidLens *valid_lens, int num_heads);

#endif
