/*
 * sampling.h - drawing the next token from a model's scores, with a
 * temperature (introduced in chapter 06's page "A language model").
 *
 * Legend: V = vocabulary.
 *
 * The model gives a score (a logit) per token; softmax(logits / temperature)
 * makes them probabilities. A temperature below 1 sharpens them toward the
 * likeliest token, above 1 flattens them, and 0 is the limit: always the
 * likeliest (greedy decoding).
 */
#ifndef SAMPLING_H
#define SAMPLING_H

#include "random.h"

/* logits (V,) -> a token drawn from softmax(logits / temperature) with one
 * rng_uniform(rng); temperature 0 takes the largest logit, drawing nothing. */
int sample_token(const float *logits, int vocab, float temperature, Rng *rng);

#endif
