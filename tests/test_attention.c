/*
 * test_attention.c - scaled dot-product attention and dropout (chapter 03).
 *
 * A 2x2 case worked on paper, PyTorch references (fixtures/attention_ref.h,
 * made by fixtures/make_attention_fixtures.py with d2l's
 * DotProductAttention in eval mode), and properties of dropout.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>

#include "attention.h"
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

/* The tests below expect the library to stop with status 1. What they
 * allocate is kept in statics, still reachable when the process stops, so
 * the leak checker does not count it. */
static Tensor *kept[3];
static ValidLens *kept_lens;

Test(dropout, p_of_one_is_an_error, .exit_code = 1, .init = cr_redirect_stderr)
{
    static Rng rng;
    rng = rng_new(1);
    Dropout train = {1.0f, true, &rng};
    kept[0] = tensor_full(0.5f, SHAPE(4));
    dropout_inplace(kept[0], &train);
}

/* ---- shape errors ----------------------------------------------------------- */

static void attention_with(const int *key_shape, const int *value_shape)
{
    kept[0] = tensor_from(masked_queries, SHAPE(2, 3, 4));
    kept[1] = tensor_zeros(3, key_shape);
    kept[2] = tensor_zeros(3, value_shape);
    dot_product_attention(kept[0], kept[1], kept[2], kept_lens, NULL, NULL);
}

Test(attention, keys_of_another_size_than_queries_is_an_error, .exit_code = 1,
     .init = cr_redirect_stderr)
{
    attention_with((const int[]){2, 5, 3}, (const int[]){2, 5, 3});
}

Test(attention, values_for_another_number_of_keys_is_an_error, .exit_code = 1,
     .init = cr_redirect_stderr)
{
    attention_with((const int[]){2, 5, 4}, (const int[]){2, 6, 3});
}

Test(attention, valid_len_above_num_keys_is_an_error, .exit_code = 1,
     .init = cr_redirect_stderr)
{
    kept_lens = valid_lens_1d((const int[]){2, 6}, 2);
    attention_with((const int[]){2, 5, 4}, (const int[]){2, 5, 3});
}
