/* masked_softmax.c - grades exercise 2.3, masked_softmax over (B, T, n_k)
 * with 1-D, 2-D or no valid_lens, against masked_softmax (common/softmax.c).
 * refuses: masked_softmax softmax */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

static void grade_case(Rng *rng, int index)
{
    /* the edges first: T = 1, n_k = 1, B = 1; then growing sizes */
    int batch = index < 3 ? 1 : draw_size(rng, index, 120, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 120, 1, 5);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 120, 1, 6);
    int kind = index % 3;   /* 0: no mask, 1: 1-D, 2: 2-D */
    float scale = draw_scale(rng, index);
    case_describe("B = %d, T = %d, n_k = %d, valid_lens %s, scores up to about %g", batch,
                  num_queries, num_keys, kind == 0 ? "None" : kind == 1 ? "1-D" : "2-D",
                  (double)scale);
    const Tensor *scores =
        case_input("scores", draw_normal(rng, scale, SHAPE(batch, num_queries, num_keys)));
    const ValidLens *valid_lens = case_valid_lens(
        "valid_lens",
        kind == 0 ? NULL : draw_valid_lens(rng, batch, num_queries, num_keys, kind == 2));

    Tensor *expected = case_keep(masked_softmax(scores, valid_lens));
    case_calling();
    Tensor *got = case_keep(my_masked_softmax(scores, valid_lens));
    case_called();

    expect_tensor("weights", got, SHAPE(batch, num_queries, num_keys), 1);
    expect_finite("weights", got, 2);
    expect_masked_zero("weights", got, valid_lens, 2);
    expect_rows_sum_to_one("weights", got, valid_lens, 1);
    expect_close("weights", expected, got, 1e-6, 1e-4, 3);
}

const Exercise exercise = {"masked_softmax", "02_softmax_mask", "2.3", 150, grade_case};
