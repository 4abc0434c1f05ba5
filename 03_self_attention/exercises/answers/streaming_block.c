/*
 * Exercise 3.7, worked answer: one key block of streaming attention.
 *
 * The state's numbers are relative to the running maximum. A block first
 * finds its own largest score; when that beats the running maximum, what
 * the state holds is rescaled by exp(old max - new max) (0 for an empty
 * state, whose max is -INFINITY), then the block's keys are added under
 * the new maximum. Every exponential is of a number <= 0: nothing
 * overflows, whatever the scores.
 */
#include "exercises.h"

#include <math.h>

static float score(const float *query, const float *key, int d)
{
    float dot = 0.0f;
    for (int p = 0; p < d; p++)
        dot += query[p] * key[p];
    return dot / sqrtf((float)d);
}

void my_streaming_block(const float *query, const float *keys, const float *values, int n,
                        int d, int v, float *max, float *sum, float *acc)
{
    // pass 1: the block's largest score, and the new running maximum
    float new_max = *max;
    for (int j = 0; j < n; j++)
        new_max = fmaxf(new_max, score(query, keys + (size_t)j * d, d));
    // pass 2: what the state holds, moved under the new maximum
    const float rescale = expf(*max - new_max);
    *sum *= rescale;
    for (int c = 0; c < v; c++)
        acc[c] *= rescale;
    // pass 3: the block's keys added
    for (int j = 0; j < n; j++) {
        const float e = expf(score(query, keys + (size_t)j * d, d) - new_max);
        *sum += e;
        for (int c = 0; c < v; c++)
            acc[c] += e * values[(size_t)j * v + c];
    }
    *max = new_max;
}
