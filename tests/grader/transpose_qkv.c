/* transpose_qkv.c - grades exercise 4.2, splitting into heads, against
 * transpose_qkv (common/heads.c). A transpose does no arithmetic: every
 * value must arrive exactly, bit for bit (tolerance 0), on whole numbers
 * that name their own place and on fractions i + k/100. Checked in this
 * order: the shape, every element of x exactly once in the result, then
 * each element where the reference puts it. */
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
    const Tensor *x = case_input("x", draw_head_values(rng, index, SHAPE(B, T, D)));
    case_describe("B = %d, T = %d, D = %d, H = %d, so d = %d, %s", B, T, D, H, d,
                  head_values_name(x));

    Tensor *expected = case_keep(transpose_qkv(x, H));
    case_calling();
    Tensor *got = case_keep(my_transpose_qkv(x, H));
    case_called();

    expect_tensor("out", got, SHAPE(B * H, T, d), 1);
    expect_moved_once(x, T, D, got, T, d, 1);
    for (size_t i = 0; i < expected->size; i++) {
        if (memcmp(&got->data[i], &expected->data[i], sizeof(float)) == 0)
            continue;
        /* out[r, t, j] with r = b * H + h comes from x[b, t, h * d + j] */
        size_t r = i / ((size_t)T * d), t = i / (size_t)d % (size_t)T, j = i % (size_t)d;
        size_t b = r / (size_t)H, h = r % (size_t)H;
        size_t from = (b * T + t) * D + h * d + j;
        char here[128], want[128], have[128];
        element_name(here, sizeof here, "out", i, T, d);
        element_name(want, sizeof want, "x", from, T, D);
        source_name(have, sizeof have, x, got->data[i], T, D);
        expect_that(false, 2,
                    "%s holds %s; row %zu is head %zu of sequence %zu, so it must hold %s "
                    "(head h's features are columns h*d .. h*d + d - 1 of x)", here, have, r,
                    h, b, want);
    }
}

const Exercise exercise = {"transpose_qkv", "04_transpose_qkv", "4.2", 100, grade_case,
                           "transpose_qkv transpose_output_backward", NULL};
