/* weighted_sum.c - grades exercise 1.2, the weighted sum of values, against
 * matmul (common/ops.c). */
#include "exercises.h"
#include "grader.h"
#include "ops.h"
#include "softmax.h"

static void grade_case(Rng *rng, int index)
{
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 100, 1, 5);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 100, 1, 6);
    int v = index == 2 ? 1 : draw_size(rng, index, 100, 1, 7);
    case_describe("T = %d, n_k = %d, v = %d", num_queries, num_keys, v);
    /* weights as attention makes them: rows of a softmax */
    Tensor *scores = draw_normal(rng, 2.0f, SHAPE(num_queries, num_keys));
    const Tensor *weights = case_input("weights", softmax(scores));
    tensor_free(scores);
    const Tensor *values = case_input("values", draw_normal(rng, 1.0f, SHAPE(num_keys, v)));

    Tensor *expected = case_keep(matmul(weights, values));
    case_calling();
    Tensor *got = case_keep(my_weighted_sum(weights, values));
    case_called();

    expect_tensor("output", got, SHAPE(num_queries, v), 1);
    expect_close("output", expected, got, 1e-5, 1e-5, 2);
}

const Exercise exercise = {"weighted_sum", "01_dot_product", "1.2", 100, grade_case,
                           "matmul matmul_raw matmul_bt matmul_bt_raw", NULL};
