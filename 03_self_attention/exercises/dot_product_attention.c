/*
 * Exercise 3.2: scaled dot-product attention
 * (03_self_attention/README.md, "Exercises").
 *
 * queries (B, T, d), keys (B, n_k, d), values (B, n_k, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v), a new tensor; *weights receives the
 * attention weights (B, T, n_k), a new tensor:
 *     weights = masked_softmax(queries @ keys^T / sqrt(d), valid_lens)
 *     output  = weights @ values
 * You may call masked_softmax (softmax.h, chapter 02).
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/dot_product_attention.c
 */
#include "exercises.h"

Tensor *my_dot_product_attention(const Tensor *queries, const Tensor *keys, const Tensor *values,
                     const ValidLens *valid_lens, Tensor **weights)
{
    not_started();   /* delete this line when you begin */
    (void)valid_lens;
    *weights = tensor_zeros(SHAPE(queries->shape[0], queries->shape[1], keys->shape[1]));
    return tensor_zeros(SHAPE(queries->shape[0], queries->shape[1], values->shape[2]));
}
