/*
 * Exercise 6.6: ALiBi's bias
 * (06_permutation_invariance/relative_positions.md, "Exercises").
 *
 * -> bias (T, n_k) of head h (1 .. H): bias[i][j] = -m_h |i - j|, with the
 * paper's slopes m_h: 2^(-8h/H) when H is a power of two (H = 8: 1/2, 1/4,
 * ..., 1/256), and for other H the rule of alibi.h. Write every element.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/alibi_bias.c
 */
#include "exercises.h"

void my_alibi_bias(int num_heads, int head, int num_queries, int num_keys, float *bias)
{
    not_started();   /* delete this line when you begin */
    (void)num_heads;
    (void)head;
    (void)num_queries;
    (void)num_keys;
    (void)bias;
}
