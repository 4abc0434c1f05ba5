/* softmax_row.c - grades exercise 2.1, a stable softmax over one row,
 * against softmax_row (common/softmax.c). */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int n = index < 4              ? index + 1
          : large_case(index, 120) ? draw_int(rng, 200, 600)
                                   : draw_size(rng, index, 120, 1, 24);
    float scale = draw_scale(rng, index);
    case_describe("n = %d, scores up to about %g", n, (double)scale);
    const Tensor *scores = case_input("row", draw_normal(rng, scale, SHAPE(n)));

    Tensor *expected = case_keep(tensor_copy(scores));
    softmax_row(expected->data, n);

    float *row = case_output("row", (size_t)n);
    memcpy(row, scores->data, (size_t)n * sizeof(float));
    case_calling();
    my_softmax_row(row, n);
    case_called();

    Tensor *got = case_keep(tensor_from(row, SHAPE(n)));
    expect_finite("row", got, 2);
    expect_rows_sum_to_one("row", got, NULL, 1);
    expect_close("row", expected, got, 1e-6, 1e-4, 3);
}

const Exercise exercise = {"softmax_row", "02_softmax_mask", "2.1", 120, grade_case,
                           "softmax_row masked_softmax_row softmax masked_softmax", NULL};
