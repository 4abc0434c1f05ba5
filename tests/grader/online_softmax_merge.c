/* online_softmax_merge.c - grades exercise 3.6, two running softmax states
 * merged (03_self_attention/streaming.md), against the merge worked in
 * double here, and against the softmax of every score at once. Each part
 * comes from real scores, so its state is what a streaming pass holds. */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

#include <math.h>

/* scores (n,) and values (n, v) -> a state (max, sum, acc (v,)) in float */
static void state_of(const float *scores, const float *values, int n, int v, float *max,
                     float *sum, float *acc)
{
    *max = -INFINITY;
    for (int j = 0; j < n; j++)
        *max = fmaxf(*max, scores[j]);
    *sum = 0.0f;
    for (int c = 0; c < v; c++)
        acc[c] = 0.0f;
    for (int j = 0; j < n; j++) {
        float e = expf(scores[j] - *max);
        *sum += e;
        for (int c = 0; c < v; c++)
            acc[c] += e * values[j * v + c];
    }
}

static double weight_of(float part_max, double new_max)
{
    return part_max == -INFINITY ? 0.0 : exp((double)part_max - new_max);
}

static void grade_case(Rng *rng, int index)
{
    int v = large_case(index, 120) ? draw_int(rng, 200, 600) : draw_size(rng, index, 120, 1, 6);
    /* the first cases: an empty part on either side, then both */
    int n1 = index == 0 || index == 2 ? 0 : draw_size(rng, index, 120, 1, 6);
    int n2 = index == 1 || index == 2 ? 0 : draw_size(rng, index, 120, 1, 6);
    float scale = draw_scale(rng, index);
    /* every third case the second part's scores sit far above or below */
    float shift = index % 3 == 0 ? 0.0f : (index % 3 == 1 ? 1.0f : -1.0f) * 20.0f * scale;
    case_describe("v = %d, %d keys in the first part, %d in the second, scores up to about "
                  "%g, the second's shifted by %g", v, n1, n2, (double)scale, (double)shift);
    int n = n1 + n2;
    Tensor *scores = case_keep(draw_normal(rng, scale, SHAPE(n + 1)));
    for (int j = n1; j < n; j++)
        scores->data[j] += shift;
    Tensor *values = case_keep(draw_normal(rng, 1.0f, SHAPE(n + 1, v)));

    float *max = case_output("max", 1), *sum = case_output("sum", 1);
    float *acc = case_output("acc", (size_t)v);
    state_of(scores->data, values->data, n1, v, max, sum, acc);
    Tensor *other_acc = tensor_zeros(SHAPE(v));
    float other_max, other_sum;
    state_of(scores->data + n1, values->data + (size_t)n1 * v, n2, v, &other_max, &other_sum,
             other_acc->data);
    case_input("other_acc", other_acc);
    case_input("first (max, sum)", tensor_from((float[]){*max, *sum}, SHAPE(2)));
    case_input("second (max, sum)", tensor_from((float[]){other_max, other_sum}, SHAPE(2)));
    case_input("first acc", tensor_from(acc, SHAPE(v)));

    /* the merge in double: each part weighted by exp(its max - the new max) */
    float want_max = fmaxf(*max, other_max);
    double a = weight_of(*max, want_max), b = weight_of(other_max, want_max);
    Tensor *want_acc = case_keep(tensor_zeros(SHAPE(v)));
    double bound = 1e-30;
    for (int c = 0; c < v; c++) {
        want_acc->data[c] = (float)(a * acc[c] + b * other_acc->data[c]);
        bound = fmax(bound, fabs(a * acc[c]) + fabs(b * other_acc->data[c]));
    }
    double want_sum = a * *sum + b * other_sum;
    float sum_before = *sum;

    case_calling();
    my_online_softmax_merge(max, sum, acc, other_max, other_sum, other_acc->data, v);
    case_called();

    Tensor *got_acc = case_keep(tensor_from(acc, SHAPE(v)));
    if (n == 0) {
        expect_that(*max == -INFINITY && *sum == 0.0f, 1,
                    "two empty states merged into max %g, sum %g: no key seen is still "
                    "max -inf, sum 0 (mind exp(-inf - (-inf)), which is NaN)",
                    (double)*max, (double)*sum);
        for (int c = 0; c < v; c++)
            expect_that(acc[c] == 0.0f, 1, "acc[%d] is %g after merging two empty states: "
                        "must stay 0", c, (double)acc[c]);
        return;
    }
    expect_that(*max == want_max, 2, "the new max is %g, must be the larger of the two, %g",
                (double)*max, (double)want_max);
    expect_that(isfinite(*sum), 1, "sum is %g: an empty part has max -inf and weighs "
                "exactly 0, and exp of a score minus the new max is at most 1", (double)*sum);
    expect_finite("acc", got_acc, 1);
    /* the sums added as they were, though a maximum moved */
    bool moved = fabs(a - 1.0) > 1e-3 || fabs(b - 1.0) > 1e-3;
    double plain = (double)sum_before + other_sum;
    expect_that(!(moved && fabs(*sum - plain) <= 1e-5 * plain && fabs(plain - want_sum) > 1e-3 * want_sum),
                3, "sum is %g, the two sums added as they were: when the maximum moves, the "
                "sum under the old maximum is not rescaled by exp(old max - new max) (must be "
                "%g)", (double)*sum, want_sum);
    expect_that(fabs(*sum - want_sum) <= 1e-5 * want_sum, 3,
                "sum is %.7g, must be %.7g: each part's sum times exp(its max - the new max)",
                (double)*sum, want_sum);
    double atol = 2e-6 * bound;
    expect_close_floats("acc", want_acc->data, acc, SHAPE(v), atol, 1e-5, 3);
    /* and the output is the softmax of every score at once, times the values */
    Tensor *weights = case_keep(tensor_from(scores->data, SHAPE(n)));
    softmax_row(weights->data, n);
    for (int c = 0; c < v; c++) {
        double out = 0.0;
        for (int j = 0; j < n; j++)
            out += (double)weights->data[j] * values->data[(size_t)j * v + c];
        expect_that(fabs(acc[c] / *sum - out) <= 1e-4 * (1 + fabs(out)), 3,
                    "acc[%d] / sum is %.6g, but the attention over both parts' keys is %.6g",
                    c, (double)(acc[c] / *sum), out);
    }
}

const Exercise exercise = {"online_softmax_merge", "03_self_attention", "3.6", 120, grade_case,
                           "streaming_attention_rows", "streaming.md"};
