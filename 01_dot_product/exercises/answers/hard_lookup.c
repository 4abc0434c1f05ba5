/*
 * Exercise 1.3, worked answer: the dictionary as attention.
 *
 * Score every key, keep the best. A strict > keeps the first key on a tie;
 * the best starts as key 0's score, not a made-up minimum.
 */
#include "exercises.h"

static float dot(const float *a, const float *b, int d)
{
    float sum = 0.0f;
    for (int p = 0; p < d; p++)
        sum += a[p] * b[p];
    return sum;
}

int my_hard_lookup(const float *query, const float *keys, int num_keys, int d)
{
    int best = 0;
    float best_score = dot(query, keys, d);
    for (int j = 1; j < num_keys; j++) {
        float score = dot(query, keys + (size_t)j * d, d);
        if (score > best_score) {
            best = j;
            best_score = score;
        }
    }
    return best;
}
