/*
 * Exercise 3.3: causal self-attention
 * (03_self_attention/README.md, "Exercises").
 *
 * X (B, n, d) -> output (B, n, d), a new tensor: scaled dot-product
 * attention with queries = keys = values = X, where token i sees tokens
 * 0 .. i only (a decoder's mask). You may call masked_softmax (softmax.h)
 * and valid_lens_causal (valid_lens.h), both from chapter 02.
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/causal_self_attention.c
 */
#include "exercises.h"

Tensor *my_causal_self_attention(const Tensor *X)
{
    not_started();   /* delete this line when you begin */
    return tensor_zeros(X->ndim, X->shape);
}
