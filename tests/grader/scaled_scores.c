/* scaled_scores.c - grades exercise 3.1, the scaled scores Q K^T / sqrt(d),
 * against matmul_bt (common/ops.c) scaled as dot_product_attention scales. */
#include "exercises.h"
#include "grader.h"
#include "ops.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int batch = index < 3 ? 1 : draw_size(rng, index, 100, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 100, 1, 4);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 100, 1, 5);
    /* d = 1 once (where sqrt(d) = d = 1), then sizes where they differ */
    int d = index == 2 ? 1 : draw_int(rng, 2, 2 + (index * 7) / 100);
    case_describe("B = %d, T = %d, n_k = %d, d = %d", batch, num_queries, num_keys, d);
    const Tensor *queries =
        case_input("queries", draw_normal(rng, 1.0f, SHAPE(batch, num_queries, d)));
    const Tensor *keys = case_input("keys", draw_normal(rng, 1.0f, SHAPE(batch, num_keys, d)));

    Tensor *expected = case_keep(matmul_bt(queries, keys));
    float scale = 1.0f / sqrtf((float)d);
    for (size_t i = 0; i < expected->size; i++)
        expected->data[i] *= scale;
    case_calling();
    Tensor *got = case_keep(my_scaled_scores(queries, keys));
    case_called();

    expect_tensor("scores", got, SHAPE(batch, num_queries, num_keys), 1);
    /* scores that are all the right ones times one factor: name the factor */
    double ge = 0, ee = 0;
    for (size_t i = 0; i < expected->size; i++) {
        ge += (double)got->data[i] * expected->data[i];
        ee += (double)expected->data[i] * expected->data[i];
    }
    double ratio = ee > 0 ? ge / ee : 1, root = sqrt((double)d);
    Tensor *rescaled = case_keep(tensor_copy(got));
    for (size_t i = 0; i < rescaled->size; i++)
        rescaled->data[i] = (float)(rescaled->data[i] / ratio);
    if (d > 1 && tensor_allclose(rescaled, expected, 1e-5f, 1e-4f, NULL)) {
        expect_that(fabs(ratio - root) > 1e-3 * root, 2,
                    "every score is sqrt(d) = %.4g times too large: the dot products are not "
                    "divided by sqrt(d)", root);
        expect_that(fabs(ratio - 1 / root) > 1e-3 / root, 2,
                    "every score is sqrt(d) = %.4g times too small: divided by d, not sqrt(d)",
                    root);
    }
    expect_close("scores", expected, got, 1e-5, 1e-5, 2);
}

const Exercise exercise = {"scaled_scores", "03_self_attention", "3.1", 100, grade_case,
                           "matmul_bt matmul_bt_raw dot_product_attention dot_product_attention_cache", NULL};
