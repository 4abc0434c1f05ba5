/*
 * Exercise 3.1: the scaled scores
 * (03_self_attention/README.md, "Exercises").
 *
 * queries (B, T, d), keys (B, n_k, d) -> scores (B, T, n_k), a new tensor:
 * scores[b][i][j] = (query i . key j) / sqrt(d), within sequence b.
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/scaled_scores.c
 */
#include "exercises.h"

Tensor *my_scaled_scores(const Tensor *queries, const Tensor *keys)
{
    not_started();   /* delete this line when you begin */
    return tensor_zeros(SHAPE(queries->shape[0], queries->shape[1], keys->shape[1]));
}
