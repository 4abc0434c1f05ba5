/* sample_token.c - grades exercise 6.9, sampling with a temperature
 * (06_permutation_invariance/language_model.md), against sample_token
 * (common/learn/language_model.c): both draw from a copy of one seeded
 * Rng, 20 tokens a case, so they must draw the same tokens and use exactly
 * one uniform number per token (none at temperature 0). A token within
 * rounding of a boundary of the running sum may go either way. */
#include "exercises.h"
#include "grader.h"
#include "learn/language_model.h"

#include <math.h>

enum { DRAWS = 20 };

static bool same_state(const Rng *a, const Rng *b)
{
    return a->state == b->state && a->inc == b->inc;
}

/* Is u (of the draw from `before`) within rounding of the boundary between
 * tokens a and b of softmax(logits / temperature)? */
static bool on_boundary(const float *logits, int vocab, float temperature, Rng before, int a,
                        int b)
{
    double max = logits[0], sum = 0.0, running = 0.0;
    for (int i = 1; i < vocab; i++)
        max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < vocab; i++)
        sum += exp(((double)logits[i] - max) / temperature);
    const double u = rng_uniform(&before);
    const int low = a < b ? a : b, high = a < b ? b : a;
    for (int i = 0; i < high; i++) {
        running += exp(((double)logits[i] - max) / temperature) / sum;
        if (i >= low && fabs(u - running) <= 1e-5)
            return true;
    }
    return false;
}

static void grade_case(Rng *rng, int index)
{
    static const float temperatures[] = {0.0f, 1.0f, 0.5f, 2.0f, 0.1f, 10.0f, 0.7f, 1.5f};
    int V = index < 2 ? (index == 0 ? 1 : 2)
                      : large_case(index, 120) ? draw_int(rng, 200, 256)
                                               : draw_size(rng, index, 120, 2, 12);
    float temperature = temperatures[index % 8];
    float scale = index % 5 == 4 ? 1000.0f : 3.0f;
    case_describe("V = %d, temperature %g, logits up to about %g", V, (double)temperature,
                  (double)scale);
    Tensor *logits = draw_normal(rng, scale, SHAPE(V));
    if (index % 8 == 0 && V > 2)
        logits->data[V - 1] = logits->data[1] = 4.0f * scale;   /* a tie: the first */
    case_input("logits", logits);
    Rng theirs = rng_new((uint64_t)draw_int(rng, 1, 1 << 30)), mine = theirs;
    int want[DRAWS], got[DRAWS];
    for (int k = 0; k < DRAWS; k++) {
        Rng before = theirs, at_one = theirs;
        want[k] = sample_token(logits->data, V, temperature, &theirs);
        int at_temperature_one = sample_token(logits->data, V, 1.0f, &at_one);
        case_calling();
        got[k] = my_sample_token(logits->data, V, temperature, &mine);
        case_called();
        expect_that(got[k] >= 0 && got[k] < V, 3, "draw %d: token %d, outside 0 .. %d", k,
                    got[k], V - 1);
        expect_that(same_state(&mine, &theirs), 2,
                    temperature == 0.0f
                        ? "draw %d: at temperature 0 take the largest logit and draw no number"
                        : "draw %d: one token takes exactly one rng_uniform(rng), no more, no less",
                    k);
        if (got[k] == want[k] || on_boundary(logits->data, V, temperature, before, got[k], want[k]))
            continue;
        expect_that(!(temperature != 1.0f && temperature != 0.0f && got[k] == at_temperature_one),
                    2, "draw %d: token %d is the one temperature 1 draws (%d at %g): applied to "
                    "the probabilities after the softmax the temperature cancels when they are "
                    "normalised; divide the logits by it before", k, got[k], want[k],
                    (double)temperature);
        expect_that(false, temperature == 0.0f ? 1 : 3,
                    "draw %d: token %d, expected %d (u = the draw's rng_uniform)", k, got[k],
                    want[k]);
    }
}

const Exercise exercise = {"sample_token", "06_permutation_invariance", "6.9", 120,
                           grade_case, "sample_token language_model_sample",
                           "language_model.md"};
