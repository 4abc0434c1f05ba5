/*
 * test_attention.c - scaled dot-product attention and dropout (chapter 03).
 *
 * A 2x2 case worked on paper, PyTorch references (fixtures/attention_ref.h,
 * made by fixtures/make_attention_fixtures.py with d2l's
 * DotProductAttention in eval mode), and properties of dropout.
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention.h"
#include "softmax.h"
#include "fixtures/attention_ref.h"
#include "helpers.h"

/* Outputs are sums of K products: allow a few float roundings more than
 * for the weights. */
static const float WEIGHT_ATOL = 1e-6f, WEIGHT_RTOL = 1e-6f;
static const float OUT_ATOL = 2e-6f, OUT_RTOL = 1e-5f;

/* ---- on paper ------------------------------------------------------------- */

/* queries, keys (1, 2, 4), values (1, 2, 2), so sqrt(d) = 2:
 *   q0 = [1, 1, 0, 0]   k0 = [1, 1, 0, 0]   v0 = [10,  0]
 *   q1 = [0, 0, 2, 0]   k1 = [0, 0, 1, 1]   v1 = [ 0, 20]
 *   Q K^T = [[2, 0], [0, 2]], divided by 2 -> [[1, 0], [0, 1]]
 *   softmax([1, 0]) = [e / (e + 1), 1 / (e + 1)] = [0.7310586, 0.2689414]
 *   out0 = 0.7310586 * v0 + 0.2689414 * v1 = [7.310586, 5.378828]
 *   out1 = 0.2689414 * v0 + 0.7310586 * v1 = [2.689414, 14.621172] */
static const float paper_queries[] = {1, 1, 0, 0, 0, 0, 2, 0};
static const float paper_keys[] = {1, 1, 0, 0, 0, 0, 1, 1};
static const float paper_values[] = {10, 0, 0, 20};

Test(attention, two_by_two_on_paper)
{
    Tensor *queries = tensor_from(paper_queries, SHAPE(1, 2, 4));
    Tensor *keys = tensor_from(paper_keys, SHAPE(1, 2, 4));
    Tensor *values = tensor_from(paper_values, SHAPE(1, 2, 2));
    const float weights_by_hand[] = {0.7310586f, 0.2689414f, 0.2689414f, 0.7310586f};
    const float out_by_hand[] = {7.310586f, 5.378828f, 2.689414f, 14.621172f};
    Tensor *weights = NULL;
    Tensor *out = dot_product_attention(queries, keys, values, NULL, NULL, &weights);
    cr_assert(tensor_has_shape(out, SHAPE(1, 2, 2)));
    cr_assert(tensor_has_shape(weights, SHAPE(1, 2, 2)));
    cr_expect(floats_allclose(weights->data, weights_by_hand, 4, 1e-7f, 1e-6f, stderr));
    cr_expect(floats_allclose(out->data, out_by_hand, 4, 1e-6f, 1e-6f, stderr));
    tensor_free(weights);
    tensor_free(out);

    /* valid_lens [1]: both queries may only look at key 0, so both get v0. */
    ValidLens *valid_lens = valid_lens_1d((const int[]){1}, 1);
    out = dot_product_attention(queries, keys, values, valid_lens, NULL, NULL);
    const float only_v0[] = {10, 0, 10, 0};
    cr_expect(floats_allclose(out->data, only_v0, 4, 0.0f, 0.0f, stderr));
    tensor_free(out);
    valid_lens_free(valid_lens);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

/* ---- against PyTorch -------------------------------------------------------- */

/* Run attention on fixture inputs and compare output and weights. */
static void check_against_pytorch(const Tensor *queries, const Tensor *keys, const Tensor *values,
                                  const ValidLens *valid_lens, const float *expected_out,
                                  const float *expected_weights)
{
    Tensor *weights = NULL;
    Tensor *out = dot_product_attention(queries, keys, values, valid_lens, NULL, &weights);
    cr_assert(tensor_has_shape(out, SHAPE(queries->shape[0], queries->shape[1], values->shape[2])));
    cr_assert(tensor_has_shape(weights, SHAPE(queries->shape[0], queries->shape[1], keys->shape[1])));
    cr_expect(floats_allclose(weights->data, expected_weights, weights->size,
                              WEIGHT_ATOL, WEIGHT_RTOL, stderr), "weights differ from PyTorch");
    cr_expect(floats_allclose(out->data, expected_out, out->size, OUT_ATOL, OUT_RTOL, stderr),
              "output differs from PyTorch");
    tensor_free(weights);
    tensor_free(out);
}

Test(attention, matches_pytorch_unmasked_masked_1d_and_2d)
{
    Tensor *queries = tensor_from(masked_queries, SHAPE(2, 3, 4));
    Tensor *keys = tensor_from(masked_keys, SHAPE(2, 5, 4));
    Tensor *values = tensor_from(masked_values, SHAPE(2, 5, 3));
    check_against_pytorch(queries, keys, values, NULL, masked_out_none, masked_weights_none);

    ValidLens *lens_1d = valid_lens_1d((const int[]){2, 4}, 2);
    check_against_pytorch(queries, keys, values, lens_1d, masked_out_lens_2_4,
                          masked_weights_lens_2_4);

    ValidLens *lens_2d = valid_lens_2d((const int[]){1, 5, 3, 2, 2, 4}, 2, 3);
    check_against_pytorch(queries, keys, values, lens_2d, masked_out_lens_2d,
                          masked_weights_lens_2d);

    valid_lens_free(lens_1d);
    valid_lens_free(lens_2d);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

Test(attention, matches_pytorch_cross_attention)
{
    /* 2 queries of size 6 over 7 key-value pairs, values of size 3. */
    Tensor *queries = tensor_from(cross_queries, SHAPE(2, 2, 6));
    Tensor *keys = tensor_from(cross_keys, SHAPE(2, 7, 6));
    Tensor *values = tensor_from(cross_values, SHAPE(2, 7, 3));
    check_against_pytorch(queries, keys, values, NULL, cross_out, cross_weights);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

Test(attention, d2l_check_with_values)
{
    /* d2l: queries (2, 1, 2), keys (2, 10, 2), values (2, 10, 4),
     * valid_lens [2, 6] -> (2, 1, 4). */
    Tensor *queries = tensor_from(d2l_queries, SHAPE(2, 1, 2));
    Tensor *keys = tensor_from(d2l_keys, SHAPE(2, 10, 2));
    Tensor *values = tensor_from(d2l_values, SHAPE(2, 10, 4));
    ValidLens *valid_lens = valid_lens_1d((const int[]){2, 6}, 2);
    check_against_pytorch(queries, keys, values, valid_lens, d2l_out, d2l_weights);

    /* The masked keys carry weight exactly 0, so changing their values
     * cannot change the output. */
    Tensor *changed = tensor_copy(values);
    for (int j = 2; j < 10; j++)
        AT3(changed, 0, j, 1) = 1000.0f;
    for (int j = 6; j < 10; j++)
        AT3(changed, 1, j, 3) = -1000.0f;
    Tensor *a = dot_product_attention(queries, keys, values, valid_lens, NULL, NULL);
    Tensor *b = dot_product_attention(queries, keys, changed, valid_lens, NULL, NULL);
    expect_close(b, a, 0.0f, 0.0f);
    tensor_free(a);
    tensor_free(b);
    tensor_free(changed);
    valid_lens_free(valid_lens);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

Test(attention, zero_valid_keys_give_a_zero_output)
{
    Tensor *queries = tensor_from(masked_queries, SHAPE(2, 3, 4));
    Tensor *keys = tensor_from(masked_keys, SHAPE(2, 5, 4));
    Tensor *values = tensor_from(masked_values, SHAPE(2, 5, 3));
    ValidLens *valid_lens = valid_lens_2d((const int[]){0, 5, 3, 2, 0, 4}, 2, 3);
    Tensor *weights = NULL;
    Tensor *out = dot_product_attention(queries, keys, values, valid_lens, NULL, &weights);
    for (int j = 0; j < 3; j++) {
        cr_expect(AT3(out, 0, 0, j) == 0.0f, "out[0, 0, %d] = %g", j, (double)AT3(out, 0, 0, j));
        cr_expect(AT3(out, 1, 1, j) == 0.0f, "out[1, 1, %d] = %g", j, (double)AT3(out, 1, 1, j));
    }
    for (int j = 0; j < 5; j++)
        cr_expect(AT3(weights, 0, 0, j) == 0.0f && AT3(weights, 1, 1, j) == 0.0f);
    /* Row [0, 1] has all 5 keys: it equals PyTorch's unmasked row. */
    cr_expect(floats_allclose(&AT3(out, 0, 1, 0), &masked_out_none[3], 3, OUT_ATOL, OUT_RTOL,
                              stderr));
    tensor_free(out);
    tensor_free(weights);
    valid_lens_free(valid_lens);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

/* ---- dropout ---------------------------------------------------------------- */

Test(dropout, eval_mode_and_p_zero_change_nothing)
{
    Tensor *queries = tensor_from(cross_queries, SHAPE(2, 2, 6));
    Tensor *keys = tensor_from(cross_keys, SHAPE(2, 7, 6));
    Tensor *values = tensor_from(cross_values, SHAPE(2, 7, 3));
    Rng rng = rng_new(5);
    Dropout eval = {0.5f, false, &rng};
    Dropout train_p0 = {0.0f, true, &rng};
    Tensor *plain = dot_product_attention(queries, keys, values, NULL, NULL, NULL);
    Tensor *a = dot_product_attention(queries, keys, values, NULL, &eval, NULL);
    Tensor *b = dot_product_attention(queries, keys, values, NULL, &train_p0, NULL);
    expect_close(a, plain, 0.0f, 0.0f);
    expect_close(b, plain, 0.0f, 0.0f);
    tensor_free(plain);
    tensor_free(a);
    tensor_free(b);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

Test(dropout, training_zeroes_about_p_and_scales_survivors)
{
    enum { T = 40, K = 50 };
    Rng data_rng = rng_new(9);
    Tensor *queries = tensor_normal(&data_rng, 0.0f, 1.0f, SHAPE(2, T, 8));
    Tensor *keys = tensor_normal(&data_rng, 0.0f, 1.0f, SHAPE(2, K, 8));
    Tensor *values = tensor_normal(&data_rng, 0.0f, 1.0f, SHAPE(2, K, 3));
    Tensor *eval_weights = NULL, *train_weights = NULL;
    Tensor *eval_out = dot_product_attention(queries, keys, values, NULL, NULL, &eval_weights);
    Rng rng = rng_new(10);
    const float p = 0.3f;
    Dropout train = {p, true, &rng};
    Tensor *train_out = dot_product_attention(queries, keys, values, NULL, &train, &train_weights);

    size_t zeros = 0;
    for (size_t i = 0; i < train_weights->size; i++) {
        float w = train_weights->data[i];
        if (w == 0.0f) {
            zeros++;
            continue;
        }
        /* a survivor is the eval weight times 1 / (1 - p), to rounding */
        float expected = eval_weights->data[i] * (1.0f / (1.0f - p));
        cr_expect(fabsf(w - expected) <= 1e-6f * expected, "weight %zu: %g, expected %g", i,
                  (double)w, (double)expected);
    }
    /* 4000 coin flips with p = 0.3: the standard deviation of the fraction
     * is sqrt(0.3 * 0.7 / 4000) = 0.0072; allow 5 of them. */
    double fraction = (double)zeros / (double)train_weights->size;
    cr_expect(fabs(fraction - p) < 0.036, "fraction of zeros %.4f, expected about %.2f",
              fraction, (double)p);
    /* Rows no longer sum to 1. */
    int rows_off = 0;
    for (int r = 0; r < 2 * T; r++) {
        double sum = 0.0;
        for (int j = 0; j < K; j++)
            sum += train_weights->data[(size_t)r * K + j];
        rows_off += fabs(sum - 1.0) > 1e-3;
    }
    cr_expect_gt(rows_off, 2 * T / 2, "only %d of %d rows moved away from sum 1", rows_off, 2 * T);
    /* The output is the dropped weights times the values: check one entry. */
    double o = 0.0;
    for (int j = 0; j < K; j++)
        o += (double)AT3(train_weights, 1, 7, j) * AT3(values, 1, j, 2);
    cr_expect(fabs(o - AT3(train_out, 1, 7, 2)) < 1e-5);
    tensor_free(eval_out);
    tensor_free(train_out);
    tensor_free(eval_weights);
    tensor_free(train_weights);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
}

Test(dropout, survivors_are_unbiased_on_average)
{
    /* Averaged over many draws, dropped-and-rescaled weights come back to
     * the weights themselves: that is what the 1 / (1 - p) is for. */
    const float weights_in[6] = {0.5f, 0.25f, 0.125f, 0.0625f, 0.0625f, 0.0f};
    double mean[6] = {0};
    Rng rng = rng_new(123);
    Dropout train = {0.5f, true, &rng};
    enum { DRAWS = 20000 };
    for (int draw = 0; draw < DRAWS; draw++) {
        Tensor *x = tensor_from(weights_in, SHAPE(6));
        dropout_inplace(x, &train);
        for (int i = 0; i < 6; i++)
            mean[i] += x->data[i] / DRAWS;
        tensor_free(x);
    }
    for (int i = 0; i < 6; i++) {
        /* std of one draw is w (p = 0.5), of the mean w / sqrt(20000) */
        double tol = 5.0 * weights_in[i] / sqrt((double)DRAWS) + 1e-12;
        cr_expect(fabs(mean[i] - weights_in[i]) <= tol, "mean[%d] = %.5f, expected %.5f", i,
                  mean[i], (double)weights_in[i]);
    }
}

/* The tests below expect the library to stop with status 1 and one line
 * naming the function; each runs in a child (stderr_of) and the line is
 * compared. What they allocate is kept in statics, still reachable when
 * the process stops, so the leak checker does not count it. */
static Tensor *kept[3];
static ValidLens *kept_lens;
static Rng kept_rng;

static void dropout_p_of_one(void)
{
    kept_rng = rng_new(1);
    Dropout train = {1.0f, true, &kept_rng};
    kept[0] = tensor_full(0.5f, SHAPE(4));
    dropout_inplace(kept[0], &train);
}

Test(dropout, p_of_one_is_an_error)
{
    expect_stops_with(dropout_p_of_one, "dropout_inplace: p must be in [0, 1), got 1\n");
}

static void dropout_without_rng(void)
{
    Dropout train = {0.25f, true, NULL};
    kept[0] = tensor_full(0.5f, SHAPE(4));
    dropout_inplace(kept[0], &train);
}

Test(dropout, training_with_p_above_zero_needs_an_rng)
{
    expect_stops_with(dropout_without_rng,
                      "dropout_inplace: training mode needs a random generator (rng is NULL)\n");
}

Test(dropout, training_with_p_zero_needs_no_rng)
{
    /* p = 0 draws nothing, so NULL is fine and nothing changes */
    const float values[5] = {0.5f, 0.25f, 0.125f, 0.0f, 0.125f};
    Tensor *x = tensor_from(values, SHAPE(5));
    Dropout train = {0.0f, true, NULL};
    dropout_inplace(x, &train);
    cr_expect(floats_allclose(x->data, values, 5, 0.0f, 0.0f, stderr));
    tensor_free(x);
}

/* ---- shape errors ----------------------------------------------------------- */

/* queries (2, 3, 4) with keys and values of the given shapes */
static void attention_with(const int *key_shape, const int *value_shape)
{
    kept[0] = tensor_from(masked_queries, SHAPE(2, 3, 4));
    kept[1] = tensor_zeros(3, key_shape);
    kept[2] = tensor_zeros(3, value_shape);
    dot_product_attention(kept[0], kept[1], kept[2], kept_lens, NULL, NULL);
}

static void keys_of_size_3(void)
{
    attention_with((const int[]){2, 5, 3}, (const int[]){2, 5, 3});
}

Test(attention, keys_of_another_size_than_queries_is_an_error)
{
    expect_stops_with(keys_of_size_3,
                      "tensor_check_shape: keys expected shape (2, *, 4), got (2, 5, 3)\n");
}

static void values_for_6_keys(void)
{
    attention_with((const int[]){2, 5, 4}, (const int[]){2, 6, 3});
}

Test(attention, values_for_another_number_of_keys_is_an_error)
{
    expect_stops_with(values_for_6_keys,
                      "tensor_check_shape: values expected shape (2, 5, *), got (2, 6, 3)\n");
}

static void valid_len_6_of_5_keys(void)
{
    kept_lens = valid_lens_1d((const int[]){2, 6}, 2);
    attention_with((const int[]){2, 5, 4}, (const int[]){2, 5, 3});
}

Test(attention, valid_len_above_num_keys_is_an_error)
{
    expect_stops_with(valid_len_6_of_5_keys,
                      "valid_lens_check: valid_lens[1] = 6 is outside 0..5: a length counts "
                      "keys, and there are 5\n");
}

/* ---- the chapter 03 programs -------------------------------------------- */

#define SELF_ATTENTION "03_self_attention/self_attention"
#define COST "03_self_attention/cost"

/* The numbers on the line of the sqrt(d) table that starts with d. */
static int sqrt_d_row(const char *out, int d, double *var, double *var_scaled, double *peak_plain,
                      double *peak_scaled)
{
    char start[32];
    snprintf(start, sizeof start, "\n  %4d   ", d);
    const char *row = strstr(out, start);
    if (row == NULL)
        return 0;
    int got_d;
    return sscanf(row, " %d %lf %lf %lf %lf", &got_d, var, var_scaled, peak_plain, peak_scaled) == 5;
}

/* The first n numbers printed after marker in out, read into values;
 * returns how many were found. Words between the numbers are skipped, so
 * a printed tensor "tensor([[0.4666, 0.5334]])" reads as 0.4666, 0.5334. */
static int floats_after(const char *out, const char *marker, float *values, int n)
{
    const char *p = out ? strstr(out, marker) : NULL;
    if (p == NULL)
        return 0;
    p += strlen(marker);
    int found = 0;
    while (*p && found < n) {
        if ((*p >= '0' && *p <= '9') || ((*p == '-' || *p == '.') && p[1] >= '0' && p[1] <= '9')) {
            char *end;
            values[found++] = strtof(p, &end);
            p = end;
        } else {
            p++;
        }
    }
    return found;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The three fixed tokens of Part 2, as the program prints them. */
static const float fixed_tokens[9] = {0.8063f, 0.5281f, 2.7724f, 1.4511f, -0.4305f, 1.3205f,
                                      1.3092f, -0.5249f, -1.0714f};

/* Part 2's scaled weights, printed to 4 decimals, are those of the
 * library on the printed tokens x (1, n, d). */
static void expect_printed_weights(const char *out, const float *x, int n, int d)
{
    Tensor *tokens = tensor_from(x, SHAPE(1, n, d));
    Tensor *weights = NULL;
    Tensor *output = dot_product_attention(tokens, tokens, tokens, NULL, NULL, &weights);
    const char *scaled = strstr(out, "With the scale");
    cr_assert(scaled != NULL);
    float printed[64 * 64];
    cr_assert_eq(floats_after(scaled, "weights =", printed, n * n), n * n);
    cr_expect(floats_allclose(printed, weights->data, (size_t)(n * n), 6e-5f, 0.0f, stderr),
              "the printed weights are not dot_product_attention's");
    TENSOR_FREE(tokens, weights, output);
}

Test(chapter03, runs_with_defaults_and_checks_itself)
{
    /* Status 0 says the program's own checks held: masked weights exactly
     * 0, output = weighted sum of values, the PyTorch example matched. */
    RunResult r = run_program(SELF_ATTENTION, "");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect_str_empty(r.err);

    /* Part 1: sequence 0 sees 2 keys, sequence 1 sees 6; rows sum to 1 */
    float w[20];
    cr_assert_eq(floats_after(r.out, "attention_weights (2, 1, 10) =", w, 20), 20);
    for (int b = 0; b < 2; b++) {
        const int valid = b == 0 ? 2 : 6;
        double sum = 0.0;
        for (int j = 0; j < 10; j++) {
            sum += w[b * 10 + j];
            if (j >= valid)
                cr_expect_eq(w[b * 10 + j], 0.0f, "sequence %d key %d", b, j);
            else
                cr_expect_gt(w[b * 10 + j], 0.0f, "sequence %d key %d", b, j);
        }
        cr_expect(fabs(sum - 1.0) < 5e-4, "sequence %d sums to %g", b, sum);
    }
    /* the residue is printed as its bound when it is below it */
    cr_expect(strstr(r.out, "over j < 6: largest difference below 1e-06\n") != NULL,
              "output differs from its own weighted sum by 1e-06 or more:\n%s", r.out);
    float diff = 1.0f;

    /* Part 2: the unscaled output is what the PyTorch example printed, to
     * its last digit but one; the scaled weights are the library's */
    cr_expect(strstr(r.out, "         [ 1.0429,  0.1725,  2.2049],\n"
                            "         [ 1.3184, -0.5126, -0.8610]]])") != NULL);
    cr_expect(floats_after(r.out, "Largest difference", &diff, 1) == 1 && diff <= 1e-4f);
    expect_printed_weights(r.out, fixed_tokens, 3, 3);
    float asymmetry[2];
    cr_assert_eq(floats_after(r.out, "|S - S^T| =", asymmetry, 2), 2);
    cr_expect_eq(asymmetry[0], 0.0f, "X X^T is symmetric");
    cr_expect_gt(asymmetry[1], 0.1f, "the weights are not");

    /* Part 3: the sqrt(d) table: variance grows like d, scaled stays near 1 */
    static const int sizes[] = {2, 8, 32, 128, 512};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double var, var_scaled, peak_plain, peak_scaled;
        cr_assert(sqrt_d_row(r.out, sizes[i], &var, &var_scaled, &peak_plain, &peak_scaled),
                  "no row for d = %d", sizes[i]);
        /* 2000 pairs: the variance estimate is within about 3% (1 std) */
        cr_expect(var > 0.8 * sizes[i] && var < 1.2 * sizes[i], "d %d: var %g", sizes[i], var);
        cr_expect(var_scaled > 0.8 && var_scaled < 1.2, "d %d: scaled var %g", sizes[i],
                  var_scaled);
        cr_expect(peak_scaled > 0.2 && peak_scaled < 0.45, "d %d: scaled peak %g", sizes[i],
                  peak_scaled);
        if (sizes[i] >= 128)
            cr_expect(peak_plain > 0.85, "d %d: unscaled peak %g", sizes[i], peak_plain);
    }
    run_result_free(&r);
}

Test(chapter03, dropout_in_training_mode)
{
    RunResult eval = run_program(SELF_ATTENTION, "");
    RunResult r = run_program(SELF_ATTENTION, "--dropout 0.5 --train");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    /* Training mode prints two more tensors: the dropped weights, the output */
    cr_expect_eq(count_of(r.out, "tensor("), count_of(eval.out, "tensor(") + 2);

    /* each weight is 0 or twice its evaluation value, and the row sums
     * printed are the sums of the dropped weights */
    float eval_w[9], dropped[9], sums[3];
    const char *scaled = strstr(eval.out, "With the scale");
    cr_assert(scaled != NULL);
    cr_assert_eq(floats_after(scaled, "weights =", eval_w, 9), 9);
    cr_assert_eq(floats_after(r.out, "weights after dropout =", dropped, 9), 9);
    cr_assert_eq(floats_after(r.out, "row sums:", sums, 3), 3);
    int zeros = 0;
    for (int i = 0; i < 9; i++) {
        zeros += dropped[i] == 0.0f;
        cr_expect(dropped[i] == 0.0f || fabsf(dropped[i] - 2.0f * eval_w[i]) <= 2e-4f,
                  "weight %d: %g, evaluation %g", i, (double)dropped[i], (double)eval_w[i]);
    }
    cr_expect(zeros > 0 && zeros < 9, "%d of 9 dropped", zeros);
    for (int row = 0; row < 3; row++)
        cr_expect(fabsf(sums[row] - (dropped[3 * row] + dropped[3 * row + 1] +
                                     dropped[3 * row + 2])) <= 3e-4f, "row %d", row);
    run_result_free(&r);

    /* --dropout without --train is evaluation mode: no extra tensor */
    r = run_program(SELF_ATTENTION, "--dropout 0.9");
    cr_expect_eq(r.status, 0);
    cr_expect_eq(count_of(r.out, "tensor("), count_of(eval.out, "tensor("));
    run_result_free(&r);
    run_result_free(&eval);
}

Test(chapter03, random_tokens)
{
    RunResult r = run_program(SELF_ATTENTION, "--tokens 5 --dim 4 --seed 2");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    float x[20];
    cr_assert_eq(floats_after(r.out, "X (1, n, d) =", x, 20), 20);
    expect_printed_weights(r.out, x, 5, 4);
    float asymmetry = 1.0f;
    cr_expect(floats_after(r.out, "|S - S^T| =", &asymmetry, 1) == 1 && asymmetry == 0.0f);
    run_result_free(&r);
}

Test(chapter03, cost_table_grows_by_four)
{
    RunResult r = run_program(COST, "--cost-max 512 --dim 16");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    float d = 0.0f;
    cr_expect(floats_after(r.out, "size d =", &d, 1) == 1 && d == 16.0f);
    /* n, time, time ratio, MB, MB ratio: the bytes are exact */
    const int ns[] = {256, 512};
    const double mb[] = {0.26, 1.05};
    for (int i = 0; i < 2; i++) {
        char start[16];
        snprintf(start, sizeof start, "\n    %d ", ns[i]);
        const char *row = strstr(r.out, start);
        cr_assert(row, "no row for n = %d", ns[i]);
        int n;
        double ms, ratio, megabytes, mb_ratio;
        cr_assert(sscanf(row, " %d %lf %lf %lf %lf", &n, &ms, &ratio, &megabytes, &mb_ratio) == 5);
        cr_expect(fabs(megabytes - mb[i]) < 0.006, "n %d: %g MB", n, megabytes);
        cr_expect(mb_ratio == 4.0);
        cr_expect(ms > 0.0 && ratio > 0.0);
    }
    cr_expect(strstr(r.out, "n = 141421") != NULL);
    run_result_free(&r);
}

Test(chapter03, bad_options_give_one_line_and_status_2)
{
    static const char *const cases[][2] = {
        {"--dropout 1", "--dropout expects a number from 0 to 0.99, got '1'"},
        {"--dropout -0.1", "--dropout expects a number from 0 to 0.99"},
        {"--dropout nan", "--dropout expects a number"},
        {"--dim 5", "--dim sizes random tokens: give --tokens N too"},
        {"--tokens 0", "--tokens expects a whole number from 1 to 64"},
        {"--plot", "--plot needs a value"},
        {"--plot /nonexistent/dir", "directory '/nonexistent/dir' does not exist"},
        {"--scale", "unknown option '--scale'"},
    };
    expect_bad_options(SELF_ATTENTION, cases, sizeof cases / sizeof cases[0]);
    static const char *const cost_cases[][2] = {
        {"--cost-max 100", "--cost-max expects a whole number from 128"},
        {"--dim 2000", "--dim expects a whole number from 1 to 1024"},
    };
    expect_bad_options(COST, cost_cases, sizeof cost_cases / sizeof cost_cases[0]);
}

Test(chapter03, help_lists_every_option)
{
    const char *const options[] = {"--seed", "--tokens", "--dim", "--dropout", "--train",
                                   "--plot", "--help"};
    expect_help_lists(SELF_ATTENTION, options, sizeof options / sizeof options[0]);
    const char *const cost_options[] = {"--seed", "--dim", "--cost-max", "--help"};
    expect_help_lists(COST, cost_options, sizeof cost_options / sizeof cost_options[0]);
}

Test(chapter03, plot_writes_both_heatmaps)
{
    char dir[] = "/tmp/attn_plot_03_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char args[128], path[128];
    snprintf(args, sizeof args, "--plot %s", dir);
    RunResult r = run_program(SELF_ATTENTION, args);
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    const char *files[] = {"self_attention.dat", "self_attention.gp", "d2l_check.dat",
                           "d2l_check.gp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        char *text = read_text_file(path, NULL);
        cr_expect(text != NULL, "no %s", path);
        if (text && i == 0)
            cr_expect(strstr(text, "softmax(X X^T / sqrt(d))") != NULL);
        free(text);
        remove(path);
    }
    rmdir(dir);
    run_result_free(&r);
}

Test(chapter03, dropout_average_solution)
{
    RunResult r = run_program("03_self_attention/exercise_dropout_average", "--draws 100000");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    /* the prediction, from the evaluation weights the program printed */
    float w[16];
    cr_assert_eq(floats_after(r.out, "evaluation weights =", w, 16), 16);
    double rms = 0.0;
    for (int i = 0; i < 16; i++)
        rms += (double)w[i] * w[i] / 16.0;
    const double predicted = sqrt(0.5 / 0.5) * sqrt(rms);
    /* rows: draws N, groups, RMS gap, gap * sqrt(N), for N = 1 .. 10000 */
    const char *row = strstr(r.out, "gap * sqrt(N)\n");
    cr_assert(row != NULL);
    long n_draws, groups;
    double gap, scaled, last_gap = INFINITY;
    int rows = 0;
    for (row = strchr(row, '\n') + 1;
         sscanf(row, " %ld %ld %lf %lf", &n_draws, &groups, &gap, &scaled) == 4;
         row = strchr(row, '\n') + 1) {
        cr_expect_eq(n_draws * groups, 100000);
        cr_expect(fabs(scaled - gap * sqrt((double)n_draws)) < 1e-3);
        /* 10 groups of 16 entries: the RMS is within about 20% */
        cr_expect(fabs(scaled / predicted - 1.0) < 0.25, "N %ld: %g against %g", n_draws,
                  scaled, predicted);
        cr_expect_lt(gap, last_gap, "the gap shrinks with N");
        last_gap = gap;
        rows++;
    }
    cr_expect_eq(rows, 5);
    run_result_free(&r);
}
