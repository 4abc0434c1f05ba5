/* adam_step.c - grades exercise 5.5, one Adam step (05_multihead/training.md),
 * against adam_step (common/learn/optim.c) from the same parameters,
 * gradients and moments, at steps from the first to the thousands. */
#include "exercises.h"
#include "grader.h"
#include "learn/optim.h"

#include <math.h>
#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int n = large_case(index, 120) ? draw_int(rng, 300, 900) : draw_size(rng, index, 120, 1, 8);
    /* the first steps, where the bias correction matters most, then later ones */
    int step = index < 40 ? 1 + index % 4 : draw_int(rng, 1, 3000);
    float lr = index % 5 == 0 ? 1e-3f : (float)draw_int(rng, 1, 100) * 1e-3f;
    float beta1 = index % 3 == 0 ? 0.9f : 0.5f + 0.01f * (float)draw_int(rng, 0, 45);
    float beta2 = index % 4 == 0 ? 0.999f : 0.9f + 0.001f * (float)draw_int(rng, 0, 99);
    float eps = index % 7 == 3 ? 1e-3f : 1e-8f;
    float scale = draw_scale(rng, index);
    case_describe("n = %d, step %d, lr %g, beta1 %g, beta2 %g, eps %g, gradients up to about %g",
                  n, step, (double)lr, (double)beta1, (double)beta2, (double)eps, (double)scale);
    Tensor *param = case_keep(draw_normal(rng, 1.0f, SHAPE(n)));
    Tensor *grad = draw_normal(rng, scale, SHAPE(n));
    if (index == 5)
        memset(grad->data, 0, (size_t)n * sizeof(float));   /* no gradient at all */
    case_input("grad", grad);
    Tensor *m = case_keep(tensor_zeros(SHAPE(n))), *v = case_keep(tensor_zeros(SHAPE(n)));
    if (step > 1)   /* moments of earlier steps: m of either sign, v >= 0 */
        for (int i = 0; i < n; i++) {
            float g = scale * rng_normal(rng);
            m->data[i] = g * (1.0f - powf(beta1, (float)(step - 1)));
            v->data[i] = g * g * (1.0f - powf(beta2, (float)(step - 1)));
        }
    case_input("param (before)", tensor_from(param->data, SHAPE(n)));
    case_input("m (before)", tensor_from(m->data, SHAPE(n)));
    case_input("v (before)", tensor_from(v->data, SHAPE(n)));

    /* the repository's step, from the same state */
    Tensor *want = case_keep(tensor_from(param->data, SHAPE(n)));
    Tensor *want_grad = case_keep(tensor_from(grad->data, SHAPE(n)));
    Parameter p = {"param", want, want_grad};
    Adam *adam = adam_new(&p, 1, lr);
    adam->beta1 = beta1;
    adam->beta2 = beta2;
    adam->eps = eps;
    adam->step = step - 1;
    memcpy(adam->m[0]->data, m->data, (size_t)n * sizeof(float));
    memcpy(adam->v[0]->data, v->data, (size_t)n * sizeof(float));
    adam_step(adam);
    Tensor *want_m = case_keep(tensor_from(adam->m[0]->data, SHAPE(n)));
    Tensor *want_v = case_keep(tensor_from(adam->v[0]->data, SHAPE(n)));
    adam_free(adam);
    /* the same step without the bias correction, to name that slip */
    bool uncorrected_differs = false;
    Tensor *uncorrected = case_keep(tensor_from(param->data, SHAPE(n)));
    for (int i = 0; i < n; i++) {
        float step_i = lr * want_m->data[i] / (sqrtf(want_v->data[i]) + eps);
        float corrected = param->data[i] - want->data[i];
        uncorrected->data[i] -= step_i;
        uncorrected_differs = uncorrected_differs ||
                              fabsf(step_i - corrected) > 1e-3f * fabsf(corrected) + 1e-7f;
    }

    float *got = case_output("param", (size_t)n), *got_m = case_output("m", (size_t)n);
    float *got_v = case_output("v", (size_t)n);
    memcpy(got, param->data, (size_t)n * sizeof(float));
    memcpy(got_m, m->data, (size_t)n * sizeof(float));
    memcpy(got_v, v->data, (size_t)n * sizeof(float));
    case_calling();
    my_adam_step(got, grad->data, got_m, got_v, n, step, lr, beta1, beta2, eps);
    case_called();

    expect_close_floats("m", want_m->data, got_m, SHAPE(n), 1e-7, 1e-5, 1);
    expect_close_floats("v", want_v->data, got_v, SHAPE(n), 1e-7, 1e-5, 1);
    bool matches_uncorrected = uncorrected_differs;
    for (int i = 0; i < n && matches_uncorrected; i++)
        matches_uncorrected = fabsf(got[i] - uncorrected->data[i]) <=
                              1e-6f + 1e-4f * fabsf(param->data[i] - uncorrected->data[i]);
    expect_that(!matches_uncorrected, 2,
                "param moved by lr m / (sqrt(v) + eps): the step without the bias correction. "
                "At step %d, m is (1 - beta1^t) = %.4g of the mean gradient and v (1 - beta2^t) "
                "= %.4g of its square: divide each by that", step,
                1.0 - pow(beta1, step), 1.0 - pow(beta2, step));
    /* within a thousandth of the step taken, or of lr */
    for (int i = 0; i < n; i++) {
        double moved = fabs((double)want->data[i] - param->data[i]);
        expect_that(fabs((double)got[i] - want->data[i]) <= 1e-6 + 1e-3 * (moved + 1e-3 * lr) +
                    1e-6 * fabs(want->data[i]), 3,
                    "param[%d] is %.8g after the step, must be %.8g (it was %.8g)", i,
                    (double)got[i], (double)want->data[i], (double)param->data[i]);
    }
}

const Exercise exercise = {"adam_step", "05_multihead", "5.5", 120, grade_case,
                           "adam_step adam_update", "training.md"};
