/*
 * adam_update.c - one tensor's step of Adam (introduced in chapter 05's
 * section "Attention that learns"). See adam_update.h.
 *
 * A file of its own, below both adam_step (optim.c) and AdamW's decay
 * (adamw.c), which call it by its name: so it can be the learner's
 * (exercise 5.5, make 06_permutation_invariance EXERCISE=...), and neither
 * of its callers needs the other's file.
 */
#include "learn/adam_update.h"

#include <math.h>

/* param, grad, m, v (n,): one step of Adam, in place */
void adam_update(float *param, const float *grad, float *m, float *v, size_t n, long step,
                 float lr, float beta1, float beta2, float eps)
{
    /* the bias corrections depend on the step only: scalars, in double as
     * Python computes 1 - beta1 ** step */
    const double t = (double)step;
    const double bias_correction1 = 1.0 - pow((double)beta1, t);
    const double bias_correction2 = 1.0 - pow((double)beta2, t);
    const float step_size = (float)((double)lr / bias_correction1);
    const float bias_correction2_sqrt = (float)sqrt(bias_correction2);
    const float one_minus_beta1 = (float)(1.0 - (double)beta1);
    const float one_minus_beta2 = (float)(1.0 - (double)beta2);
    for (size_t j = 0; j < n; j++) {
        // the moving averages of the gradient and of its square
        m[j] = m[j] * beta1 + one_minus_beta1 * grad[j];
        v[j] = v[j] * beta2 + one_minus_beta2 * (grad[j] * grad[j]);
        // the step, each moment divided by its bias correction
        const float denom = sqrtf(v[j]) / bias_correction2_sqrt + eps;
        param[j] = param[j] - step_size * (m[j] / denom);
    }
}
