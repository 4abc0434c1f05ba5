/* linear_backward.c - grades exercise 5.9, a linear layer's backward
 * (05_multihead/backward.md), against linear_backward (common/ops.c),
 * which adds into the weight's and bias's gradients: the grader hands it
 * zeros. One row, many rows, and layers hundreds wide. */
#include "exercises.h"
#include "grader.h"
#include "ops.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int rows = index < 2 ? 1 : draw_size(rng, index, 100, 2, 6);
    bool wide = large_case(index, 100);
    int in = wide ? draw_int(rng, 200, 500) : draw_size(rng, index, 100, 1, 5);
    int out = wide ? draw_int(rng, 100, 300) : draw_size(rng, index, 100, 1, 5);
    case_describe("R = %d rows, in = %d, out = %d", rows, in, out);
    const Tensor *x = case_input("x", draw_normal(rng, 1.0f, SHAPE(rows, in)));
    const Tensor *weight = case_input("weight", draw_normal(rng, 1.0f, SHAPE(out, in)));
    const Tensor *grad_y = case_input("grad_y", draw_normal(rng, 1.0f, SHAPE(rows, out)));
    Tensor *want_w = case_keep(tensor_zeros(SHAPE(out, in)));
    Tensor *want_b = case_keep(tensor_zeros(SHAPE(out)));
    Tensor *want_x = case_keep(linear_backward(x, weight, grad_y, want_w, want_b));

    float *grad_x = case_output("grad_x", (size_t)rows * in);
    float *grad_weight = case_output("grad_weight", (size_t)out * in);
    float *grad_bias = case_output("grad_bias", (size_t)out);
    case_calling();
    my_linear_backward(x->data, weight->data, grad_y->data, grad_x, grad_weight, grad_bias, rows,
                       in, out);
    case_called();

    /* grad_bias as one row of grad_y: the bias used by every row, counted once */
    for (int r = 0; r < rows && rows > 1; r++) {
        bool one_row = true;
        for (int o = 0; o < out; o++)
            one_row = one_row &&
                      fabs(grad_bias[o] - grad_y->data[(size_t)r * out + o]) <=
                          1e-6 * (fabs(grad_bias[o]) + 1.0);
        expect_that(!one_row, 2,
                    "grad_bias is row %d of grad_y: every one of the %d rows used the bias, "
                    "so its gradient is the sum of grad_y's rows", r, rows);
    }
    expect_close_floats("grad_bias", want_b->data, grad_bias, SHAPE(out), 1e-5, 1e-5, 2);
    /* in or R terms in each sum: 1e-4 */
    expect_close_floats("grad_x", want_x->data, grad_x, SHAPE(rows, in), 1e-4, 1e-4, 3);
    expect_close_floats("grad_weight", want_w->data, grad_weight, SHAPE(out, in), 1e-4, 1e-4, 2);
}

const Exercise exercise = {"linear_backward", "05_multihead", "5.9", 100, grade_case,
                           "linear_backward", "backward.md"};
