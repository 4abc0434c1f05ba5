/*
 * Bug zoo: two softmax results merged (exercise 3.6).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

void my_online_softmax_merge(float *max, float *sum, float *acc, float other_max,
                             float other_sum, const float *other_acc, int v)
{
    const float new_max = fmaxf(*max, other_max);
    if (new_max == -INFINITY)
        return;
    const float mine = expf(*max - new_max), theirs = expf(other_max - new_max);
    /* the sums of the exponentials, added */
    *sum = *sum + other_sum;
    for (int c = 0; c < v; c++)
        acc[c] = mine * acc[c] + theirs * other_acc[c];
    *max = new_max;
}
