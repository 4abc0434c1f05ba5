/* adamw_step.c - grades exercise 6.17, AdamW's decoupled weight decay on
 * top of Adam's step (06_permutation_invariance/your_gpt.md), against
 * adamw_update (common/learn/adamw.c) from the same parameters, gradients
 * and moments; decays from 0 to far above nanoGPT's 0.1, so that where the
 * decay goes shows. */
#include "exercises.h"
#include "grader.h"
#include "learn/adamw.h"
#include "learn/optim.h"

#include <math.h>
#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int n = large_case(index, 100) ? draw_int(rng, 300, 900) : draw_size(rng, index, 100, 1, 8);
    int step = index < 30 ? 1 + index % 3 : draw_int(rng, 1, 3000);
    float lr = index % 5 == 0 ? 1e-3f : (float)draw_int(rng, 1, 100) * 1e-3f;
    float beta1 = index % 3 == 0 ? 0.9f : 0.5f + 0.01f * (float)draw_int(rng, 0, 45);
    float beta2 = index % 4 == 0 ? 0.99f : 0.9f + 0.001f * (float)draw_int(rng, 0, 99);
    float eps = 1e-8f;
    float weight_decay = index % 10 == 1 ? 0.0f : index % 3 == 1 ? 0.1f
                                                : (float)draw_int(rng, 1, 40) * 0.05f;
    case_describe("n = %d, step %d, lr %g, beta1 %g, beta2 %g, weight_decay %g", n, step,
                  (double)lr, (double)beta1, (double)beta2, (double)weight_decay);
    Tensor *param = case_keep(draw_normal(rng, 1.0f, SHAPE(n)));
    const Tensor *grad = case_input("grad", draw_normal(rng, 1.0f, SHAPE(n)));
    Tensor *m = case_keep(tensor_zeros(SHAPE(n))), *v = case_keep(tensor_zeros(SHAPE(n)));
    if (step > 1)
        for (int i = 0; i < n; i++) {
            float g = rng_normal(rng);
            m->data[i] = g * (1.0f - powf(beta1, (float)(step - 1)));
            v->data[i] = g * g * (1.0f - powf(beta2, (float)(step - 1)));
        }
    case_input("param (before)", tensor_copy(param));
    case_input("m (before)", tensor_copy(m));
    case_input("v (before)", tensor_copy(v));

    Tensor *want = case_keep(tensor_copy(param));
    Tensor *want_m = case_keep(tensor_copy(m)), *want_v = case_keep(tensor_copy(v));
    adamw_update(want->data, grad->data, want_m->data, want_v->data, (size_t)n, step, lr, beta1,
                 beta2, eps, weight_decay);
    /* the two slips: the decay after Adam's step; Adam's step alone */
    Tensor *after = case_keep(tensor_copy(param)), *plain = case_keep(tensor_copy(param));
    Tensor *scratch_m = case_keep(tensor_copy(m)), *scratch_v = case_keep(tensor_copy(v));
    adam_update(plain->data, grad->data, scratch_m->data, scratch_v->data, (size_t)n, step, lr,
                beta1, beta2, eps);
    for (int i = 0; i < n; i++)
        after->data[i] = plain->data[i] * (1.0f - lr * weight_decay);

    float *got = case_output("param", (size_t)n), *got_m = case_output("m", (size_t)n);
    float *got_v = case_output("v", (size_t)n);
    memcpy(got, param->data, (size_t)n * sizeof(float));
    memcpy(got_m, m->data, (size_t)n * sizeof(float));
    memcpy(got_v, v->data, (size_t)n * sizeof(float));
    case_calling();
    my_adamw_step(got, grad->data, got_m, got_v, n, step, lr, beta1, beta2, eps, weight_decay);
    case_called();

    expect_close_floats("m", want_m->data, got_m, SHAPE(n), 1e-6, 1e-5, 2);
    expect_close_floats("v", want_v->data, got_v, SHAPE(n), 1e-6, 1e-5, 2);
    /* a slip is named when the answer is it and it is not the right one */
    bool is_plain = true, is_after = true, plain_differs = false, after_differs = false;
    for (int i = 0; i < n; i++) {
        double tolerance = 1e-6 + 1e-5 * fabs(want->data[i]);
        is_plain = is_plain && fabs(got[i] - plain->data[i]) <= tolerance;
        is_after = is_after && fabs(got[i] - after->data[i]) <= tolerance;
        plain_differs = plain_differs || fabs(want->data[i] - plain->data[i]) > 10 * tolerance;
        after_differs = after_differs || fabs(want->data[i] - after->data[i]) > 10 * tolerance;
    }
    is_plain = is_plain && plain_differs;
    is_after = is_after && after_differs;
    expect_that(!is_plain, 1, "param took Adam's step without the decay: first multiply it by "
                "1 - lr * weight_decay = %.6g", 1.0 - (double)lr * weight_decay);
    expect_that(!is_after, 3, "param decayed after Adam's step: AdamW shrinks the parameter as "
                "it was, then takes the step (torch.optim.AdamW's order)");
    for (int i = 0; i < n; i++)
        expect_that(fabs((double)got[i] - want->data[i]) <=
                        1e-6 + 1e-5 * fabs(want->data[i]), 2,
                    "param[%d] is %.8g after the step, must be %.8g (it was %.8g)", i,
                    (double)got[i], (double)want->data[i], (double)param->data[i]);
}

const Exercise exercise = {"adamw_step", "06_permutation_invariance", "6.17", 100, grade_case,
                           "adamw_update adam_step", "your_gpt.md"};
