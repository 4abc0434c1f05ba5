/* gelu_backward.c - grades exercise 5.7, GELU's backward (tanh form), against
 * gelu_backward (common/learn/mlp.c), on inputs from -8 to 8 and beyond. */
#include "exercises.h"
#include "grader.h"
#include "learn/mlp.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int n = index == 0 ? 1 : large_case(index, 100) ? draw_int(rng, 300, 900)
                                                     : draw_size(rng, index, 100, 1, 10);
    float scale = index % 4 == 3 ? 30.0f : 3.0f;
    case_describe("n = %d, inputs f up to about %g", n, (double)scale);
    Tensor *f = draw_normal(rng, scale, SHAPE(n));
    if (index == 1)
        f->data[0] = 0.0f;   /* gelu'(0) = 1/2 */
    case_input("f", f);
    const Tensor *grad_g = case_input("grad_g", draw_normal(rng, 1.0f, SHAPE(n)));
    float *expected = case_output("expected", (size_t)n);
    gelu_backward(f->data, grad_g->data, expected, (size_t)n);
    float *got = case_output("grad_f", (size_t)n);
    case_calling();
    my_gelu_backward(f->data, grad_g->data, got, n);
    case_called();

    Tensor *got_t = case_keep(tensor_from(got, SHAPE(n)));
    expect_finite("grad_f", got_t, 1);
    /* the slope without the tanh' term: 0.5 (1 + t) */
    const double c = sqrt(2.0 / 3.14159265358979323846);
    for (int i = 0; i < n; i++) {
        double u = f->data[i], t = tanh(c * (u + 0.044715 * u * u * u));
        double without = grad_g->data[i] * 0.5 * (1.0 + t);
        double want = expected[i];
        bool slip = fabs(want - without) > 1e-3 * (fabs(want) + 1e-3) &&
                    fabs(got[i] - without) <= 1e-5 * (fabs(without) + 1e-3);
        expect_that(!slip, 3,
                    "grad_f[%d] is grad_g * 0.5 (1 + t), t = tanh(c (f + 0.044715 f^3)): the "
                    "slope misses the tanh' term, 0.5 f (1 - t^2) c (1 + 3 * 0.044715 f^2)", i);
    }
    expect_close_floats("grad_f", expected, got, SHAPE(n), 1e-6, 1e-4, 2);
}

const Exercise exercise = {"gelu_backward", "05_multihead", "5.7", 100, grade_case,
                           "gelu_backward fast_gelu_backward", "backward.md"};
