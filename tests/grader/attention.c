/* attention.c - grades exercise 3.2, scaled dot-product attention with
 * valid_lens, against dot_product_attention (common/attention.c).
 * masked_softmax (common/softmax.h) may be called.
 * refuses: dot_product_attention dot_product_attention_cache unscaled_attention */
#include "exercises.h"
#include "attention.h"
#include "grader.h"

static void grade_case(Rng *rng, int index)
{
    int batch = index < 3 ? 1 : draw_size(rng, index, 120, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 120, 1, 4);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 120, 1, 5);
    int d = index == 2 ? 1 : draw_size(rng, index, 120, 2, 5);
    int v = draw_size(rng, index, 120, 1, 6);
    int kind = index % 3;   /* 0: no mask, 1: 1-D, 2: 2-D */
    float scale = draw_scale(rng, index) > 1.0f ? 30.0f : 1.0f;
    case_describe("B = %d, T = %d, n_k = %d, d = %d, v = %d, valid_lens %s, queries and keys "
                  "up to about %g", batch, num_queries, num_keys, d, v,
                  kind == 0 ? "None" : kind == 1 ? "1-D" : "2-D", (double)scale);
    const Tensor *queries =
        case_input("queries", draw_normal(rng, scale, SHAPE(batch, num_queries, d)));
    const Tensor *keys = case_input("keys", draw_normal(rng, scale, SHAPE(batch, num_keys, d)));
    const Tensor *values =
        case_input("values", draw_normal(rng, 1.0f, SHAPE(batch, num_keys, v)));
    const ValidLens *valid_lens = case_valid_lens(
        "valid_lens",
        kind == 0 ? NULL : draw_valid_lens(rng, batch, num_queries, num_keys, kind == 2));

    Tensor *expected_weights = NULL;
    Tensor *expected =
        case_keep(dot_product_attention(queries, keys, values, valid_lens, NULL,
                                        &expected_weights));
    case_keep(expected_weights);
    Tensor *weights = NULL;
    case_calling();
    Tensor *got = case_keep(my_attention(queries, keys, values, valid_lens, &weights));
    case_called();
    case_keep(weights);

    expect_tensor("weights", weights, SHAPE(batch, num_queries, num_keys), 1);
    expect_tensor("output", got, SHAPE(batch, num_queries, v), 1);
    expect_finite("weights", weights, 2);
    expect_masked_zero("weights", weights, valid_lens, 2);
    expect_rows_sum_to_one("weights", weights, valid_lens, 2);
    expect_close("weights", expected_weights, weights, 1e-5, 1e-4, 2);
    expect_close("output", expected, got, 1e-5, 1e-4, 3);
}

const Exercise exercise = {"attention", "03_self_attention", "3.2", 150, grade_case};
