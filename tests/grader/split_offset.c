/* split_offset.c - grades exercise 4.1, where an element of x lands when
 * the heads are split, against transpose_qkv (common/heads.c) applied to
 * x = arange: the value found at each place of the result is the flat
 * index of the element that landed there. */
#include "exercises.h"
#include "grader.h"
#include "heads.h"
#include "heads_common.h"

static void grade_case(Rng *rng, int index)
{
    int B, T, H, d;
    draw_head_shape(rng, index, 100, &B, &T, &H, &d);
    int D = H * d;
    case_describe("B = %d, T = %d, D = %d, H = %d, so d = %d", B, T, D, H, d);
    Tensor *x = case_keep(tensor_arange(SHAPE(B, T, D)));
    Tensor *split = case_keep(transpose_qkv(x, H));
    for (size_t i = 0; i < split->size; i++) {
        size_t from = (size_t)split->data[i];
        int b = (int)(from / ((size_t)T * D)), t = (int)(from / (size_t)D % (size_t)T);
        int c = (int)(from % (size_t)D);
        case_calling();
        size_t got = my_split_offset(b, t, c, T, D, H);
        case_called();
        char where[128];
        expect_that(got == i, got / (size_t)(T * d) == i / (size_t)(T * d) ? 3 : 2,
                    "x[%d, %d, %d] (head %d, feature %d) lands at offset %zu, which is %s; "
                    "your offset is %zu", b, t, c, c / d, c % d, i,
                    element_name(where, sizeof where, "out", i, T, d), got);
    }
}

const Exercise exercise = {"split_offset", "04_transpose_qkv", "4.1", 100, grade_case,
                           "transpose_qkv transpose_output_backward", NULL};
