/*
 * Exercise 3.6: two softmax results merged
 * (03_self_attention/streaming.md, "Exercises").
 *
 * A state over some of a query's keys: max m, sum l = sum_j exp(s_j - m),
 * acc (v,) = sum_j exp(s_j - m) v_j; no key yet: m = -INFINITY, l = 0,
 * acc = 0. Merge the second state (other_max, other_sum, other_acc) into
 * the first (*max, *sum, acc), so that it covers both sets of keys. Do not
 * change other_acc.
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/online_softmax_merge.c
 */
#include "exercises.h"

void my_online_softmax_merge(float *max, float *sum, float *acc, float other_max,
                             float other_sum, const float *other_acc, int v)
{
    not_started();   /* delete this line when you begin */
    (void)max;
    (void)sum;
    (void)acc;
    (void)other_max;
    (void)other_sum;
    (void)other_acc;
    (void)v;
}
