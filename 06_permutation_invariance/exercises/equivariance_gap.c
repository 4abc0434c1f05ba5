/*
 * Exercise 6.3: measuring equivariance
 * (06_permutation_invariance/README.md, "Exercises").
 *
 * f maps tokens X (B, T, D) to a new (B, T, D) tensor (the caller's to
 * free). Return max |f(P X) - P f(X)| over every element: 0, up to
 * rounding, when f is equivariant under perm. You may call permute_tokens
 * (permute_tokens.h) and tensor_max_abs_diff (tensor.h). The grader passes
 * self-attention, and functions that are not equivariant.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/equivariance_gap.c
 */
#include "exercises.h"

float my_equivariance_gap(Tensor *(*f)(const Tensor *X), const Tensor *X, const int *perm)
{
    not_started();   /* delete this line when you begin */
    (void)f;
    (void)X;
    (void)perm;
    return -1.0f;
}
