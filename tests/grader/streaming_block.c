/* streaming_block.c - grades exercise 3.7, one key block of streaming
 * attention for one query (03_self_attention/streaming.md): a row of keys
 * goes through the learner's function a block at a time, the state is
 * checked after every block against the one worked in double here, and
 * the output at the end against dot_product_attention (common/attention.c). */
#include "exercises.h"
#include "attention.h"
#include "grader.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    bool large = large_case(index, 120);
    int num_keys = index == 0 ? 1 : large ? draw_int(rng, 300, 700) : draw_size(rng, index, 120, 1, 12);
    int d = index == 1 ? 1 : large ? draw_int(rng, 65, 130) : draw_size(rng, index, 120, 1, 5);
    int v = large ? draw_int(rng, 65, 130) : draw_size(rng, index, 120, 1, 4);
    int block = large ? draw_int(rng, 17, 70) : draw_int(rng, 1, 4);
    float scale = draw_scale(rng, index);
    /* every third case the first keys score far below the last ones, or far above */
    float ramp = index % 3 == 0 ? 0.0f : (index % 3 == 1 ? 1.0f : -1.0f) * 3.0f * scale;
    case_describe("d = %d, v = %d, %d keys in blocks of %d, scores up to about %g", d, v,
                  num_keys, block, (double)(scale * (1 + fabsf(ramp))));
    Tensor *query = case_input("query", draw_normal(rng, 1.0f, SHAPE(1, 1, d)));
    Tensor *keys = draw_normal(rng, scale, SHAPE(1, num_keys, d));
    for (int j = 0; j < num_keys; j++)
        for (int p = 0; p < d; p++)   /* the score of key j grows (or falls) with j */
            AT3(keys, 0, j, p) += ramp * (float)j / (float)num_keys * query->data[p];
    case_input("keys", keys);
    Tensor *values = case_input("values", draw_normal(rng, 1.0f, SHAPE(1, num_keys, v)));
    Tensor *expected = case_keep(dot_product_attention(query, keys, values, NULL, NULL, NULL));

    float *max = case_output("max", 1), *sum = case_output("sum", 1);
    float *acc = case_output("acc", (size_t)v);
    *max = -INFINITY;
    *sum = 0.0f;
    for (int c = 0; c < v; c++)
        acc[c] = 0.0f;
    double want_max = -INFINITY, magnitude = 0.0;   /* the largest |q_p k_p| sum seen */
    for (int first = 0; first < num_keys; first += block) {
        int n = num_keys - first < block ? num_keys - first : block;
        /* the block's scores and the state after it, in double */
        double block_max = -INFINITY;
        for (int j = first; j < first + n; j++) {
            double s = 0.0, size = 0.0;
            for (int p = 0; p < d; p++) {
                s += (double)query->data[p] * AT3(keys, 0, j, p);
                size += fabs((double)query->data[p] * AT3(keys, 0, j, p));
            }
            block_max = fmax(block_max, s / sqrt((double)d));
            magnitude = fmax(magnitude, size / sqrt((double)d));
        }
        want_max = fmax(want_max, block_max);
        float max_before = *max;
        case_calling();
        my_streaming_block(query->data, &AT3(keys, 0, first, 0), &AT3(values, 0, first, 0), n,
                           d, v, max, sum, acc);
        case_called();
        /* float scores are good to about 1e-6 of their terms' size */
        double tol = 1e-5 * (1.0 + magnitude);
        expect_that(fabs(*max - want_max) <= tol, 2,
                    "after the block of keys %d .. %d the max is %.7g, must be %.7g: the "
                    "larger of the running max (%.7g) and the block's largest score q . k / "
                    "sqrt(d) (%.7g)", first, first + n - 1, (double)*max, want_max,
                    (double)max_before, block_max);
        double want_sum = 0.0;
        for (int j = 0; j < first + n; j++) {
            double s = 0.0;
            for (int p = 0; p < d; p++)
                s += (double)query->data[p] * AT3(keys, 0, j, p);
            want_sum += exp(s / sqrt((double)d) - *max);   /* under the learner's max */
        }
        expect_that(isfinite(*sum) && fabs(*sum - want_sum) <= (1e-4 + 1e-5 * magnitude) * want_sum, 3,
                    "after the block of keys %d .. %d the sum is %.7g, must be %.7g: sum_j "
                    "exp(s_j - max) over every key so far, the old sum rescaled by exp(old max "
                    "- new max)", first, first + n - 1, (double)*sum, want_sum);
    }
    Tensor *out = case_keep(tensor_zeros(SHAPE(1, 1, v)));
    for (int c = 0; c < v; c++)
        out->data[c] = acc[c] / *sum;
    expect_finite("acc / sum", out, 3);
    expect_close("acc / sum", expected, out, 1e-4, 1e-4, 3);
}

const Exercise exercise = {"streaming_block", "03_self_attention", "3.7", 120, grade_case,
                           "streaming_attention_rows streaming_attention", "streaming.md"};
