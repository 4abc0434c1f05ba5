/* linear.c - grades exercise 5.1, nn.Linear's y = x W^T + b in PyTorch's
 * (out, in) layout, against linear (common/ops.c). */
#include "exercises.h"
#include "grader.h"
#include "ops.h"

static void grade_case(Rng *rng, int index)
{
    int rows = index == 0 ? 1 : draw_size(rng, index, 100, 1, 4);
    int in = index == 1 ? 1 : draw_size(rng, index, 100, 1, 6);
    int out = index == 2 ? 1 : draw_size(rng, index, 100, 1, 7);
    bool three_d = index % 2 == 1, bias = index % 4 < 2;
    int batch = three_d ? draw_int(rng, 1, 3) : 1;
    case_describe("x (%s%d, %d), W (%d, %d), bias %s", three_d ? "B, " : "", rows, in, out,
                  in, bias ? "(out,)" : "NULL");
    /* a (B, rows, in) or (rows, in) input */
    const Tensor *x = case_input("x", three_d ? draw_normal(rng, 1.0f, SHAPE(batch, rows, in))
                                              : draw_normal(rng, 1.0f, SHAPE(rows, in)));
    const Tensor *weight = case_input("weight", draw_normal(rng, 1.0f, SHAPE(out, in)));
    const Tensor *b = bias ? case_input("bias", draw_normal(rng, 1.0f, SHAPE(out))) : NULL;

    Tensor *expected = case_keep(linear(x, weight, b));
    case_calling();
    Tensor *got = case_keep(my_linear(x, weight, b));
    case_called();

    expect_tensor("y", got, expected->ndim, expected->shape, 1);
    expect_close("y", expected, got, 1e-5, 1e-5, 2);
}

const Exercise exercise = {"linear", "05_multihead", "5.1", 100, grade_case,
                           "linear linear_output matmul_bt matmul_bt_raw", NULL};
