/*
 * test_additive.c - additive attention and Nadaraya-Watson kernel
 * regression (chapter 03's page additive.md).
 *
 * A case worked on paper, PyTorch references (fixtures/additive/, made by
 * fixtures/make_additive_fixtures.py with d2l's AdditiveAttention in eval
 * mode and d2l's nadaraya_watson), and properties on seeded random inputs:
 * rows sum to 1, masked weights exactly 0, masked values never read.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "additive_attention.h"
#include "helpers.h"
#include "io/npy.h"
#include "kernel_regression.h"
#include "random.h"

#define FIXTURES "tests/fixtures/additive"

/* Weights are softmax outputs of scores that went through h tanh's and a
 * sum: a few float roundings from PyTorch's. Outputs are sums of n_k
 * products of those: a few more. */
static const float WEIGHT_ATOL = 1e-6f, WEIGHT_RTOL = 1e-5f;
static const float OUT_ATOL = 2e-6f, OUT_RTOL = 1e-5f;
/* Nadaraya-Watson against a float64 reference: float32 scores and a
 * float32 softmax, summed in double. */
static const float NW_ATOL = 1e-5f, NW_RTOL = 1e-5f;

/* ---- on paper ------------------------------------------------------------- */

/* h = 1, W_q = W_k = w_v = [[1]]: score = tanh(q + k).
 *   q = 0, keys [0, 20]: scores [tanh 0, tanh 20] = [0, 1] (tanh 20 is 1
 *   in float32), weights [1 / (1 + e), e / (1 + e)] = [0.2689414, 0.7310586];
 *   values [10, -10] -> 0.2689414 * 10 - 0.7310586 * 10 = -4.621172 */
Test(additive, one_hidden_unit_on_paper)
{
    const float one[] = {1.0f};
    AdditiveAttention layer = {tensor_from(one, SHAPE(1, 1)), tensor_from(one, SHAPE(1, 1)),
                               tensor_from(one, SHAPE(1, 1))};
    Tensor *queries = tensor_zeros(SHAPE(1, 1, 1));
    Tensor *keys = tensor_from((const float[]){0.0f, 20.0f}, SHAPE(1, 2, 1));
    Tensor *values = tensor_from((const float[]){10.0f, -10.0f}, SHAPE(1, 2, 1));
    Tensor *weights = NULL;
    Tensor *out = additive_attention(&layer, queries, keys, values, NULL, NULL, &weights);
    const float weights_by_hand[] = {0.2689414f, 0.7310586f};
    const float out_by_hand[] = {-4.621172f};
    cr_assert(tensor_has_shape(weights, SHAPE(1, 1, 2)));
    cr_expect(floats_allclose(weights->data, weights_by_hand, 2, 1e-7f, 1e-6f, stderr));
    cr_expect(floats_allclose(out->data, out_by_hand, 1, 1e-6f, 1e-6f, stderr));
    TENSOR_FREE(queries, keys, values, weights, out);
    additive_attention_free(&layer);
}

/* ---- against PyTorch -------------------------------------------------------- */

static Tensor *load(const char *dir, const char *name)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert(x != NULL, "%s", err);
    return x;
}

/* valid_lens.npy (B,) or (B, T) as a ValidLens; NULL when the case has none */
static ValidLens *load_lens(const char *dir)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fclose(f);
    Tensor *lens = npy_load(path, err, sizeof err);
    cr_assert(lens != NULL, "%s", err);
    int values[64];
    cr_assert_leq(lens->size, 64);
    for (size_t i = 0; i < lens->size; i++)
        values[i] = (int)lens->data[i];
    ValidLens *valid_lens = lens->ndim == 1 ? valid_lens_1d(values, lens->shape[0])
                                            : valid_lens_2d(values, lens->shape[0],
                                                            lens->shape[1]);
    tensor_free(lens);
    return valid_lens;
}

static void check_case(const char *name)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    AdditiveAttention layer = {load(dir, "W_q"), load(dir, "W_k"), load(dir, "w_v")};
    Tensor *queries = load(dir, "queries"), *keys = load(dir, "keys");
    Tensor *values = load(dir, "values");
    Tensor *expected_output = load(dir, "expected_output");
    Tensor *expected_weights = load(dir, "expected_weights");
    ValidLens *valid_lens = load_lens(dir);
    Tensor *weights = NULL;
    Tensor *output = additive_attention(&layer, queries, keys, values, valid_lens, NULL,
                                        &weights);
    cr_assert(tensor_has_shape(output, expected_output->ndim, expected_output->shape), "%s",
              name);
    cr_assert(tensor_has_shape(weights, expected_weights->ndim, expected_weights->shape), "%s",
              name);
    cr_expect(tensor_allclose(weights, expected_weights, WEIGHT_ATOL, WEIGHT_RTOL, stderr),
              "%s: weights differ from PyTorch", name);
    cr_expect(tensor_allclose(output, expected_output, OUT_ATOL, OUT_RTOL, stderr),
              "%s: output differs from PyTorch", name);
    /* d2l's -1e6 underflows to exactly 0; ours is exactly 0 by construction */
    for (size_t i = 0; i < weights->size; i++)
        if (expected_weights->data[i] == 0.0f)
            cr_expect_eq(weights->data[i], 0.0f, "%s: masked weight %zu is %g", name, i,
                         (double)weights->data[i]);
    TENSOR_FREE(queries, keys, values, expected_output, expected_weights, weights, output);
    valid_lens_free(valid_lens);
    additive_attention_free(&layer);
}

Test(additive, matches_pytorch_d2l_shapes_lens_1d) { check_case("d2l_shapes"); }
Test(additive, matches_pytorch_lens_2d) { check_case("lens_2d"); }
Test(additive, matches_pytorch_without_mask) { check_case("no_mask"); }

Test(additive, nadaraya_watson_matches_d2l)
{
    const char *dir = FIXTURES "/nadaraya_watson";
    Tensor *x_train = load(dir, "x_train"), *y_train = load(dir, "y_train");
    Tensor *x_val = load(dir, "x_val");
    static const char *const sigmas[] = {"0.1", "0.5", "1"};
    for (int s = 0; s < 3; s++) {
        char name[64];
        snprintf(name, sizeof name, "expected_y_hat_sigma_%s", sigmas[s]);
        Tensor *expected_y_hat = load(dir, name);
        snprintf(name, sizeof name, "expected_weights_sigma_%s", sigmas[s]);
        Tensor *expected_weights = load(dir, name);
        Tensor *weights = NULL;
        Tensor *y_hat = nadaraya_watson(x_train, y_train, x_val, strtof(sigmas[s], NULL),
                                        &weights);
        cr_expect(tensor_allclose(weights, expected_weights, NW_ATOL, NW_RTOL, stderr),
                  "sigma %s: weights differ from d2l's", sigmas[s]);
        cr_expect(tensor_allclose(y_hat, expected_y_hat, NW_ATOL, NW_RTOL, stderr),
                  "sigma %s: the fit differs from d2l's", sigmas[s]);
        TENSOR_FREE(expected_y_hat, expected_weights, weights, y_hat);
    }
    TENSOR_FREE(x_train, y_train, x_val);
}

/* ---- properties ------------------------------------------------------------- */

/* Seeded random inputs, 2-D lengths with a 0 among them: every row with a
 * key sums to 1, every masked weight is exactly 0, a row without a key is
 * zero and so is its output, and masked values are never read. */
Test(additive, rows_sum_to_1_and_masked_weights_are_exactly_0)
{
    enum { B = 3, T = 4, K = 6, Q = 5, KS = 3, V = 2, HID = 7 };
    Rng rng = rng_new(2024);
    AdditiveAttention layer = additive_attention_new(Q, KS, HID, &rng);
    Tensor *queries = tensor_normal(&rng, 0.0f, 2.0f, SHAPE(B, T, Q));
    Tensor *keys = tensor_normal(&rng, 0.0f, 2.0f, SHAPE(B, K, KS));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, V));
    const int lens[B * T] = {1, 6, 3, 0, 2, 2, 5, 4, 6, 1, 0, 3};
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    Tensor *weights = NULL;
    Tensor *output = additive_attention(&layer, queries, keys, values, valid_lens, NULL,
                                        &weights);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const int len = lens[b * T + i];
            double sum = 0.0;
            for (int j = 0; j < K; j++) {
                const float w = AT3(weights, b, i, j);
                if (j >= len)
                    cr_expect_eq(w, 0.0f, "(%d, %d, %d): masked weight %g", b, i, j, (double)w);
                else
                    cr_expect_gt(w, 0.0f, "(%d, %d, %d): a valid key has weight 0", b, i, j);
                sum += w;
            }
            if (len > 0)
                cr_expect(fabs(sum - 1.0) < 1e-6, "(%d, %d): the row sums to %.9f", b, i, sum);
            else
                for (int c = 0; c < V; c++)
                    cr_expect_eq(AT3(output, b, i, c), 0.0f, "(%d, %d): no key, output %g", b,
                                 i, (double)AT3(output, b, i, c));
        }
    /* Values past every query's length changed: the output must not move. */
    Tensor *changed = tensor_copy(values);
    for (int j = 5; j < K; j++)   /* b = 0: lengths 1, 6, 3, 0, so key 5 is seen */
        AT3(changed, 1, j, 0) = 1e4f;   /* b = 1: lengths 2, 2, 5, 4, key 5 never */
    Tensor *same = additive_attention(&layer, queries, keys, changed, valid_lens, NULL, NULL);
    expect_close(same, output, 0.0f, 0.0f);
    TENSOR_FREE(queries, keys, values, weights, output, changed, same);
    valid_lens_free(valid_lens);
    additive_attention_free(&layer);
}

/* Rows of the kernel's weights sum to 1, and a wider kernel spreads them:
 * the largest weight of every row shrinks as sigma grows. */
Test(additive, nadaraya_watson_rows_sum_to_1_and_widen)
{
    Rng rng = rng_new(7);
    Tensor *x_train = tensor_uniform(&rng, 0.0f, 5.0f, SHAPE(40));
    Tensor *y_train = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(40));
    Tensor *x_query = tensor_uniform(&rng, -1.0f, 6.0f, SHAPE(9));
    double previous_peak = 2.0;
    static const float sigmas[] = {0.05f, 0.3f, 1.0f, 4.0f};
    for (int s = 0; s < 4; s++) {
        Tensor *weights = NULL;
        Tensor *y_hat = nadaraya_watson(x_train, y_train, x_query, sigmas[s], &weights);
        double peak = 0.0;
        for (int i = 0; i < 9; i++) {
            double sum = 0.0;
            for (int j = 0; j < 40; j++)
                sum += AT2(weights, i, j);
            cr_expect(fabs(sum - 1.0) < 1e-6, "sigma %g, row %d sums to %.9f",
                      (double)sigmas[s], i, sum);
            double row_peak = 0.0;
            for (int j = 0; j < 40; j++)
                row_peak = fmax(row_peak, AT2(weights, i, j));
            peak += row_peak / 9.0;
        }
        cr_expect_lt(peak, previous_peak, "sigma %g: mean largest weight %g did not shrink",
                     (double)sigmas[s], peak);
        previous_peak = peak;
        TENSOR_FREE(weights, y_hat);
    }
    TENSOR_FREE(x_train, y_train, x_query);
}

/* ---- shapes that do not fit -------------------------------------------------- */

static void w_k_of_the_wrong_key_size(void)
{
    Rng rng = rng_new(1);
    AdditiveAttention layer = additive_attention_new(4, 2, 8, &rng);
    Tensor *queries = tensor_zeros(SHAPE(2, 1, 4));
    Tensor *keys = tensor_zeros(SHAPE(2, 10, 3));
    Tensor *values = tensor_zeros(SHAPE(2, 10, 4));
    additive_attention(&layer, queries, keys, values, NULL, NULL, NULL);
}

static void sigma_of_zero(void)
{
    Tensor *x = tensor_zeros(SHAPE(3));
    nadaraya_watson(x, x, x, 0.0f, NULL);
}

Test(additive, shapes_that_do_not_fit_stop_with_a_message)
{
    expect_stops_with(w_k_of_the_wrong_key_size,
                      "tensor_check_shape: W_k expected shape (8, 3), got (8, 2)\n");
    expect_stops_with(sigma_of_zero,
                      "nadaraya_watson: sigma must be a finite number above 0, got 0\n");
}
