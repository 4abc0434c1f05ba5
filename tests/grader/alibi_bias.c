/* alibi_bias.c - grades exercise 6.6, ALiBi's bias of one head
 * (06_permutation_invariance/relative_positions.md), against alibi_bias
 * (common/alibi.c), for head counts that are powers of two and others. */
#include "exercises.h"
#include "alibi.h"
#include "grader.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    static const int head_counts[] = {1, 2, 4, 8, 16, 3, 5, 6, 7, 12, 20, 32};
    int H = index < 12 ? head_counts[index] : head_counts[draw_int(rng, 0, 11)];
    int h = index < 12 ? H : draw_int(rng, 1, H);
    bool large = large_case(index, 100);
    int T = index == 0 ? 1 : large ? draw_int(rng, 200, 500) : draw_size(rng, index, 100, 1, 7);
    int n_k = large ? draw_int(rng, 200, 500) : draw_size(rng, index, 100, 1, 7);
    if (index >= 12 && index % 2 == 0)
        n_k = T + draw_int(rng, 1, 3);   /* a key past every query: |i - j|, not i - j */
    case_describe("H = %d heads, head h = %d, T = %d, n_k = %d", H, h, T, n_k);
    Tensor *all = case_keep(alibi_bias(H, T, n_k));
    const float *want = all->data + (size_t)(h - 1) * T * n_k;
    double slopes[64];
    alibi_slopes(H, slopes);

    float *got = case_output("bias", (size_t)T * n_k);
    case_calling();
    my_alibi_bias(H, h, T, n_k, got);
    case_called();

    for (int i = 0; i < T && i < n_k; i++)
        expect_that(got[(size_t)i * n_k + i] == 0.0f, 1,
                    "bias[%d][%d] is %g: a key at the query's own position is at distance 0 "
                    "and gets no penalty", i, i, (double)got[(size_t)i * n_k + i]);
    for (size_t e = 0; e < (size_t)T * n_k; e++)
        expect_that(got[e] <= 0.0f, 1,
                    "bias[%zu][%zu] is %g, above 0: ALiBi subtracts m_h |i - j|, a penalty "
                    "that grows with the distance (is the slope's sign right?)", e / n_k, e % n_k,
                    (double)got[e]);
    if (n_k > 1) {
        double slope = -got[1];
        expect_that(fabs(slope - slopes[h - 1]) <= 1e-6 * slopes[h - 1], 2,
                    "head %d of %d has slope %.7g, must be %.7g%s", h, H, slope, slopes[h - 1],
                    (H & (H - 1)) == 0 ? ": 2^(-8h/H)"
                                       : ": H is not a power of two (hint 2 says how the paper "
                                         "picks them)");
    }
    expect_close_floats("bias", want, got, SHAPE(T, n_k), 0.0, 1e-6, 3);
}

const Exercise exercise = {"alibi_bias", "06_permutation_invariance", "6.6", 100, grade_case,
                           "alibi_bias alibi_slopes alibi_add_bias", "relative_positions.md"};
