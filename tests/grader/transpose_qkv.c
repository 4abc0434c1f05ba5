/* transpose_qkv.c - grades exercise 4.2, splitting into heads, against
 * transpose_qkv (common/heads.c). A transpose does no arithmetic: every
 * value must arrive exactly. The values are distinct, so a misplaced one
 * tells where it came from.
 * refuses: transpose_qkv transpose_output_backward */
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
    case_describe("B = %d, T = %d, D = %d, H = %d, so d = %d", B, T, D, H, d);
    const Tensor *x = case_input("x", tensor_arange(SHAPE(B, T, D)));

    Tensor *expected = case_keep(transpose_qkv(x, H));
    case_calling();
    Tensor *got = case_keep(my_transpose_qkv(x, H));
    case_called();

    expect_tensor("out", got, SHAPE(B * H, T, d), 1);
    for (size_t i = 0; i < expected->size; i++) {
        if (memcmp(&got->data[i], &expected->data[i], sizeof(float)) == 0)
            continue;
        char here[128], want[128], have[128];
        size_t from = (size_t)expected->data[i];
        element_name(here, sizeof here, "out", i, T, d);
        element_name(want, sizeof want, "x", from, T, D);
        float v = got->data[i];
        if (v >= 0 && v < (float)x->size && v == (float)(size_t)v)
            element_name(have, sizeof have, "x", (size_t)v, T, D);
        else
            snprintf(have, sizeof have, "%.6g, no element of x", (double)v);
        expect_that(false, 2,
                    "%s holds %s; row %zu is head %zu of sequence %zu, so it must hold %s "
                    "(head h's features are columns h*d .. h*d + d - 1 of x)", here, have,
                    i / ((size_t)T * d), i / ((size_t)T * d) % (size_t)H,
                    i / ((size_t)T * d) / (size_t)H, want);
    }
}

const Exercise exercise = {"transpose_qkv", "04_transpose_qkv", "4.2", 100, grade_case};
