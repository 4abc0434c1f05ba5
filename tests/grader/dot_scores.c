/* dot_scores.c - grades exercise 1.1, the scores of queries against keys,
 * against matmul_bt (common/ops.c). */
#include "exercises.h"
#include "grader.h"
#include "ops.h"

static void grade_case(Rng *rng, int index)
{
    /* the edges first (one query, one key, size 1), then sizes that all differ */
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 100, 1, 5);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 100, 1, 6);
    int d = index == 2 ? 1 : draw_size(rng, index, 100, 1, 7);
    case_describe("T = %d, n_k = %d, d = %d", num_queries, num_keys, d);
    const Tensor *queries = case_input("queries", draw_normal(rng, 1.0f, SHAPE(num_queries, d)));
    const Tensor *keys = case_input("keys", draw_normal(rng, 1.0f, SHAPE(num_keys, d)));

    Tensor *expected = case_keep(matmul_bt(queries, keys));
    case_calling();
    Tensor *got = case_keep(my_dot_scores(queries, keys));
    case_called();

    expect_tensor("scores", got, SHAPE(num_queries, num_keys), 1);
    /* the keys read as columns, keys->data[p * n_k + j]: name that mistake */
    if (num_keys > 1 && d > 1) {
        Tensor *columns = case_keep(tensor_zeros(SHAPE(num_queries, num_keys)));
        for (int i = 0; i < num_queries; i++)
            for (int j = 0; j < num_keys; j++)
                for (int p = 0; p < d; p++)
                    AT2(columns, i, j) += AT2(queries, i, p) * keys->data[p * num_keys + j];
        expect_that(!tensor_allclose(got, columns, 1e-5f, 1e-5f, NULL) ||
                        tensor_allclose(expected, columns, 1e-5f, 1e-5f, NULL), 2,
                    "your scores read key j as a column, keys->data[p * n_k + j]; keys are "
                    "stored one per row, so element p of key j is keys->data[j * d + p]");
    }
    /* a sum of d products, each rounded: 1e-5 absolute on values near 1 */
    expect_close("scores", expected, got, 1e-5, 1e-5, 2);
}

const Exercise exercise = {"dot_scores", "01_dot_product", "1.1", 100, grade_case,
                           "matmul_bt matmul_bt_raw matmul matmul_raw", NULL};
