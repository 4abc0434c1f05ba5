/* repeat_valid_lens.c - grades exercise 4.4, valid_lens over the heads,
 * against valid_lens_repeat_interleave (common/heads.c). Every sequence
 * gets lengths of its own, so a row that reads another sequence's shows. */
#include "exercises.h"
#include "grader.h"
#include "heads.h"

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 100, 2, 4);
    int num_heads = index == 0 || index == 2 ? 1 : draw_size(rng, index, 100, 2, 4);
    int num_queries = draw_size(rng, index, 100, 1, 3), num_keys = 9;
    bool two_d = index % 2 == 1;
    case_describe("B = %d, H = %d, valid_lens %s", batch, num_heads,
                  two_d ? "2-D (B, T)" : "1-D (B,)");
    ValidLens *valid_lens = draw_valid_lens(rng, batch, num_queries, num_keys, two_d);
    /* lengths that differ from one sequence to the next */
    int per_sequence = two_d ? num_queries : 1;
    for (int b = 0; b < batch; b++)
        for (int q = 0; q < per_sequence; q++)
            valid_lens->data[b * per_sequence + q] = (3 * b + q + (int)rng_below(rng, 2)) % 10;
    case_valid_lens("valid_lens", valid_lens);

    ValidLens *expected = case_keep_valid_lens(valid_lens_repeat_interleave(valid_lens, num_heads));
    case_calling();
    ValidLens *got = case_keep_valid_lens(my_repeat_valid_lens(valid_lens, num_heads));
    case_called();

    expect_that(got != NULL, 1, "your function returned NULL, not a valid_lens");
    expect_that(got->ndim == valid_lens->ndim && got->shape[0] == batch * num_heads &&
                    (!two_d || got->shape[1] == num_queries), 1,
                "the result has %d dimensions, (%d, %d), must have the input's %d with B * H = "
                "%d rows", got->ndim, got->shape[0], got->ndim == 2 ? got->shape[1] : 0,
                valid_lens->ndim, batch * num_heads);
    for (int r = 0; r < batch * num_heads; r++)
        for (int q = 0; q < per_sequence; q++) {
            int want = expected->data[r * per_sequence + q], have = got->data[r * per_sequence + q];
            expect_that(have == want, 2,
                        "row %d (head %d of sequence %d) has valid_len %d, must be sequence "
                        "%d's %d: row b * H + h belongs to sequence b = row / H", r,
                        r % num_heads, r / num_heads, have, r / num_heads, want);
        }
}

const Exercise exercise = {"repeat_valid_lens", "04_transpose_qkv", "4.4", 100, grade_case,
                           "valid_lens_repeat_interleave", NULL};
