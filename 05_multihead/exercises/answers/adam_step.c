/*
 * Exercise 5.5, worked answer: one Adam step.
 *
 * m and v are moving averages of the gradient and of its square. Both
 * start at 0, so after t steps they hold only (1 - beta^t) of what they
 * average: dividing by that (the bias correction) makes the first steps as
 * large as the later ones, about lr for each parameter whatever the scale
 * of its gradient.
 */
#include "exercises.h"

#include <math.h>

void my_adam_step(float *param, const float *grad, float *m, float *v, int n, int step,
                  float lr, float beta1, float beta2, float eps)
{
    const double correction1 = 1.0 - pow(beta1, step), correction2 = 1.0 - pow(beta2, step);
    for (int i = 0; i < n; i++) {
        // the moving averages
        m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
        // the step, each moment divided by its bias correction
        const double m_hat = m[i] / correction1, v_hat = v[i] / correction2;
        param[i] -= (float)(lr * m_hat / (sqrt(v_hat) + eps));
    }
}
