/*
 * Exercise 6.4: one RoPE rotation
 * (06_permutation_invariance/relative_positions.md; the chapter's README
 * lists the exercise).
 *
 * x (d,), d even: a query or key of one head at `position`. Turn each pair
 * of neighbours (x[2i], x[2i+1]), as common/rope.c does (not the halves
 * x[i], x[i + d/2]), in place, by the angle position * theta_i,
 * theta_i = 10000^(-2i/d):
 *     x'[2i]     = x[2i] cos - x[2i+1] sin
 *     x'[2i + 1] = x[2i] sin + x[2i+1] cos
 * Compute each angle, its cosine and its sine in double, as the repository
 * does: positions reach 100000, where a float angle is off by up to 0.004.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/rope_rotate.c
 */
#include "exercises.h"

void my_rope_rotate(float *x, int d, int position)
{
    not_started();   /* delete this line when you begin */
    (void)position;
    for (int j = 0; j < d; j++)
        x[j] = 0.0f;
}
