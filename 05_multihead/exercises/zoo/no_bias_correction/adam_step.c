/*
 * Bug zoo: one Adam step (exercise 5.5).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

void my_adam_step(float *param, const float *grad, float *m, float *v, int n, int step,
                  float lr, float beta1, float beta2, float eps)
{
    (void)step;
    for (int i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
        param[i] -= lr * m[i] / (sqrtf(v[i]) + eps);
    }
}
