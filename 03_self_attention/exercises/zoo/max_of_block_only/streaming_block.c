/*
 * Bug zoo: one key block of streaming attention (exercise 3.7).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
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
    /* the block's largest score */
    float new_max = -INFINITY;
    for (int j = 0; j < n; j++)
        new_max = fmaxf(new_max, score(query, keys + (size_t)j * d, d));
    const float rescale = expf(*max - new_max);
    *sum *= rescale;
    for (int c = 0; c < v; c++)
        acc[c] *= rescale;
    for (int j = 0; j < n; j++) {
        const float e = expf(score(query, keys + (size_t)j * d, d) - new_max);
        *sum += e;
        for (int c = 0; c < v; c++)
            acc[c] += e * values[(size_t)j * v + c];
    }
    *max = new_max;
}
