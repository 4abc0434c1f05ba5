/*
 * Exercise 6.9, worked answer: sampling with a temperature.
 *
 * The temperature divides the logits, before the softmax: below 1 it
 * widens their gaps (sharper, towards the largest), above 1 it narrows
 * them (flatter, towards uniform). The largest logit is subtracted first,
 * so that a small temperature does not overflow exp. No need to normalise:
 * the draw is scaled by the sum instead.
 */
#include "exercises.h"

#include <math.h>

int my_sample_token(const float *logits, int vocab, float temperature, Rng *rng)
{
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    if (temperature == 0.0f)
        return best;
    // the weights exp((logit - max) / temperature) and their sum
    double weights[256], sum = 0.0;
    for (int i = 0; i < vocab; i++) {
        weights[i] = exp(((double)logits[i] - logits[best]) / temperature);
        sum += weights[i];
    }
    // the first token whose running sum passes u * sum
    const double u = (double)rng_uniform(rng) * sum;
    double running = 0.0;
    for (int i = 0; i < vocab; i++) {
        running += weights[i];
        if (u < running)
            return i;
    }
    return vocab - 1;   /* u within rounding of the sum */
}
