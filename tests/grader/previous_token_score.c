/* previous_token_score.c - grades exercise 6.7, a head's previous-token
 * score (06_permutation_invariance/induction_heads.md), against the mean
 * taken in double here. The weights are causal softmaxes of random scores,
 * as a decoder's heads have; some cases put most weight on key t - 1. */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

#include <math.h>

static double score_at(const Tensor *w, int offset, bool from_zero)
{
    int B = w->shape[0], T = w->shape[1];
    double sum = 0.0;
    int count = 0;
    for (int b = 0; b < B; b++)
        for (int t = from_zero ? 0 : 1; t < T; t++) {
            int key = t + offset;
            sum += key >= 0 && key < T ? AT3(w, b, t, key) : 0.0f;
            count++;
        }
    return count ? sum / count : 0.0;
}

static void grade_case(Rng *rng, int index)
{
    int B = index < 3 ? 1 : draw_size(rng, index, 100, 1, 4);
    int T = index == 0 ? 1 : index == 1 ? 2
          : large_case(index, 100) ? draw_int(rng, 200, 400) : draw_size(rng, index, 100, 2, 8);
    float boost = index % 2 ? 4.0f : 0.0f;   /* a previous-token head, or not */
    case_describe("B = %d, T = %d, %s", B, T, boost > 0 ? "a head that looks one back" : "random weights");
    Tensor *w = draw_normal(rng, 1.0f, SHAPE(B, T, T));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = &AT3(w, b, t, 0);
            if (t > 0)
                row[t - 1] += boost;
            masked_softmax_row(row, T, t + 1);   /* causal: keys 0 .. t */
        }
    case_input("weights", w);
    double want = score_at(w, -1, false);

    case_calling();
    double got = my_previous_token_score(w);
    case_called();

    expect_that(isfinite(got), 1, "the score is %g: with T = 1 no query has a previous token, "
                "and the score is 0", got);
    if (T > 1) {
        double next = score_at(w, 1, false), all_queries = score_at(w, -1, true);
        expect_that(!(fabs(got - next) <= 1e-6 && fabs(next - want) > 1e-4), 2,
                    "the score is %.6g, the mean weight on key t + 1: query t's previous token "
                    "is key t - 1 (must be %.6g)", got, want);
        expect_that(!(fabs(got - all_queries) <= 1e-6 && fabs(all_queries - want) > 1e-6), 3,
                    "the score is %.6g, a mean over B T queries: query 0 has no previous token; "
                    "the mean is over the B (T - 1) queries t >= 1 (must be %.6g)", got, want);
    }
    expect_that(fabs(got - want) <= 1e-6 + 1e-5 * fabs(want), 3,
                "the score is %.7g, must be %.7g: weights[b][t][t - 1], averaged over b and "
                "t = 1 .. T - 1", got, want);
}

const Exercise exercise = {"previous_token_score", "06_permutation_invariance", "6.7", 100,
                           grade_case, "", "induction_heads.md"};
