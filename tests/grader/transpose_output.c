/* transpose_output.c - grades exercise 4.3, merging the heads, against
 * transpose_output (common/heads.c), exactly: bit for bit (tolerance 0),
 * on whole numbers that name their own place and on fractions i + k/100.
 * Checked in this order: the shape, every element of x exactly once in
 * the result, each element where the reference puts it, and the round trip
 * transpose_qkv(result) = x, bit for bit. */
#include "exercises.h"
#include "grader.h"
#include "heads.h"
#include "heads_common.h"

#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int B, T, H, d;
    draw_head_shape(rng, index, 100, &B, &T, &H, &d);
    int D = H * d;
    const Tensor *x = case_input("x", draw_head_values(rng, index, SHAPE(B * H, T, d)));
    case_describe("B*H = %d (B = %d, H = %d), T = %d, d = %d, so D = %d, %s", B * H, B, H, T, d,
                  D, head_values_name(x));

    Tensor *expected = case_keep(transpose_output(x, H));
    case_calling();
    Tensor *got = case_keep(my_transpose_output(x, H));
    case_called();

    expect_tensor("out", got, SHAPE(B, T, D), 1);
    expect_moved_once(x, T, d, got, T, D, 1);
    for (size_t i = 0; i < expected->size; i++) {
        if (memcmp(&got->data[i], &expected->data[i], sizeof(float)) == 0)
            continue;
        /* out[b, t, c] with c = h * d + j comes from x[b * H + h, t, j] */
        size_t b = i / ((size_t)T * D), t = i / (size_t)D % (size_t)T, c = i % (size_t)D;
        size_t h = c / (size_t)d, j = c % (size_t)d;
        size_t from = ((b * H + h) * T + t) * d + j;
        char here[128], want[128], have[128];
        element_name(here, sizeof here, "out", i, T, D);
        element_name(want, sizeof want, "x", from, T, d);
        source_name(have, sizeof have, x, got->data[i], T, d);
        expect_that(false, 2,
                    "%s holds %s; column %zu is feature %zu of head %zu of sequence %zu, row "
                    "b * H + h = %zu of x, so it must hold %s", here, have, c, j, h, b,
                    b * H + h, want);
    }
    /* the round trip: splitting the result again gives x back, exactly */
    Tensor *again = case_keep(transpose_qkv(got, H));
    expect_that(memcmp(again->data, x->data, x->size * sizeof(float)) == 0, 2,
                "transpose_qkv of your result is not x again: the round trip must be exact");
}

const Exercise exercise = {"transpose_output", "04_transpose_qkv", "4.3", 100, grade_case,
                           "transpose_output transpose_qkv_backward", NULL};
