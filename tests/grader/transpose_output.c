/* transpose_output.c - grades exercise 4.3, merging the heads, against
 * transpose_output (common/heads.c), exactly; the round trip
 * transpose_output(transpose_qkv(x)) = x is checked too.
 * refuses: transpose_output transpose_qkv_backward */
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
    case_describe("B*H = %d (B = %d, H = %d), T = %d, d = %d, so D = %d", B * H, B, H, T, d, D);
    const Tensor *x = case_input("x", tensor_arange(SHAPE(B * H, T, d)));

    Tensor *expected = case_keep(transpose_output(x, H));
    case_calling();
    Tensor *got = case_keep(my_transpose_output(x, H));
    case_called();

    expect_tensor("out", got, SHAPE(B, T, D), 1);
    for (size_t i = 0; i < expected->size; i++) {
        if (memcmp(&got->data[i], &expected->data[i], sizeof(float)) == 0)
            continue;
        char here[128], want[128], have[128];
        element_name(here, sizeof here, "out", i, T, D);
        element_name(want, sizeof want, "x", (size_t)expected->data[i], T, d);
        float v = got->data[i];
        if (v >= 0 && v < (float)x->size && v == (float)(size_t)v)
            element_name(have, sizeof have, "x", (size_t)v, T, d);
        else
            snprintf(have, sizeof have, "%.6g, no element of x", (double)v);
        size_t c = i % (size_t)D, b = i / ((size_t)T * D);
        expect_that(false, 2,
                    "%s holds %s; column %zu is feature %zu of head %zu of sequence %zu, row "
                    "b * H + h = %zu of x, so it must hold %s", here, have, c, c % (size_t)d,
                    c / (size_t)d, b, b * (size_t)H + c / (size_t)d, want);
    }
    /* the round trip: splitting the result again gives x back, exactly */
    Tensor *again = case_keep(transpose_qkv(got, H));
    expect_that(memcmp(again->data, x->data, x->size * sizeof(float)) == 0, 2,
                "transpose_qkv of your result is not x again: the round trip must be exact");
}

const Exercise exercise = {"transpose_output", "04_transpose_qkv", "4.3", 100, grade_case};
