/*
 * Exercise 1.1: the scores of queries against keys
 * (01_dot_product/README.md, "Exercises").
 *
 * queries (T, d), keys (n_k, d) -> scores (T, n_k), a new tensor:
 * scores[i][j] is the dot product of query i and key j, queries @ keys^T.
 * Keys are stored one per row, as attention stores them.
 *
 * Grade it:  make check EXERCISE=01_dot_product/exercises/dot_scores.c
 */
#include "exercises.h"

Tensor *my_dot_scores(const Tensor *queries, const Tensor *keys)
{
    not_started();   /* delete this line when you begin */
    return tensor_zeros(SHAPE(queries->shape[0], keys->shape[0]));
}
