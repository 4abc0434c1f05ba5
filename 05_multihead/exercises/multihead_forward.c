/*
 * Exercise 5.2: the multi-head layer, from the pieces
 * (05_multihead/README.md, "Exercises").
 *
 * queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv), valid_lens
 * NULL, (B,) or (B, T) -> output (B, T, D), a new tensor, in evaluation
 * mode (no dropout). Build it from the chapters' pieces: linear (ops.h),
 * transpose_qkv, transpose_output, valid_lens_repeat_interleave (heads.h)
 * and dot_product_attention (attention.h); not from multihead_forward.
 * The layer's weights are layer->W_q ... layer->b_o (multihead.h).
 *
 * Grade it:  make check EXERCISE=05_multihead/exercises/multihead_forward.c
 */
#include "exercises.h"

Tensor *my_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                             const Tensor *keys, const Tensor *values,
                             const ValidLens *valid_lens)
{
    not_started();   /* delete this line when you begin */
    (void)keys;
    (void)values;
    (void)valid_lens;
    return tensor_zeros(SHAPE(queries->shape[0], queries->shape[1], layer->num_hiddens));
}
