/*
 * Exercise 6.7: a previous-token score
 * (06_permutation_invariance/induction_heads.md, "Exercises").
 *
 * weights (B, T, T) of one head, query t's row over keys 0 .. T - 1 ->
 * the mean, over every sequence b and every query t >= 1, of the weight
 * query t puts on key t - 1; 0 when T = 1. Do not change the weights.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/previous_token_score.c
 */
#include "exercises.h"

double my_previous_token_score(const Tensor *weights)
{
    not_started();   /* delete this line when you begin */
    (void)weights;
    return 0.0;
}
