/* adam_step.c - exercise 5.5's my_adam_step in place of the repository's
 * adam_update (common/learn/optim.c): each parameter's step inside
 * adam_step (through adamw_update, common/learn/adamw.c). */
#include "exercises.h"
#include "learn/optim.h"

void adam_update(float *param, const float *grad, float *m, float *v, size_t n, long step,
                 float lr, float beta1, float beta2, float eps)
{
    my_adam_step(param, grad, m, v, (int)n, (int)step, lr, beta1, beta2, eps);
}
