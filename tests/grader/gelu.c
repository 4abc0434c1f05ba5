/* gelu.c - grades exercise 6.14, GELU in GPT-2's tanh form
 * (06_permutation_invariance/your_gpt.md), against gelu_forward
 * (common/learn/mlp.c), on inputs from -8 to 8 and beyond. */
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
        f->data[0] = 0.0f;   /* gelu(0) = 0 */
    case_input("f", f);
    float *expected = case_output("expected", (size_t)n);
    gelu_forward(f->data, expected, (size_t)n);
    float *got = case_output("g", (size_t)n);
    case_calling();
    my_gelu(f->data, got, n);
    case_called();

    Tensor *got_t = case_keep(tensor_from(got, SHAPE(n)));
    expect_finite("g", got_t, 1);
    for (int i = 0; i < n; i++) {
        double u = f->data[i], want = expected[i];
        double exact = 0.5 * u * (1.0 + erf(u / sqrt(2.0)));
        double no_cube = 0.5 * u * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * u));
        double half = 0.5 * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) *
                                        (u + 0.044715 * u * u * u)));
        struct { double value; int hint; const char *what; } slips[] = {
            {exact, 2, "the exact GELU, 0.5 f (1 + erf(f / sqrt 2)): GPT-2 uses the tanh form"},
            {no_cube, 3, "0.5 f (1 + tanh(c f)): the tanh's argument misses 0.044715 f^3"},
            {half, 1, "0.5 (1 + tanh(...)) alone, Phi(f): GELU is f times it"},
        };
        for (int k = 0; k < 3; k++) {
            bool differs = fabs(slips[k].value - want) > 1e-4 * (fabs(want) + 1e-2);
            bool equals = fabs(got[i] - slips[k].value) <= 1e-6 * (fabs(slips[k].value) + 1e-2);
            expect_that(!(differs && equals), slips[k].hint, "g[%d] = %.7g for f = %.7g is %s",
                        i, (double)got[i], u, slips[k].what);
        }
    }
    expect_close_floats("g", expected, got, SHAPE(n), 1e-6, 1e-5, 2);
}

const Exercise exercise = {"gelu", "06_permutation_invariance", "6.14", 100, grade_case,
                           "gelu_forward fast_gelu_forward", "your_gpt.md"};
