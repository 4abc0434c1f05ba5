/*
 * Exercise 1.2: the weighted sum of values
 * (01_dot_product/README.md, "Exercises").
 *
 * weights (T, n_k), values (n_k, v) -> output (T, v), a new tensor:
 * row i of the output is sum_j weights[i][j] * values[j], weights @ values.
 *
 * Grade it:  make check EXERCISE=01_dot_product/exercises/weighted_sum.c
 */
#include "exercises.h"

Tensor *my_weighted_sum(const Tensor *weights, const Tensor *values)
{
    not_started();   /* delete this line when you begin */
    return tensor_zeros(SHAPE(weights->shape[0], values->shape[1]));
}
