/* masked_softmax.c - grades exercise 2.3, masked_softmax over (B, T, n_k)
 * with 1-D, 2-D or no valid_lens, against masked_softmax (common/softmax.c). */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

static void grade_case(Rng *rng, int index)
{
    /* the edges first: T = 1, n_k = 1, B = 1; then growing sizes */
    int batch = index < 3 ? 1 : draw_size(rng, index, 120, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 120, 1, 5);
    int num_keys = index == 1              ? 1
                 : large_case(index, 150) ? draw_int(rng, 200, 400)
                                          : draw_size(rng, index, 120, 1, 6);
    bool probe = mask_probe_case(index);
    int kind = probe ? 1 + index % 2 : index % 3;   /* 0: no mask, 1: 1-D, 2: 2-D */
    float scale = draw_scale(rng, index);
    const char *lens_kind = kind == 0 ? "None" : kind == 1 ? "1-D" : "2-D";
    Tensor *scores = draw_normal(rng, scale, SHAPE(batch, num_queries, num_keys));
    const ValidLens *valid_lens = case_valid_lens(
        "valid_lens",
        kind == 0 ? NULL : draw_valid_lens(rng, batch, num_queries, num_keys, kind == 2));
    if (probe) {
        /* kept scores far below the masked ones: only an exact 0 passes */
        float magnitude = mask_probe_magnitude(index);
        for (int b = 0; b < batch; b++)
            for (int i = 0; i < num_queries; i++)
                mask_probe_row(rng, scores->data + ((size_t)b * num_queries + i) * num_keys,
                               num_keys, valid_len_at(valid_lens, b, i), magnitude);
        case_describe("B = %d, T = %d, n_k = %d, valid_lens %s, kept scores near -%g, masked "
                      "near +%g", batch, num_queries, num_keys, lens_kind, (double)magnitude,
                      (double)magnitude);
    } else {
        case_describe("B = %d, T = %d, n_k = %d, valid_lens %s, scores up to about %g", batch,
                      num_queries, num_keys, lens_kind, (double)scale);
    }
    case_input("scores", scores);

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

const Exercise exercise = {"masked_softmax", "02_softmax_mask", "2.3", 150, grade_case,
                           "masked_softmax softmax", NULL};
