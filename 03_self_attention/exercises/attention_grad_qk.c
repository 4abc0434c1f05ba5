/*
 * Exercise 3.8: the scores' gradient, back to the queries and keys
 * (03_self_attention/backward.md, "Exercises").
 *
 * S = Q K^T / sqrt(d); queries (B, T, d), keys (B, n_k, d), grad_scores
 * dL/dS (B, T, n_k) -> *grad_queries dL/dQ (B, T, d) and *grad_keys dL/dK
 * (B, n_k, d), new tensors. Do not change the inputs.
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/attention_grad_qk.c
 */
#include "exercises.h"

void my_attention_grad_qk(const Tensor *queries, const Tensor *keys, const Tensor *grad_scores,
                          Tensor **grad_queries, Tensor **grad_keys)
{
    not_started();   /* delete this line when you begin */
    (void)grad_scores;
    *grad_queries = tensor_zeros(queries->ndim, queries->shape);
    *grad_keys = tensor_zeros(keys->ndim, keys->shape);
}
