/*
 * sampling.c - drawing the next token with a temperature (introduced in
 * chapter 06's page "A language model"). See sampling.h.
 *
 * Legend: V = vocabulary.
 */
#include "learn/sampling.h"

#include <math.h>

#include "error.h"
#include "ops.h"

enum { MAX_VOCAB = 256 };   /* a token is a byte */

/* logits (V,) -> a token */
int sample_token(const float *logits, int vocab, float temperature, Rng *rng)
{
    if (vocab < 1 || vocab > MAX_VOCAB)
        die(__func__, "the vocabulary must hold 1 to %d tokens, got %d", MAX_VOCAB, vocab);
    if (temperature == 0.0f)
        return argmax(logits, vocab);
    // softmax(logits / temperature), the largest subtracted first
    double max = logits[0];
    for (int i = 1; i < vocab; i++)
        if (logits[i] > max)
            max = logits[i];
    double weights[MAX_VOCAB], sum = 0.0;
    for (int i = 0; i < vocab; i++) {
        weights[i] = exp(((double)logits[i] - max) / temperature);
        sum += weights[i];
    }
    // the first token whose running sum passes a uniform draw
    const double u = (double)rng_uniform(rng) * sum;
    double running = 0.0;
    for (int i = 0; i < vocab; i++) {
        running += weights[i];
        if (u < running)
            return i;
    }
    return vocab - 1;   /* u within rounding of sum */
}
