/*
 * Exercise 6.5: the sinusoidal positional encoding
 * (06_permutation_invariance/README.md, "Exercises").
 *
 * -> PE (max_len, D), a new tensor, d2l's table:
 *     PE[p][2j]     = sin(p / 10000^(2j / D))
 *     PE[p][2j + 1] = cos(p / 10000^(2j / D))
 * When D is odd, the last column is a sine without its cosine.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/positional_encoding.c
 */
#include "exercises.h"

Tensor *my_positional_encoding(int max_len, int num_hiddens)
{
    not_started();   /* delete this line when you begin */
    return tensor_zeros(SHAPE(max_len, num_hiddens));
}
