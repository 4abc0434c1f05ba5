/* Bug: Adam's step first, then the decay: AdamW decays the parameter as
 * it was before the step. */
#include "exercises.h"
#include "learn/optim.h"

void my_adamw_step(float *param, const float *grad, float *m, float *v, int n, int step,
                   float lr, float beta1, float beta2, float eps, float weight_decay)
{
    adam_update(param, grad, m, v, (size_t)n, step, lr, beta1, beta2, eps);
    // Adam's step taken, then the decay
    const float decay = 1.0f - lr * weight_decay;
    for (int i = 0; i < n; i++)
        param[i] *= decay;
}
