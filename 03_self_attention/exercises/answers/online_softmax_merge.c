/*
 * Exercise 3.6, worked answer: two softmax results merged.
 *
 * Each state's numbers are relative to its own maximum. Under the larger
 * maximum M, the state of maximum m is worth exp(m - M) times what it
 * holds, sum and acc alike: at most 1, so nothing overflows. An empty state
 * (m = -INFINITY) weighs exactly 0; two empty ones stay empty, without
 * computing exp(-inf - (-inf)), which is NaN.
 */
#include "exercises.h"

#include <math.h>

void my_online_softmax_merge(float *max, float *sum, float *acc, float other_max,
                             float other_sum, const float *other_acc, int v)
{
    const float new_max = fmaxf(*max, other_max);
    if (new_max == -INFINITY)
        return;   /* neither has seen a key */
    // each part's weight under the new maximum
    const float mine = expf(*max - new_max), theirs = expf(other_max - new_max);
    *sum = mine * *sum + theirs * other_sum;
    for (int c = 0; c < v; c++)
        acc[c] = mine * acc[c] + theirs * other_acc[c];
    *max = new_max;
}
