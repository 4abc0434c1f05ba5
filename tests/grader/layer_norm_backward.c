/* layer_norm_backward.c - grades exercise 6.8, layer normalisation's
 * backward (06_permutation_invariance/language_model.md), against
 * layer_norm_backward (common/learn/layer_norm.c), which adds into its
 * outputs: the grader hands it zeros. Rows of one number, rows far from 0,
 * rows hundreds long. */
#include "exercises.h"
#include "grader.h"
#include "learn/layer_norm.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int rows = index < 2 ? 1 : draw_size(rng, index, 100, 1, 4);
    int D = index == 0 ? 1 : large_case(index, 100) ? draw_int(rng, 300, 900)
                                                     : draw_size(rng, index, 100, 2, 10);
    float offset = index % 4 == 3 ? 50.0f : 0.0f;
    float spread = index % 5 == 4 ? 20.0f : 1.0f;
    case_describe("R = %d rows of D = %d, x %g +- %g", rows, D, (double)offset, (double)spread);
    size_t n = (size_t)rows * D;
    Tensor *x = draw_normal(rng, spread, SHAPE(rows, D));
    for (size_t i = 0; i < n; i++)
        x->data[i] += offset;
    case_input("x", x);
    const Tensor *weight = case_input("weight", draw_normal(rng, 1.0f, SHAPE(D)));
    const Tensor *grad_y = case_input("grad_y", draw_normal(rng, 1.0f, SHAPE(rows, D)));
    Tensor *bias = case_keep(tensor_zeros(SHAPE(D)));
    Tensor *y = case_keep(tensor_zeros(SHAPE(rows, D)));
    Tensor *mean = tensor_zeros(SHAPE(rows)), *rstd = tensor_zeros(SHAPE(rows));
    layer_norm_forward(x->data, weight->data, bias->data, y->data, mean->data, rstd->data,
                       rows, D);
    case_input("mean", mean);
    case_input("rstd", rstd);
    Tensor *want_x = case_keep(tensor_zeros(SHAPE(rows, D)));
    Tensor *want_w = case_keep(tensor_zeros(SHAPE(D)));
    Tensor *want_b = case_keep(tensor_zeros(SHAPE(D)));
    layer_norm_backward(grad_y->data, x->data, weight->data, mean->data, rstd->data,
                        want_x->data, want_w->data, want_b->data, rows, D);

    float *grad_x = case_output("grad_x", n), *grad_weight = case_output("grad_weight", (size_t)D);
    float *grad_bias = case_output("grad_bias", (size_t)D);
    case_calling();
    my_layer_norm_backward(grad_y->data, x->data, weight->data, mean->data, rstd->data, grad_x,
                           grad_weight, grad_bias, rows, D);
    case_called();

    expect_close_floats("grad_bias", want_b->data, grad_bias, SHAPE(D), 1e-5, 1e-4, 3);
    expect_close_floats("grad_weight", want_w->data, grad_weight, SHAPE(D), 1e-4, 1e-3, 3);
    for (int r = 0; r < rows; r++) {
        const float *dy = grad_y->data + (size_t)r * D, *got = grad_x + (size_t)r * D;
        const float *want = want_x->data + (size_t)r * D;
        /* the two means missing: rstd * g alone */
        bool alone = true, differs = false;
        double sum = 0.0, scale = 0.0;
        for (int j = 0; j < D; j++) {
            double plain = (double)rstd->data[r] * dy[j] * weight->data[j];
            alone = alone && fabs(got[j] - plain) <= 1e-4 * (fabs(plain) + 1e-3);
            differs = differs || fabs(want[j] - plain) > 1e-3 * (fabs(plain) + 1e-3);
            sum += got[j];
            scale += fabs(got[j]);
        }
        expect_that(!(alone && differs), 2,
                    "row %d of grad_x is rstd * grad_y * weight: the mean and the variance "
                    "depend on x too, and their two terms, mean(g) and xhat * mean(g * xhat) "
                    "with g = grad_y * weight, are missing", r);
        expect_that(isfinite(sum) && fabs(sum) <= 1e-3 * scale + 1e-5 * D, 1,
                    "row %d of grad_x sums to %g, not 0: a row shifted as a whole normalises "
                    "to the same xhat, so its gradient has no part along (1, 1, ..., 1)", r,
                    sum);
    }
    expect_close_floats("grad_x", want_x->data, grad_x, SHAPE(rows, D), 1e-4, 1e-3, 3);
}

const Exercise exercise = {"layer_norm_backward", "06_permutation_invariance", "6.8", 100,
                           grade_case, "layer_norm_backward", "language_model.md"};
