/*
 * Exercise 6.9: sampling with a temperature
 * (06_permutation_invariance/language_model.md, "Graded exercises").
 *
 * logits (V,) -> a token drawn from softmax(logits / temperature) with one
 * uniform number u = rng_uniform(rng) in [0, 1): the first token whose
 * running sum of probabilities passes u. Temperature 0 takes the largest
 * logit (the first of equal ones) and draws nothing. V is at most 256.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/sample_token.c
 */
#include "exercises.h"

int my_sample_token(const float *logits, int vocab, float temperature, Rng *rng)
{
    not_started();   /* delete this line when you begin */
    (void)logits;
    (void)vocab;
    (void)temperature;
    (void)rng;
    return 0;
}
