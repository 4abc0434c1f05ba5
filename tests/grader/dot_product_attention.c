/* dot_product_attention.c - grades exercise 3.2, scaled dot-product
 * attention with valid_lens (d2l's DotProductAttention), against
 * dot_product_attention (common/attention.c). masked_softmax (common/softmax.h)
 * may be called. */
#include "exercises.h"
#include "attention.h"
#include "grader.h"
#include "worked_example.h"

#include <math.h>

/* true when every column weights[b, :, j] sums to 1 and some row does not:
 * a softmax over the queries (dimension 1) instead of the keys (the last) */
static bool softmax_over_queries(const Tensor *weights, const ValidLens *valid_lens)
{
    bool rows_ok = true;
    for (int b = 0; b < weights->shape[0]; b++)
        for (int i = 0; i < weights->shape[1]; i++) {
            double sum = 0;
            for (int j = 0; j < weights->shape[2]; j++)
                sum += AT3(weights, b, i, j);
            int valid_len = valid_lens ? valid_len_at(valid_lens, b, i) : weights->shape[2];
            rows_ok = rows_ok && fabs(sum - (valid_len > 0)) < 1e-4;
        }
    for (int b = 0; b < weights->shape[0]; b++)
        for (int j = 0; j < weights->shape[2]; j++) {
            double sum = 0;
            for (int i = 0; i < weights->shape[1]; i++)
                sum += AT3(weights, b, i, j);
            if (!(fabs(sum - 1) < 1e-4))
                return false;
        }
    return !rows_ok;
}

static void grade_case(Rng *rng, int index)
{
    int batch = index < 3 ? 1 : draw_size(rng, index, 150, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 150, 1, 4);
    bool large = large_case(index, 150), probe = mask_probe_case(index);
    int num_keys = index == 1 ? 1
                 : large      ? draw_int(rng, 150, 300)
                              : draw_size(rng, index, 150, 1, 5);
    int d = index == 2 || probe ? 1 : large ? draw_int(rng, 37, 61) : draw_size(rng, index, 150, 2, 5);
    int v = large ? draw_int(rng, 33, 47) : draw_size(rng, index, 150, 1, 6);
    int kind = probe ? 1 : index % 3;   /* 0: no mask, 1: 1-D, 2: 2-D */
    /* queries and keys up to about 30: scores of a few thousand, where a
     * softmax without its maximum overflows; larger inputs would make the
     * float dot products themselves differ in their last bits between two
     * right answers, more than the tolerance below allows */
    float scale = draw_scale(rng, index) > 1.0f ? 30.0f : 1.0f;
    const char *lens_kind = kind == 0 ? "None" : kind == 1 ? "1-D" : "2-D";
    Tensor *queries = draw_normal(rng, scale, SHAPE(batch, num_queries, d));
    Tensor *keys = draw_normal(rng, scale, SHAPE(batch, num_keys, d));
    const Tensor *values =
        case_input("values", draw_normal(rng, 1.0f, SHAPE(batch, num_keys, v)));
    const ValidLens *valid_lens = case_valid_lens(
        "valid_lens",
        kind == 0 ? NULL : draw_valid_lens(rng, batch, num_queries, num_keys, kind == 2));
    if (probe) {
        /* d = 1 and queries between 0.5 and 1.5: the kept keys near -M give
         * scores near -M, the masked near +M; one product per score, so
         * every right answer rounds alike, and only an exact 0 passes */
        float magnitude = mask_probe_magnitude(index);
        for (size_t i = 0; i < queries->size; i++)
            queries->data[i] = 0.5f + rng_uniform(rng);
        for (int b = 0; b < batch; b++)
            mask_probe_row(rng, keys->data + (size_t)b * num_keys, num_keys,
                           valid_len_at(valid_lens, b, 0), magnitude);
        case_describe("B = %d, T = %d, n_k = %d, d = 1, v = %d, valid_lens 1-D, scores of the "
                      "kept keys near -%g, of the masked near +%g", batch, num_queries,
                      num_keys, v, (double)magnitude, (double)magnitude);
    } else {
        case_describe("B = %d, T = %d, n_k = %d, d = %d, v = %d, valid_lens %s, queries and "
                      "keys up to about %g", batch, num_queries, num_keys, d, v, lens_kind,
                      (double)scale);
    }
    case_input("queries", queries);
    case_input("keys", keys);

    Tensor *expected_weights = NULL;
    Tensor *expected =
        case_keep(dot_product_attention(queries, keys, values, valid_lens, NULL,
                                        &expected_weights));
    case_keep(expected_weights);
    Tensor *weights = NULL;
    case_calling();
    Tensor *got =
        case_keep(my_dot_product_attention(queries, keys, values, valid_lens, &weights));
    case_called();
    case_keep(weights);

    expect_tensor("weights", weights, SHAPE(batch, num_queries, num_keys), 1);
    expect_tensor("output", got, SHAPE(batch, num_queries, v), 1);
    expect_finite("weights", weights, 2);
    expect_masked_zero("weights", weights, valid_lens, 2);
    expect_that(!softmax_over_queries(weights, valid_lens), 1,
                "every column weights[b, :, j] sums to 1: the softmax ran over the queries "
                "(dimension 1); each query's weights over the keys (the last dimension) must "
                "sum to 1");
    expect_rows_sum_to_one("weights", weights, valid_lens, 2);
    if (valid_lens == NULL && d > 1) {
        /* the worked example's formula, softmax(Q K^T): name the missing scale */
        Tensor *unscaled_weights = NULL;
        case_keep(unscaled_attention(queries, keys, values, &unscaled_weights));
        case_keep(unscaled_weights);
        expect_that(tensor_allclose(expected_weights, weights, 1e-5f, 1e-4f, NULL) ||
                        !tensor_allclose(unscaled_weights, weights, 1e-5f, 1e-4f, NULL),
                    2, "the weights are softmax(Q K^T): the scores are not divided by sqrt(d) "
                    "= %.4g", sqrt((double)d));
    }
    expect_close("weights", expected_weights, weights, 1e-5, 1e-4, 2);
    expect_close("output", expected, got, 1e-5, 1e-4, 3);
}

const Exercise exercise = {"dot_product_attention", "03_self_attention", "3.2", 150, grade_case,
                           "dot_product_attention dot_product_attention_cache unscaled_attention", NULL};
