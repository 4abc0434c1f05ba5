/* sample_token.c - exercise 6.9's my_sample_token in place of the
 * repository's sample_token (common/learn/sampling.c): every character
 * the language model writes. */
#include "exercises.h"
#include "learn/sampling.h"

int sample_token(const float *logits, int vocab, float temperature, Rng *rng)
{
    return my_sample_token(logits, vocab, temperature, rng);
}
