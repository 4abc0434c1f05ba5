/*
 * test_robustness.c - numbers far from 1: scores of 1e4 and far beyond,
 * rows of a million keys, values near the smallest and the largest float.
 * Wherever the mathematical weights are finite, the computed ones must be
 * finite too, and close to values worked out here by hand or in double.
 *
 * Covers softmax_row, masked_softmax, dot_product_attention and the
 * multi-head layer.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "helpers.h"
#include "multihead.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

/* How many of the n values are NaN or infinite; prints the first. */
static size_t count_not_finite(const float *x, size_t n, const char *what)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && bad++ == 0)
            cr_log_error("%s: element %zu is %g", what, i, (double)x[i]);
    return bad;
}

/* ---- softmax_row ---------------------------------------------------------- */

Test(robustness, softmax_row_scores_of_1e4)
{
    /* Only differences count: [1e4, -1e4, 0, 9999] is [0, -2e4, -1e4, -1]
     * after the maximum is taken away, and exp(-1e4) is 0 in any precision:
     * the weights are 1 / (1 + e^-1) and e^-1 / (1 + e^-1). */
    float row[4] = {1e4f, -1e4f, 0.0f, 9999.0f};
    const float expected[4] = {0.7310585786f, 0.0f, 0.0f, 0.2689414214f};
    softmax_row(row, 4);
    cr_expect_eq(count_not_finite(row, 4, "weights"), 0);
    cr_expect(floats_allclose(row, expected, 4, 1e-7f, 1e-6f, stderr));
}

Test(robustness, softmax_row_from_1e4_to_the_largest_float)
{
    /* [M, -M, M / 2, M]: two equal maxima share the weight, the rest is
     * exp(-M / 2) or exp(-2M) = 0. For M = 3e38, -M - M overflows to -inf,
     * and exp(-inf) = 0 is still right. */
    const float magnitudes[] = {1e4f, 1e6f, 1e10f, 1e20f, 1e30f, 3e38f, FLT_MAX};
    for (size_t m = 0; m < sizeof magnitudes / sizeof magnitudes[0]; m++) {
        const float M = magnitudes[m];
        float row[4] = {M, -M, 0.5f * M, M};
        const float expected[4] = {0.5f, 0.0f, 0.0f, 0.5f};
        softmax_row(row, 4);
        cr_expect_eq(count_not_finite(row, 4, "weights"), 0, "M = %g", (double)M);
        cr_expect(floats_allclose(row, expected, 4, 0.0f, 0.0f, stderr), "M = %g", (double)M);

        /* a row of one score repeated, however large or small: uniform */
        float same[3] = {M, M, M}, lowest[3] = {-M, -M, -M};
        const float third[3] = {1.0f / 3.0f, 1.0f / 3.0f, 1.0f / 3.0f};
        softmax_row(same, 3);
        softmax_row(lowest, 3);
        cr_expect(floats_allclose(same, third, 3, 0.0f, 1e-7f, stderr), "M = %g", (double)M);
        cr_expect(floats_allclose(lowest, third, 3, 0.0f, 1e-7f, stderr), "-M = %g",
                  (double)-M);
    }
}

Test(robustness, softmax_row_tiny_values)
{
    /* Subnormal and tiny scores all round exp to 1: uniform weights. */
    float row[5] = {1e-45f, 0.0f, -1e-45f, 1e-38f, -0.0f};
    const float expected[5] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
    softmax_row(row, 5);
    cr_expect(floats_allclose(row, expected, 5, 0.0f, 1e-7f, stderr));

    /* tiny against huge: all of the weight on the huge one */
    float mixed[3] = {1e-30f, 1e30f, -1e-30f};
    const float one_hot[3] = {0.0f, 1.0f, 0.0f};
    softmax_row(mixed, 3);
    cr_expect(floats_allclose(mixed, one_hot, 3, 0.0f, 0.0f, stderr));
}

enum { LONG_ROW = 1000000 };

Test(robustness, softmax_row_of_a_million_keys)
{
    /* scores 30 sin(j / 1000) in [-30, 30]: weights from about 1e-32 to
     * 1e-5, every one checked against the same formula in double */
    float *row = malloc(LONG_ROW * sizeof *row);
    double *reference = malloc(LONG_ROW * sizeof *reference);
    cr_assert(row && reference);
    double max = -INFINITY, sum = 0.0;
    for (int j = 0; j < LONG_ROW; j++) {
        row[j] = 30.0f * sinf((float)j / 1000.0f);
        max = fmax(max, row[j]);
    }
    for (int j = 0; j < LONG_ROW; j++) {
        reference[j] = exp((double)row[j] - max);
        sum += reference[j];
    }
    softmax_row(row, LONG_ROW);
    size_t worst = 0, not_finite = count_not_finite(row, LONG_ROW, "weights");
    double worst_rel = 0.0, total = 0.0;
    for (int j = 0; j < LONG_ROW; j++) {
        double want = reference[j] / sum;
        /* float exp and one division: a few units in the last place */
        double rel = fabs(row[j] - want) / want;
        if (rel > worst_rel) {
            worst_rel = rel;
            worst = (size_t)j;
        }
        total += row[j];
    }
    cr_expect_eq(not_finite, 0);
    cr_expect_lt(worst_rel, 1e-5, "weight %zu: %g, expected %g (relative error %g)", worst,
                 (double)row[worst], reference[worst] / sum, worst_rel);
    cr_expect(fabs(total - 1.0) < 1e-5, "the weights sum to %.9f", total);

    /* a million equal scores of 1e4: each weight is 1e-6 */
    for (int j = 0; j < LONG_ROW; j++)
        row[j] = 1e4f;
    softmax_row(row, LONG_ROW);
    size_t off = 0;
    for (int j = 0; j < LONG_ROW; j++)
        off += fabsf(row[j] - 1e-6f) > 1e-6f * 1e-6f;
    cr_expect_eq(off, 0, "%zu of a million equal scores did not get weight 1e-6 (first %g)",
                 off, (double)row[0]);
    free(row);
    free(reference);
}

/* ---- masked_softmax ---------------------------------------------------------- */

Test(robustness, masked_softmax_huge_scores)
{
    /* x (2, 2, 5) with entries up to 3e38 in size, one valid_len per query.
     * The weights of the valid keys are softmax over those keys alone, in
     * double here; masked keys get exactly 0, a query with no key a zero row. */
    enum { B = 2, T = 2, K = 5 };
    const float values[B * T * K] = {
        1e4f,  -2e4f,  9999.5f, 3e38f,  -3e38f,
        -3e38f, 2e30f, 2e30f,   1e-40f, 5.0f,
        7.0f,  3e38f,  -1e38f,  1e4f,   0.0f,
        2e10f, -2e10f, 1.0f,    1e38f,  -1.0f,
    };
    const int lens[B * T] = {3, 5, 1, 0};
    Tensor *x = tensor_from(values, SHAPE(B, T, K));
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    Tensor *weights = masked_softmax(x, valid_lens);
    cr_expect_eq(count_not_finite(weights->data, weights->size, "weights"), 0);

    Tensor *expected = tensor_zeros(SHAPE(B, T, K));
    for (int row = 0; row < B * T; row++) {
        const float *scores = values + row * K;
        double max = -INFINITY, sum = 0.0;
        for (int j = 0; j < lens[row]; j++)
            max = fmax(max, scores[j]);
        for (int j = 0; j < lens[row]; j++)
            sum += exp((double)scores[j] - max);
        for (int j = 0; j < lens[row]; j++)
            expected->data[row * K + j] = (float)(exp((double)scores[j] - max) / sum);
    }
    /* spot values: row 0 is [1, 0, e^-0.5] / (1 + e^-0.5); row 2 keeps key 0 */
    cr_expect(fabsf(expected->data[0] - 0.6224593312f) < 1e-7f);
    cr_expect_eq(expected->data[2 * K], 1.0f);
    expect_close(weights, expected, 1e-7f, 1e-6f);
    for (int row = 0; row < B * T; row++)
        for (int j = lens[row]; j < K; j++)
            cr_expect_eq(weights->data[row * K + j], 0.0f, "masked weight [%d][%d] is %g", row,
                         j, (double)weights->data[row * K + j]);
    tensor_free(x);
    tensor_free(weights);
    tensor_free(expected);
    valid_lens_free(valid_lens);
}

/* ---- dot_product_attention ----------------------------------------------------- */

Test(robustness, attention_scores_of_5000_and_1e36)
{
    /* queries (1, 2, 4), keys (1, 3, 4), values (1, 3, 2). Query 0 points
     * along key 0; query 1 is orthogonal to every key. With a = 100 the
     * scores of query 0 are a^2 / 2 = 5000, 0 and -5000; with a = 1e18 they
     * are 5e35: weights [1, 0, 0] either way, and the output is value 0.
     * Query 1 scores 0 everywhere: uniform weights, the mean of the values. */
    const float magnitudes[] = {100.0f, 1e9f, 1e18f};
    for (size_t m = 0; m < sizeof magnitudes / sizeof magnitudes[0]; m++) {
        const float a = magnitudes[m];
        Tensor *queries = tensor_from((const float[]){a, 0, 0, 0, 0, 0, 0, a}, SHAPE(1, 2, 4));
        Tensor *keys = tensor_from((const float[]){a, 0, 0, 0, 0, a, 0, 0, -a, 0, 0, 0},
                                   SHAPE(1, 3, 4));
        Tensor *values = tensor_from((const float[]){3, -1, 0.5f, 4, -2, 6}, SHAPE(1, 3, 2));
        Tensor *weights = NULL;
        Tensor *out = dot_product_attention(queries, keys, values, NULL, NULL, &weights);
        Tensor *want_weights = tensor_from(
            (const float[]){1, 0, 0, 1.0f / 3, 1.0f / 3, 1.0f / 3}, SHAPE(1, 2, 3));
        Tensor *want_out = tensor_from((const float[]){3, -1, 1.5f / 3, 9.0f / 3},
                                       SHAPE(1, 2, 2));
        cr_expect_eq(count_not_finite(weights->data, weights->size, "weights"), 0, "a = %g",
                     (double)a);
        cr_expect(tensor_allclose(weights, want_weights, 0.0f, 1e-7f, stderr), "a = %g",
                  (double)a);
        cr_expect(tensor_allclose(out, want_out, 1e-6f, 1e-6f, stderr), "a = %g", (double)a);
        tensor_free(queries);
        tensor_free(keys);
        tensor_free(values);
        tensor_free(weights);
        tensor_free(out);
        tensor_free(want_weights);
        tensor_free(want_out);
    }
}

Test(robustness, attention_tiny_queries_and_huge_values)
{
    /* Queries of 1e-30 make every score 0 (1e-60 underflows): uniform
     * weights. Values of 1e38 are near the largest float, and their mean
     * must not overflow on the way. */
    Tensor *queries = tensor_full(1e-30f, SHAPE(1, 1, 2));
    Tensor *keys = tensor_from((const float[]){1e-30f, 2e-30f, -1e-30f, 0, 3e-30f, 1e-30f},
                               SHAPE(1, 3, 2));
    Tensor *values = tensor_from((const float[]){1e38f, -3e38f, 1e38f, 3e38f, 1e38f, 1e-38f},
                                 SHAPE(1, 3, 2));
    Tensor *weights = NULL;
    Tensor *out = dot_product_attention(queries, keys, values, NULL, NULL, &weights);
    Tensor *want_weights = tensor_full(1.0f / 3, SHAPE(1, 1, 3));
    Tensor *want_out = tensor_from((const float[]){1e38f, 0.0f}, SHAPE(1, 1, 2));
    cr_expect_eq(count_not_finite(out->data, out->size, "output"), 0);
    cr_expect(tensor_allclose(weights, want_weights, 0.0f, 1e-7f, stderr));
    /* 1e38 / 3 three times, and 1e38 - 1e38 up to rounding: 1e32 is 1e-6 of 1e38 */
    cr_expect(tensor_allclose(out, want_out, 1e32f, 1e-6f, stderr));
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    tensor_free(weights);
    tensor_free(out);
    tensor_free(want_weights);
    tensor_free(want_out);
}

Test(robustness, attention_over_a_million_keys)
{
    /* queries (1, 2, 2), keys (1, K, 2), values (1, K, 1) with K = 1e6.
     * Key j is [0, 1] except key PEAK, [200, 1]. Query 0 = [0, 0] scores 0
     * everywhere: weight 1e-6 each, the output is the mean of the values.
     * Query 1 = [100, 0] scores 20000 / sqrt(2) on the peak and 0 elsewhere:
     * all the weight on the peak, the output is its value. */
    enum { K = LONG_ROW, PEAK = 777777 };
    Tensor *queries = tensor_from((const float[]){0, 0, 100, 0}, SHAPE(1, 2, 2));
    Tensor *keys = tensor_zeros(SHAPE(1, K, 2));
    Tensor *values = tensor_zeros(SHAPE(1, K, 1));
    double mean = 0.0;
    for (int j = 0; j < K; j++) {
        AT3(keys, 0, j, 1) = 1.0f;
        AT3(values, 0, j, 0) = (float)(j % 7) - 2.5f;   /* -2.5 .. 3.5 */
        mean += AT3(values, 0, j, 0);
    }
    mean /= K;
    AT3(keys, 0, PEAK, 0) = 200.0f;
    AT3(values, 0, PEAK, 0) = 42.0f;
    mean += (42.0 - ((double)(PEAK % 7) - 2.5)) / K;

    Tensor *weights = NULL;
    Tensor *out = dot_product_attention(queries, keys, values, NULL, NULL, &weights);
    cr_expect_eq(count_not_finite(weights->data, weights->size, "weights"), 0);
    double sum0 = 0.0, sum1 = 0.0;
    size_t off = 0;
    for (int j = 0; j < K; j++) {
        sum0 += AT3(weights, 0, 0, j);
        sum1 += AT3(weights, 0, 1, j);
        off += fabsf(AT3(weights, 0, 0, j) - 1e-6f) > 1e-12f;
    }
    cr_expect_eq(off, 0, "%zu uniform weights differ from 1e-6", off);
    cr_expect(fabs(sum0 - 1.0) < 1e-5, "query 0's weights sum to %.9f", sum0);
    cr_expect(fabs(sum1 - 1.0) < 1e-6, "query 1's weights sum to %.9f", sum1);
    cr_expect_eq(AT3(weights, 0, 1, PEAK), 1.0f);
    /* a million float additions drift by about 1e-4 of the total; the
     * difference that would show a bug is of the order of the values */
    cr_expect(fabs(AT3(out, 0, 0, 0) - mean) < 1e-3, "mean of the values: %.6f, expected %.6f",
              (double)AT3(out, 0, 0, 0), mean);
    cr_expect_eq(AT3(out, 0, 1, 0), 42.0f);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    tensor_free(weights);
    tensor_free(out);
}

/* ---- the multi-head layer ------------------------------------------------------ */

/* A layer with D = 4, H = 2 (heads of size 2) and hand-set weights:
 * W_q = scale * I, W_k = W_v = W_o = I, no biases. Head 0 sees dimensions
 * 0-1 of each token, head 1 dimensions 2-3. */
static MultiHeadAttention *scaled_identity_layer(float scale)
{
    Rng rng = rng_new(0);
    MultiHeadAttention *layer = multihead_new(4, 4, 4, 4, 2, 0.0f, false, &rng);
    Tensor *const weights[] = {layer->W_q, layer->W_k, layer->W_v, layer->W_o};
    for (int w = 0; w < 4; w++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                AT2(weights[w], i, j) = i == j ? (w == 0 ? scale : 1.0f) : 0.0f;
    return layer;
}

Test(robustness, multihead_huge_and_tiny_scores)
{
    /* queries (1, 1, 4) = [10, 0, 0, 10]; keys = values (1, 3, 4):
     *   key 0 [10, 0, 0, 10]   matches the query in both heads
     *   key 1 [0, 10, 10, 0]   orthogonal to it in both heads
     *   key 2 [20, 0, 0, 20]   twice key 0: the best match, when visible
     * With W_q = s * I a head's scores are s * [100, 0, 200] / sqrt(2). */
    Tensor *queries = tensor_from((const float[]){10, 0, 0, 10}, SHAPE(1, 1, 4));
    Tensor *keys = tensor_from((const float[]){10, 0, 0, 10, 0, 10, 10, 0, 20, 0, 0, 20},
                               SHAPE(1, 3, 4));
    ValidLens *first_two = valid_lens_1d((const int[]){2}, 1);
    ValidLens *none = valid_lens_1d((const int[]){0}, 1);
    const struct {
        float scale;
        const ValidLens *valid_lens;
        float weights[3];   /* the same in both heads */
        float output[4];
    } cases[] = {
        /* scores 1.4e5 apart: all on key 2 */
        {1e3f, NULL, {0, 0, 1}, {20, 0, 0, 20}},
        /* key 2 masked: key 0 wins over key 1 by 7e4 */
        {1e3f, first_two, {1, 0, 0}, {10, 0, 0, 10}},
        /* scores of 1.4e19 */
        {1e17f, NULL, {0, 0, 1}, {20, 0, 0, 20}},
        {1e17f, first_two, {1, 0, 0}, {10, 0, 0, 10}},
        /* scores of 1e-28: uniform, the mean of the values */
        {1e-30f, NULL, {1.0f / 3, 1.0f / 3, 1.0f / 3}, {10, 10.0f / 3, 10.0f / 3, 10}},
        /* no key at all: zero weights, zero output, no NaN */
        {1e17f, none, {0, 0, 0}, {0, 0, 0, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        MultiHeadAttention *layer = scaled_identity_layer(cases[c].scale);
        Tensor *weights = NULL;
        Tensor *out = multihead_forward(layer, queries, keys, keys, cases[c].valid_lens, false,
                                        NULL, &weights);
        const float *w = cases[c].weights;
        Tensor *want_weights = tensor_from((const float[]){w[0], w[1], w[2], w[0], w[1], w[2]},
                                           SHAPE(1, 2, 1, 3));
        Tensor *want_out = tensor_from(cases[c].output, SHAPE(1, 1, 4));
        cr_expect_eq(count_not_finite(weights->data, weights->size, "weights"), 0, "case %zu", c);
        cr_expect_eq(count_not_finite(out->data, out->size, "output"), 0, "case %zu", c);
        cr_expect(tensor_allclose(weights, want_weights, 0.0f, 1e-7f, stderr), "case %zu", c);
        cr_expect(tensor_allclose(out, want_out, 1e-5f, 1e-6f, stderr), "case %zu", c);
        tensor_free(weights);
        tensor_free(out);
        tensor_free(want_weights);
        tensor_free(want_out);
        multihead_free(layer);
    }
    tensor_free(queries);
    tensor_free(keys);
    valid_lens_free(first_two);
    valid_lens_free(none);
}

Test(robustness, multihead_random_inputs_of_1e3)
{
    /* d2l's sizes (D = 100, H = 5, B = 2, T = 4, K = 6) with inputs of size
     * about 1e3: scores in the tens of thousands. Every weight is finite,
     * each row sums to 1 and masked keys get exactly 0. */
    enum { B = 2, T = 4, K = 6, D = 100, H = 5 };
    Rng rng = rng_new(11);
    MultiHeadAttention *layer = multihead_new(D, D, D, D, H, 0.0f, true, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1e3f, SHAPE(B, T, D));
    Tensor *y = tensor_normal(&rng, 0.0f, 1e3f, SHAPE(B, K, D));
    ValidLens *valid_lens = valid_lens_2d((const int[]){6, 1, 3, 5, 2, 4, 6, 1}, B, T);
    Tensor *weights = NULL;
    Tensor *out = multihead_forward(layer, x, y, y, valid_lens, false, NULL, &weights);
    cr_expect_eq(count_not_finite(out->data, out->size, "output"), 0);
    cr_expect_eq(count_not_finite(weights->data, weights->size, "weights"), 0);
    float largest = 0.0f;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double sum = 0.0;
                int len = valid_len_at(valid_lens, b, t);
                for (int j = 0; j < K; j++) {
                    float wt = AT4(weights, b, h, t, j);
                    sum += wt;
                    largest = fmaxf(largest, wt);
                    if (j >= len)
                        cr_expect_eq(wt, 0.0f, "weight [%d, %d, %d, %d] = %g past valid_len %d",
                                     b, h, t, j, (double)wt, len);
                }
                cr_expect(fabs(sum - 1.0) < 1e-6, "row [%d, %d, %d] sums to %.9f", b, h, t, sum);
            }
    /* scores this large make most rows nearly one-hot */
    cr_expect_gt(largest, 0.999f);
    tensor_free(x);
    tensor_free(y);
    tensor_free(weights);
    tensor_free(out);
    valid_lens_free(valid_lens);
    multihead_free(layer);
}
