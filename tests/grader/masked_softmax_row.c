/* masked_softmax_row.c - grades exercise 2.2, one row masked by its
 * valid_len, against masked_softmax_row (common/softmax.c). */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int n = index < 6              ? 1 + index / 3
          : large_case(index, 120) ? draw_int(rng, 200, 600)
                                   : draw_size(rng, index, 120, 2, 16);
    /* the edges first: valid_len 0, then the full row, then in between */
    int valid_len = index < 6 ? (index % 3 == 0 ? 0 : index % 3 == 1 ? n : n - 1)
                              : draw_int(rng, mask_probe_case(index) ? 1 : 0, n);
    float scale = draw_scale(rng, index);
    Tensor *scores = draw_normal(rng, scale, SHAPE(n));
    if (mask_probe_case(index)) {
        /* kept scores far below the masked ones: only an exact 0 passes */
        float magnitude = mask_probe_magnitude(index);
        mask_probe_row(rng, scores->data, n, valid_len, magnitude);
        case_describe("n = %d, valid_len = %d, kept scores near -%g, masked near +%g", n,
                      valid_len, (double)magnitude, (double)magnitude);
    } else {
        case_describe("n = %d, valid_len = %d, scores up to about %g", n, valid_len,
                      (double)scale);
    }
    case_input("row", scores);

    Tensor *expected = case_keep(tensor_copy(scores));
    masked_softmax_row(expected->data, n, valid_len);

    float *row = case_output("row", (size_t)n);
    memcpy(row, scores->data, (size_t)n * sizeof(float));
    case_calling();
    my_masked_softmax_row(row, n, valid_len);
    case_called();

    Tensor *weights = case_keep(tensor_from(row, SHAPE(n)));
    ValidLens *lens = case_keep_valid_lens(valid_lens_1d(&valid_len, 1));
    expect_finite("row", weights, 2);
    expect_masked_zero("row", weights, lens, 2);
    expect_rows_sum_to_one("row", weights, lens, 1);
    expect_close_floats("row", expected->data, row, SHAPE(n), 1e-6, 1e-4, 3);
}

const Exercise exercise = {"masked_softmax_row", "02_softmax_mask", "2.2", 120, grade_case,
                           "masked_softmax_row masked_softmax", NULL};
