/* repeat_kv_heads.c - grades exercise 5.4, grouped-query attention's
 * key-value heads repeated for the query heads that read them, against
 * repeat_kv_heads (common/heads.c). The input holds distinct whole numbers,
 * so a misplaced row says which head it came from. */
#include "exercises.h"
#include "grader.h"
#include "heads.h"

#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int batch = index < 3 ? 1 : draw_size(rng, index, 100, 1, 3);
    int G = index == 0 ? 1 : draw_int(rng, 1, 3);
    int group = index == 1 ? 1 : draw_int(rng, 2, 3);   /* H / G query heads per kv head */
    int H = G * group, T = draw_size(rng, index, 100, 1, 3), d = draw_size(rng, index, 100, 1, 3);
    case_describe("B = %d, G = %d key-value heads, H = %d query heads (%d each), T = %d, d = %d",
                  batch, G, H, group, T, d);
    const Tensor *x = case_input("x", tensor_arange(SHAPE(batch * G, T, d)));

    Tensor *expected = case_keep(repeat_kv_heads(x, G, H));
    case_calling();
    Tensor *got = case_keep(my_repeat_kv_heads(x, G, H));
    case_called();

    expect_tensor("out", got, SHAPE(batch * H, T, d), 1);
    size_t row = (size_t)T * d;
    for (int r = 0; r < batch * H; r++) {
        if (memcmp(got->data + r * row, expected->data + r * row, row * sizeof(float)) == 0)
            continue;
        int b = r / H, h = r % H, want = b * G + h / group;
        float first = got->data[r * row];
        int from = first >= 0 && first == (float)(int)first ? (int)first / (int)row : -1;
        if (from >= 0 && from < batch * G)
            expect_that(false, 2,
                        "row %d (query head %d of sequence %d) holds key-value head %d of "
                        "sequence %d; query head h reads key-value head h / (H / G) = %d of "
                        "its own sequence, row %d of x", r, h, b, from % G, from / G,
                        h / group, want);
        expect_that(false, 2, "row %d (query head %d of sequence %d) must be row %d of x", r, h,
                    b, want);
    }
}

const Exercise exercise = {"repeat_kv_heads", "05_multihead", "5.4", 100, grade_case,
                           "repeat_kv_heads split_kv_heads", NULL};
