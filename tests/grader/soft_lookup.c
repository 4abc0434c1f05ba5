/* soft_lookup.c - grades exercise 1.4, the soft lookup
 * softmax(queries keys^T) values, against unscaled_attention
 * (common/worked_example.c). softmax_row and softmax (common/softmax.h) may
 * be called; the scores reach the thousands, where a softmax that does not
 * subtract its maximum overflows. */
#include "exercises.h"
#include "grader.h"
#include "ops.h"
#include "softmax.h"
#include "worked_example.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 100, 1, 4);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 100, 1, 5);
    int d = draw_size(rng, index, 100, 1, 5), v = index == 2 ? 1 : draw_size(rng, index, 100, 1, 6);
    float scale = index % 4 == 3 ? 30.0f : 1.0f;
    case_describe("T = %d, n_k = %d, d = %d, v = %d, queries and keys up to about %g",
                  num_queries, num_keys, d, v, (double)scale);
    const Tensor *queries =
        case_input("queries", draw_normal(rng, scale, SHAPE(num_queries, d)));
    const Tensor *keys = case_input("keys", draw_normal(rng, scale, SHAPE(num_keys, d)));
    /* where v > 1 the last column of values is all 1: its output is the sum
     * of each query's weights, which must be 1 */
    Tensor *values_drawn = draw_normal(rng, 1.0f, SHAPE(num_keys, v));
    if (v > 1)
        for (int j = 0; j < num_keys; j++)
            AT2(values_drawn, j, v - 1) = 1.0f;
    const Tensor *values = case_input("values", values_drawn);

    Tensor *expected = case_keep(unscaled_attention(queries, keys, values, NULL));
    case_calling();
    Tensor *got = case_keep(my_soft_lookup(queries, keys, values));
    case_called();

    expect_tensor("output", got, SHAPE(num_queries, v), 1);
    expect_finite("output", got, 2);
    /* one softmax over all T x n_k scores at once, as a softmax with no axis
     * does: name that mistake */
    if (num_queries > 1) {
        Tensor *weights_all = case_keep(matmul_bt(queries, keys));
        softmax_row(weights_all->data, num_queries * num_keys);
        Tensor *output_all = case_keep(matmul(weights_all, values));
        expect_that(!tensor_allclose(got, output_all, 1e-5f, 1e-4f, NULL) ||
                        tensor_allclose(expected, output_all, 1e-5f, 1e-4f, NULL), 2,
                    "your weights are one softmax over all %d x %d scores at once, so a "
                    "query's weights no longer sum to 1; each query's row of scores needs a "
                    "softmax of its own", num_queries, num_keys);
    }
    if (v > 1)
        for (int t = 0; t < num_queries; t++) {
            float sum = AT2(got, t, v - 1);
            expect_that(fabsf(sum - 1.0f) <= 1e-5f, 2,
                        "output[%d, %d] is %.6g where every value in column %d is 1: weights "
                        "that sum to 1, times whole value rows, give exactly 1", t, v - 1,
                        (double)sum, v - 1);
        }
    /* each output row is a convex mix of value rows: inside their range */
    for (int t = 0; t < num_queries; t++)
        for (int c = 0; c < v; c++) {
            float low = AT2(values, 0, c), high = low;
            for (int j = 1; j < num_keys; j++) {
                low = AT2(values, j, c) < low ? AT2(values, j, c) : low;
                high = AT2(values, j, c) > high ? AT2(values, j, c) : high;
            }
            float y = AT2(got, t, c);
            expect_that(y >= low - 1e-5f && y <= high + 1e-5f, 2,
                        "output[%d, %d] is %.6g, outside the values' column %d (%.6g to %.6g): "
                        "weights that sum to 1 cannot leave it", t, c, (double)y, c, (double)low,
                        (double)high);
        }
    /* scores divided by sqrt(d), as chapter 03 will: not this lookup */
    if (d > 1) {
        Tensor *scaled = case_keep(matmul_bt(queries, keys));
        for (size_t k = 0; k < scaled->size; k++)
            scaled->data[k] /= sqrtf((float)d);
        Tensor *weights_scaled = case_keep(softmax(scaled));
        Tensor *output_scaled = case_keep(matmul(weights_scaled, values));
        expect_that(!tensor_allclose(got, output_scaled, 1e-5f, 1e-4f, NULL) ||
                        tensor_allclose(expected, output_scaled, 1e-5f, 1e-4f, NULL), 1,
                    "your scores are divided by sqrt(d) = sqrt(%d); the soft lookup of this "
                    "chapter uses the plain dot products (chapter 03 adds the scale)", d);
    }
    expect_close("output", expected, got, 1e-5, 1e-4, 3);
}

const Exercise exercise = {"soft_lookup", "01_dot_product", "1.4", 100, grade_case,
                           "unscaled_attention dot_product_attention dot_product_attention_cache", NULL};
