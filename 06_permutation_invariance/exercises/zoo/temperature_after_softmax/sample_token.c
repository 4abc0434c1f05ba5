/* Bug: the softmax first, then the probabilities divided by the
 * temperature; normalised again for the draw, the division cancels: every
 * temperature samples as 1 does. */
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
    double probs[256], sum = 0.0;
    for (int i = 0; i < vocab; i++) {
        probs[i] = exp((double)logits[i] - logits[best]);
        sum += probs[i];
    }
    double total = 0.0;
    for (int i = 0; i < vocab; i++) {
        probs[i] = probs[i] / sum / temperature;
        total += probs[i];
    }
    const double u = (double)rng_uniform(rng) * total;
    double running = 0.0;
    for (int i = 0; i < vocab; i++) {
        running += probs[i];
        if (u < running)
            return i;
    }
    return vocab - 1;
}
