/*
 * test_softmax.c - softmax and d2l's valid_lens masking (chapter 02).
 *
 * Hand-computed values, PyTorch references (fixtures/softmax_ref.h, made by
 * fixtures/make_attention_fixtures.py), and properties on seeded inputs.
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures/softmax_ref.h"
#include "helpers.h"
#include "random.h"
#include "softmax.h"

/* ---- softmax_row ---------------------------------------------------------- */

Test(softmax, row_of_1_2_3_matches_hand_values)
{
    /* e^1, e^2, e^3 = 2.718282, 7.389056, 20.085537; sum 30.192875 */
    float row[3] = {1.0f, 2.0f, 3.0f};
    const float expected[3] = {0.09003057f, 0.24472847f, 0.66524096f};
    softmax_row(row, 3);
    cr_expect(floats_allclose(row, expected, 3, 1e-7f, 1e-6f, stderr));
}

Test(softmax, large_scores_give_no_inf_or_nan)
{
    Tensor *x = tensor_from(softmax_big, SHAPE(2, 3));
    Tensor *expected = tensor_from(softmax_big_weights, SHAPE(2, 3));
    Tensor *weights = softmax(x);
    for (size_t i = 0; i < weights->size; i++)
        cr_expect(isfinite(weights->data[i]), "weight %zu is %g", i, (double)weights->data[i]);
    expect_close(weights, expected, 1e-7f, 1e-6f);
    /* [1000, 1001, 1002] only differs from [1, 2, 3] by a constant. */
    const float by_hand[3] = {0.09003057f, 0.24472847f, 0.66524096f};
    cr_expect(floats_allclose(weights->data, by_hand, 3, 1e-7f, 1e-6f, stderr));
    tensor_free(x);
    tensor_free(expected);
    tensor_free(weights);
}

Test(softmax, shift_invariance_is_exact_when_the_shift_is)
{
    /* Scores that are multiples of 2^-10 and shifts that keep them exact in
     * float: then x + c - max(x + c) equals x - max(x) bit for bit, so the
     * weights must be identical, not merely close. */
    Rng rng = rng_new(7);
    const float shifts[] = {-64.0f, 0.5f, 37.25f, 256.0f};
    for (int trial = 0; trial < 20; trial++) {
        enum { N = 9 };
        float base[N], shifted[N];
        for (int j = 0; j < N; j++)
            base[j] = (float)((int)rng_below(&rng, 8193) - 4096) / 1024.0f;
        for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++) {
            for (int j = 0; j < N; j++)
                shifted[j] = base[j] + shifts[s];
            float reference[N];
            memcpy(reference, base, sizeof reference);
            softmax_row(reference, N);
            softmax_row(shifted, N);
            cr_expect(memcmp(reference, shifted, sizeof reference) == 0,
                      "trial %d: shifting by %g changed the weights", trial, (double)shifts[s]);
        }
    }
}

Test(softmax, empty_row_is_left_alone)
{
    float row[1] = {42.0f};
    softmax_row(row, 0);
    cr_expect_eq(row[0], 42.0f);
}

Test(softmax, any_number_of_dims_matches_pytorch)
{
    Tensor *x = tensor_from(softmax_x, SHAPE(2, 2, 4));
    Tensor *expected = tensor_from(softmax_x_plain, SHAPE(2, 2, 4));
    Tensor *weights = softmax(x);
    expect_close(weights, expected, 1e-7f, 1e-6f);
    /* The same numbers seen as 4 rows of 4, and as one 2-D row stack. */
    Tensor *flat = tensor_reshape(tensor_copy(x), SHAPE(4, 4));
    Tensor *flat_weights = softmax(flat);
    cr_expect(floats_allclose(flat_weights->data, softmax_x_plain, 16, 1e-7f, 1e-6f, stderr));
    /* masked_softmax without valid_lens is plain softmax. */
    Tensor *unmasked = masked_softmax(x, NULL);
    expect_close(unmasked, weights, 0.0f, 0.0f);
    tensor_free(x);
    tensor_free(expected);
    tensor_free(weights);
    tensor_free(flat);
    tensor_free(flat_weights);
    tensor_free(unmasked);
}

/* ---- masked_softmax: d2l's two examples against PyTorch ---------------- */

Test(masked_softmax, d2l_example_1d_valid_lens_2_3)
{
    Tensor *x = tensor_from(softmax_x, SHAPE(2, 2, 4));
    Tensor *expected = tensor_from(softmax_x_lens_2_3, SHAPE(2, 2, 4));
    ValidLens *valid_lens = valid_lens_1d((const int[]){2, 3}, 2);
    Tensor *weights = masked_softmax(x, valid_lens);
    expect_close(weights, expected, 1e-7f, 1e-6f);
    tensor_free(x);
    tensor_free(expected);
    tensor_free(weights);
    valid_lens_free(valid_lens);
}

Test(masked_softmax, d2l_example_2d_valid_lens_13_24)
{
    Tensor *x = tensor_from(softmax_x, SHAPE(2, 2, 4));
    Tensor *expected = tensor_from(softmax_x_lens_13_24, SHAPE(2, 2, 4));
    ValidLens *valid_lens = valid_lens_2d((const int[]){1, 3, 2, 4}, 2, 2);
    Tensor *weights = masked_softmax(x, valid_lens);
    expect_close(weights, expected, 1e-7f, 1e-6f);
    /* valid_len 1 puts all the weight on the first key, exactly. */
    cr_expect_eq(AT3(weights, 0, 0, 0), 1.0f);
    tensor_free(x);
    tensor_free(expected);
    tensor_free(weights);
    valid_lens_free(valid_lens);
}

/* Random scores (B, T, K) with a spread that makes masking bugs visible. */
static Tensor *random_scores(Rng *rng, int batch, int num_queries, int num_keys)
{
    return tensor_normal(rng, 0.5f, 4.0f, SHAPE(batch, num_queries, num_keys));
}

Test(masked_softmax, masked_weights_are_exactly_zero_and_rows_sum_to_one)
{
    Rng rng = rng_new(11);
    for (int trial = 0; trial < 30; trial++) {
        int batch = 1 + (int)rng_below(&rng, 4);
        int num_queries = 1 + (int)rng_below(&rng, 6);
        int num_keys = 1 + (int)rng_below(&rng, 12);
        Tensor *x = random_scores(&rng, batch, num_queries, num_keys);
        int lens[4 * 6];
        for (int i = 0; i < batch * num_queries; i++)
            lens[i] = 1 + (int)rng_below(&rng, (uint32_t)num_keys);
        ValidLens *valid_lens = valid_lens_2d(lens, batch, num_queries);
        Tensor *weights = masked_softmax(x, valid_lens);
        for (int b = 0; b < batch; b++)
            for (int q = 0; q < num_queries; q++) {
                int len = lens[b * num_queries + q];
                double sum = 0.0;
                for (int j = 0; j < num_keys; j++) {
                    float w = AT3(weights, b, q, j);
                    if (j >= len)
                        cr_expect(w == 0.0f && !signbit(w),
                                  "trial %d: masked weight [%d, %d, %d] is %g, not 0",
                                  trial, b, q, j, (double)w);
                    else
                        cr_expect(w >= 0.0f && w <= 1.0f);
                    sum += w;
                }
                cr_expect(fabs(sum - 1.0) <= 1e-6, "trial %d: row [%d, %d] sums to %.9f",
                          trial, b, q, sum);
            }
        tensor_free(x);
        tensor_free(weights);
        valid_lens_free(valid_lens);
    }
}

Test(masked_softmax, valid_lens_1d_means_the_same_length_for_every_query)
{
    Rng rng = rng_new(12);
    Tensor *x = random_scores(&rng, 3, 4, 5);
    ValidLens *per_sequence = valid_lens_1d((const int[]){2, 5, 3}, 3);
    ValidLens *per_query = valid_lens_2d((const int[]){2, 2, 2, 2, 5, 5, 5, 5, 3, 3, 3, 3}, 3, 4);
    Tensor *a = masked_softmax(x, per_sequence);
    Tensor *b = masked_softmax(x, per_query);
    expect_close(a, b, 0.0f, 0.0f);
    tensor_free(x);
    tensor_free(a);
    tensor_free(b);
    valid_lens_free(per_sequence);
    valid_lens_free(per_query);
}

Test(masked_softmax, masked_scores_do_not_matter)
{
    /* Whatever sits past valid_len, even inf or NaN, cannot reach the
     * weights: the mask replaces, it does not add. */
    Tensor *x = tensor_from(softmax_x, SHAPE(2, 2, 4));
    AT3(x, 0, 0, 3) = INFINITY;
    AT3(x, 0, 1, 2) = NAN;
    AT3(x, 1, 0, 3) = -INFINITY;
    AT3(x, 1, 1, 3) = 1e30f;
    Tensor *expected = tensor_from(softmax_x_lens_2_3, SHAPE(2, 2, 4));
    ValidLens *valid_lens = valid_lens_1d((const int[]){2, 3}, 2);
    Tensor *weights = masked_softmax(x, valid_lens);
    expect_close(weights, expected, 1e-7f, 1e-6f);
    tensor_free(x);
    tensor_free(expected);
    tensor_free(weights);
    valid_lens_free(valid_lens);
}

Test(masked_softmax, zero_valid_keys_give_a_row_of_zeros)
{
    Tensor *x = tensor_from(softmax_x, SHAPE(2, 2, 4));
    ValidLens *valid_lens = valid_lens_2d((const int[]){0, 2, 4, 0}, 2, 2);
    Tensor *weights = masked_softmax(x, valid_lens);
    for (int j = 0; j < 4; j++) {
        cr_expect(AT3(weights, 0, 0, j) == 0.0f, "[0, 0, %d] = %g", j, (double)AT3(weights, 0, 0, j));
        cr_expect(AT3(weights, 1, 1, j) == 0.0f, "[1, 1, %d] = %g", j, (double)AT3(weights, 1, 1, j));
    }
    /* The other rows are untouched by their neighbours' empty masks. */
    const float row_1_0[4] = {softmax_x_plain[8], softmax_x_plain[9], softmax_x_plain[10],
                              softmax_x_plain[11]};
    cr_expect(floats_allclose(&AT3(weights, 1, 0, 0), row_1_0, 4, 1e-7f, 1e-6f, stderr));
    cr_expect(floats_allclose(&AT3(weights, 0, 1, 0), &softmax_x_lens_2_3[4], 4, 1e-7f, 1e-6f,
                              stderr));
    tensor_free(x);
    tensor_free(weights);
    valid_lens_free(valid_lens);
}

Test(masked_softmax, masked_softmax_row_by_itself)
{
    float row[5] = {3.0f, 1.0f, -2.0f, 8.0f, 0.5f};
    masked_softmax_row(row, 5, 2);
    /* softmax([3, 1]) = [1 / (1 + e^-2), e^-2 / (1 + e^-2)] */
    const float expected[5] = {0.88079708f, 0.11920292f, 0.0f, 0.0f, 0.0f};
    cr_expect(floats_allclose(row, expected, 5, 1e-7f, 1e-6f, stderr));
}

/* ---- valid_lens ------------------------------------------------------------ */

Test(valid_lens, lookup_copy_and_shapes)
{
    ValidLens *one = valid_lens_1d((const int[]){2, 3}, 2);
    ValidLens *two = valid_lens_2d((const int[]){1, 3, 2, 4}, 2, 2);
    ValidLens *copy = valid_lens_copy(two);
    cr_expect_eq(one->ndim, 1);
    cr_expect_eq(one->shape[0], 2);
    cr_expect_eq(valid_len_at(one, 1, 0), 3);
    cr_expect_eq(valid_len_at(one, 1, 1), 3);
    cr_expect_eq(two->ndim, 2);
    cr_expect_eq(valid_len_at(two, 0, 1), 3);
    cr_expect_eq(valid_len_at(two, 1, 0), 2);
    cr_expect_eq(copy->ndim, 2);
    cr_expect_eq(valid_len_at(copy, 1, 1), 4);
    cr_expect_neq(copy->data, two->data);
    valid_lens_check(one, 2, 7, 3);   /* fits: returns */
    valid_lens_check(two, 2, 2, 4);
    valid_lens_check(NULL, 5, 5, 5);
    valid_lens_free(one);
    valid_lens_free(two);
    valid_lens_free(copy);
    valid_lens_free(NULL);
}

/* Each of these is a programming error: the library stops with status 1
 * and one line naming the function and what is wrong; the test runs it in
 * a child (stderr_of) and compares the line. What they allocate is kept in
 * statics, still reachable when the process stops, so the leak checker
 * does not count it. */
static Tensor *kept_x;
static ValidLens *kept_lens;

static void masked_with_kept_lens(void)
{
    kept_x = tensor_from(softmax_x, SHAPE(2, 2, 4));
    masked_softmax(kept_x, kept_lens);
}

static void valid_len_above_num_keys(void)
{
    kept_lens = valid_lens_1d((const int[]){2, 5}, 2);
    masked_with_kept_lens();
}

Test(masked_softmax, valid_len_above_num_keys_is_an_error)
{
    expect_stops_with(valid_len_above_num_keys,
                      "valid_lens_check: valid_lens[1] = 5 is outside 0..4: a length counts keys, "
                      "and there are 4\n");
}

static void negative_valid_len(void)
{
    kept_lens = valid_lens_2d((const int[]){1, 3, -1, 4}, 2, 2);
    masked_with_kept_lens();
}

Test(masked_softmax, negative_valid_len_is_an_error)
{
    expect_stops_with(negative_valid_len,
                      "valid_lens_check: valid_lens[1, 0] = -1 is outside 0..4: a length counts "
                      "keys, and there are 4\n");
}

static void valid_lens_1d_of_wrong_batch(void)
{
    kept_lens = valid_lens_1d((const int[]){2, 3, 1}, 3);
    masked_with_kept_lens();
}

Test(masked_softmax, valid_lens_1d_of_wrong_batch_is_an_error)
{
    expect_stops_with(valid_lens_1d_of_wrong_batch,
                      "valid_lens_check: valid_lens has shape (3,); scores of shape (2, 2, 4) "
                      "need (2,) or (2, 2)\n");
}

static void valid_lens_2d_of_wrong_num_queries(void)
{
    kept_lens = valid_lens_2d((const int[]){1, 2, 3, 1, 2, 3}, 2, 3);
    masked_with_kept_lens();
}

Test(masked_softmax, valid_lens_2d_of_wrong_num_queries_is_an_error)
{
    expect_stops_with(valid_lens_2d_of_wrong_num_queries,
                      "valid_lens_check: valid_lens has shape (2, 3); scores of shape (2, 2, 4) "
                      "need (2,) or (2, 2)\n");
}

static void row_valid_len_above_n(void)
{
    float row[3] = {1.0f, 2.0f, 3.0f};
    masked_softmax_row(row, 3, 4);
}

Test(masked_softmax, row_valid_len_above_n_is_an_error)
{
    expect_stops_with(row_valid_len_above_n,
                      "masked_softmax_row: valid_len 4 is outside 0..3 (the row has 3 keys)\n");
}

static void scores_2d_with_valid_lens(void)
{
    kept_x = tensor_from(softmax_x, SHAPE(4, 4));
    kept_lens = valid_lens_1d((const int[]){2, 3, 1, 4}, 4);
    masked_softmax(kept_x, kept_lens);
}

Test(masked_softmax, scores_must_be_3d_with_valid_lens)
{
    expect_stops_with(scores_2d_with_valid_lens,
                      "tensor_check_shape: x expected shape (*, *, *), got (4, 4)\n");
}

/* ---- the chapter 02 programs -------------------------------------------- */

#define SOFTMAX_MASK "02_softmax_mask/softmax_mask"

enum { MAX_PRINTED = 512 };

/* The printed tensor "name" (its occurrence-th print) as a Tensor of the
 * given shape; the test fails when it holds another number of values. */
static Tensor *printed(const char *out, const char *name, int occurrence, int ndim,
                       const int *shape)
{
    static double values[MAX_PRINTED];
    int n = tensor_numbers_in(out, name, occurrence, values, MAX_PRINTED);
    Tensor *t = tensor_zeros(ndim, shape);
    cr_assert_eq(n, (int)t->size, "print %d of '%s' holds %d numbers, expected %zu:\n%s",
                 occurrence, name, n, t->size, out);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (float)values[i];
    return t;
}

/* The weights printed after "masked_softmax(X, valid_lens)" are what the
 * library gives for the printed X and lengths. X and the weights are both
 * printed to 4 decimals, so each side carries up to 5e-5 of rounding: 2e-4
 * allows for both, far below what a misplaced mask would change. */
static void expect_printed_masked_softmax(const char *out, int occurrence, const Tensor *x,
                                          const ValidLens *valid_lens)
{
    Tensor *expected = masked_softmax(x, valid_lens);
    Tensor *shown = printed(out, "masked_softmax(X, valid_lens)", occurrence, x->ndim, x->shape);
    expect_close(shown, expected, 2e-4f, 0.0f);
    /* masked weights are printed as exact zeros */
    for (size_t i = 0; i < expected->size; i++)
        if (expected->data[i] == 0.0f)
            cr_expect_eq(shown->data[i], 0.0f, "weight %zu", i);
    tensor_free(expected);
    tensor_free(shown);
}

Test(chapter02, runs_with_defaults_and_shows_each_case)
{
    RunResult r = run_program(SOFTMAX_MASK, "");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);

    /* part 1: the naive softmax is NaN, the stable one is softmax([1, 2, 3]) */
    const float big[3] = {1000.0f, 1001.0f, 1002.0f}, negative[3] = {-1000.0f, -1001.0f, -1002.0f};
    Tensor *naive = printed(r.out, "naive softmax", 0, SHAPE(3));
    Tensor *stable = printed(r.out, "softmax_row  ", 0, SHAPE(3));
    Tensor *stable_negative = printed(r.out, "softmax_row  ([-1000, -1001, -1002])", 0, SHAPE(3));
    float expected[3], expected_negative[3];
    memcpy(expected, big, sizeof expected);
    memcpy(expected_negative, negative, sizeof expected_negative);
    softmax_row(expected, 3);
    softmax_row(expected_negative, 3);
    for (int j = 0; j < 3; j++) {
        cr_expect(isnan(naive->data[j]), "naive weight %d: %g", j, (double)naive->data[j]);
        cr_expect_float_eq(stable->data[j], expected[j], 5e-5f);
        cr_expect_float_eq(stable_negative->data[j], expected_negative[j], 5e-5f);
    }

    /* part 2: d2l's two examples on the X printed */
    Tensor *x = printed(r.out, "X", 0, SHAPE(2, 2, 4));
    ValidLens *per_sequence = valid_lens_1d((const int[]){2, 3}, 2);
    ValidLens *per_query = valid_lens_2d((const int[]){1, 3, 2, 4}, 2, 2);
    Tensor *lens = printed(r.out, "valid_lens", 0, SHAPE(2));
    cr_expect(lens->data[0] == 2.0f && lens->data[1] == 3.0f);
    Tensor *lens_2d = printed(r.out, "valid_lens", 1, SHAPE(2, 2));
    for (int i = 0; i < 4; i++)
        cr_expect_eq(lens_2d->data[i], (float)per_query->data[i]);
    expect_printed_masked_softmax(r.out, 0, x, per_sequence);
    expect_printed_masked_softmax(r.out, 1, x, per_query);

    /* part 3: -1e6 gives 1/4 each, -inf NaN, this project zeros */
    Tensor *uniform = printed(r.out, "weights", 0, SHAPE(4));
    Tensor *nans = printed(r.out, "weights", 1, SHAPE(4));
    Tensor *zeros = printed(r.out, "weights", 2, SHAPE(4));
    /* the additive mask lands within rounding of the unmasked softmax */
    Tensor *additive = printed(r.out, "weights           ", 0, SHAPE(4));
    Tensor *unmasked = printed(r.out, "softmax(unmasked) ", 0, SHAPE(4));
    for (int j = 0; j < 4; j++) {
        cr_expect_eq(uniform->data[j], 0.25f);
        cr_expect(isnan(nans->data[j]));
        cr_expect_eq(zeros->data[j], 0.0f);
        cr_expect(fabsf(additive->data[j] - unmasked->data[j]) < 0.05f, "key %d: %g vs %g", j,
                  (double)additive->data[j], (double)unmasked->data[j]);
    }
    Tensor *all[] = {naive, stable, stable_negative, x, lens, lens_2d, uniform, nans, zeros,
                     additive, unmasked};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    valid_lens_free(per_sequence);
    valid_lens_free(per_query);
    run_result_free(&r);
}

Test(chapter02, own_valid_lens_and_sizes)
{
    RunResult r = run_program(SOFTMAX_MASK, "--valid-lens 4,0");
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    /* sequence 1 has no valid key: both of its rows are zeros */
    Tensor *x = printed(r.out, "X", 0, SHAPE(2, 2, 4));
    ValidLens *lens = valid_lens_1d((const int[]){4, 0}, 2);
    expect_printed_masked_softmax(r.out, 0, x, lens);
    tensor_free(x);
    valid_lens_free(lens);
    run_result_free(&r);

    r = run_program(SOFTMAX_MASK, "--batch 1 --queries 3 --keys 5 --valid-lens 5,1,2");
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    x = printed(r.out, "X", 0, SHAPE(1, 3, 5));
    lens = valid_lens_2d((const int[]){5, 1, 2}, 1, 3);
    Tensor *shown_lens = printed(r.out, "valid_lens", 0, SHAPE(1, 3));
    for (int i = 0; i < 3; i++)
        cr_expect_eq(shown_lens->data[i], (float)lens->data[i]);
    expect_printed_masked_softmax(r.out, 0, x, lens);
    tensor_free(x);
    tensor_free(shown_lens);
    valid_lens_free(lens);
    run_result_free(&r);
}

Test(chapter02, bad_options_give_one_line_and_status_2)
{
    static const char *const cases[][2] = {
        {"--valid-lens 2,5", "--valid-lens expects comma-separated whole numbers from 0 to 4"},
        {"--valid-lens 2,-1", "--valid-lens expects comma-separated whole numbers from 0 to 4"},
        {"--valid-lens 1,2,3", "--valid-lens: 3 lengths fit neither (batch,) = (2,)"},
        {"--batch 3 --valid-lens 1,2", "--valid-lens: 2 lengths fit neither (batch,) = (3,)"},
        {"--keys 0", "--keys expects a whole number from 1 to 16"},
        {"--queries 17", "--queries expects a whole number from 1 to 16"},
        {"--plot /nonexistent/dir", "directory '/nonexistent/dir' does not exist"},
        {"--seed x", "--seed expects a whole number"},
        {"--mask", "unknown option '--mask'"},
    };
    expect_bad_options(SOFTMAX_MASK, cases, sizeof cases / sizeof cases[0]);
}

Test(chapter02, help_lists_every_option)
{
    const char *const options[] = {"--seed", "--batch", "--queries", "--keys", "--valid-lens", "--plot",
                             "--help"};
    expect_help_lists(SOFTMAX_MASK, options, sizeof options / sizeof options[0]);
}

Test(chapter02, plot_writes_the_two_examples_as_four_panels)
{
    char dir[] = "/tmp/attn_plot_02_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char args[128], path[128];
    snprintf(args, sizeof args, "--plot %s", dir);
    RunResult r = run_program(SOFTMAX_MASK, args);
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    snprintf(path, sizeof path, "%s/masked_softmax.dat", dir);
    char *dat = read_text_file(path, NULL);
    cr_assert(dat, "no %s", path);
    cr_expect(strstr(dat, "valid_lens [2, 3], seq 1") != NULL);
    cr_expect(strstr(dat, "valid_lens [[1,3],[2,4]], seq 0") != NULL);
    free(dat);
    remove(path);
    snprintf(path, sizeof path, "%s/masked_softmax.gp", dir);
    char *gp = read_text_file(path, NULL);
    cr_expect(gp != NULL, "no %s", path);
    free(gp);
    remove(path);
    rmdir(dir);
    run_result_free(&r);
}

/* weights (B, n, n) of the causal solution with lengths (B, n): nothing
 * past a query's length, rows with a key sum to 1 (4 decimals printed). */
static void expect_causal(const Tensor *weights, const Tensor *lens)
{
    const int B = weights->shape[0], n = weights->shape[1];
    for (int b = 0; b < B; b++)
        for (int q = 0; q < n; q++) {
            const int valid_len = (int)AT2(lens, b, q);
            cr_expect(valid_len <= q + 1, "query %d of sequence %d sees the future", q, b);
            double sum = 0.0;
            for (int k = 0; k < n; k++) {
                sum += AT3(weights, b, q, k);
                if (k >= valid_len)
                    cr_expect_eq(AT3(weights, b, q, k), 0.0f, "(%d, %d, %d)", b, q, k);
            }
            cr_expect(fabs(sum - 1.0) < 5e-4, "row (%d, %d) sums to %g", b, q, sum);
        }
}

/* The solution's two masks for n tokens: causal, then causal + padding
 * after real_length tokens; its exit status says its own checks held. */
static void expect_causal_solution(const char *args, int n, int real_length)
{
    RunResult r = run_program("02_softmax_mask/exercise_causal_mask", args);
    cr_expect_eq(r.status, 0, "%s: stderr: %s", args, r.err);
    Tensor *causal = printed(r.out, "valid_lens", 0, SHAPE(1, n));
    Tensor *both = printed(r.out, "valid_lens", 1, SHAPE(2, n));
    for (int q = 0; q < n; q++) {
        cr_expect_eq(AT2(causal, 0, q), (float)(q + 1));
        cr_expect_eq(AT2(both, 0, q), (float)(q + 1));
        cr_expect_eq(AT2(both, 1, q), (float)(q + 1 < real_length ? q + 1 : real_length));
    }
    Tensor *weights = printed(r.out, "masked_softmax(scores, valid_lens)", 0, SHAPE(1, n, n));
    Tensor *padded = printed(r.out, "weights of sequence 1", 0, SHAPE(1, n, n));
    Tensor *padded_lens = tensor_from(&AT2(both, 1, 0), SHAPE(1, n));
    expect_causal(weights, causal);
    expect_causal(padded, padded_lens);
    /* query 0 sees only itself */
    cr_expect_eq(AT3(weights, 0, 0, 0), 1.0f);
    Tensor *all[] = {causal, both, weights, padded, padded_lens};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    run_result_free(&r);
}

Test(chapter02, causal_mask_solution)
{
    expect_causal_solution("--tokens 6 --seed 3", 6, 3);
    /* two tokens: one real, one padded */
    expect_causal_solution("--tokens 2", 2, 1);
    /* three tokens: sequence 1 must still end in padding */
    expect_causal_solution("--tokens 3", 3, 2);
}
