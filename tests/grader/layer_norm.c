/* layer_norm.c - grades exercise 5.6, layer normalisation's forward
 * (05_multihead/backward.md), against layer_norm_forward
 * (common/learn/layer_norm.c): rows of one number (variance 0), rows far
 * from 0, and rows hundreds long. */
#include "exercises.h"
#include "grader.h"
#include "learn/layer_norm.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int rows = index < 2 ? 1 : draw_size(rng, index, 100, 1, 4);
    int D = index == 0 ? 1 : large_case(index, 100) ? draw_int(rng, 300, 900)
                                                     : draw_size(rng, index, 100, 2, 10);
    float offset = index % 4 == 3 ? 100.0f : 0.0f;
    float spread = index % 5 == 2 ? 1e-3f : index % 5 == 4 ? 30.0f : 1.0f;
    case_describe("R = %d rows of D = %d, values %g +- %g", rows, D, (double)offset, (double)spread);
    Tensor *x = draw_normal(rng, spread, SHAPE(rows, D));
    for (size_t i = 0; i < x->size; i++)
        x->data[i] += offset;
    case_input("x", x);
    const Tensor *weight = case_input("weight", draw_normal(rng, 1.0f, SHAPE(D)));
    const Tensor *bias = case_input("bias", draw_normal(rng, 1.0f, SHAPE(D)));
    size_t n = (size_t)rows * D;
    float *want = case_output("expected y", n), *want_mean = case_output("expected mean", (size_t)rows);
    float *want_rstd = case_output("expected rstd", (size_t)rows);
    layer_norm_forward(x->data, weight->data, bias->data, want, want_mean, want_rstd, rows, D);

    float *y = case_output("y", n), *mean = case_output("mean", (size_t)rows);
    float *rstd = case_output("rstd", (size_t)rows);
    case_calling();
    my_layer_norm(x->data, weight->data, bias->data, y, mean, rstd, rows, D);
    case_called();

    expect_close_floats("mean", want_mean, mean, SHAPE(rows), 1e-5, 1e-5, 1);
    for (int r = 0; r < rows && D == 1; r++)
        expect_that(isfinite(rstd[r]), 2, "rstd[%d] is %g for a row of one number: its "
                    "variance is 0, divided by D = 1 (divided by D - 1 = 0 it is NaN), so rstd "
                    "is 1 / sqrt(eps)", r, (double)rstd[r]);
    /* the variance divided by D - 1, as a sample variance is */
    for (int r = 0; r < rows && D > 1; r++) {
        double var = 1.0 / ((double)want_rstd[r] * want_rstd[r]) - LAYER_NORM_EPS;
        double sample = var * D / (D - 1);
        double slip = 1.0 / sqrt(sample + LAYER_NORM_EPS);
        expect_that(!(fabs(rstd[r] - slip) <= 1e-4 * slip && fabs(slip - want_rstd[r]) > 1e-3 * slip),
                    2, "rstd[%d] is %.6g, 1 / sqrt(var + eps) with the variance divided by D - 1 "
                    "= %d: layer normalisation divides by D (must be %.6g)", r, (double)rstd[r],
                    D - 1, (double)want_rstd[r]);
    }
    expect_close_floats("rstd", want_rstd, rstd, SHAPE(rows), 1e-5, 1e-3, 2);
    expect_close_floats("y", want, y, SHAPE(rows, D), 1e-4, 1e-3, 3);
}

const Exercise exercise = {"layer_norm", "05_multihead", "5.6", 100, grade_case,
                           "layer_norm_forward", "backward.md"};
