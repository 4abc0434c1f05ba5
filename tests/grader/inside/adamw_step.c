/* adamw_step.c - exercise 6.17's my_adamw_step in place of the
 * repository's adamw_update (common/learn/adamw.c): each parameter's step
 * inside adam_step, the decay on matrices only. */
#include "exercises.h"
#include "learn/adamw.h"

void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, long step,
                  float lr, float beta1, float beta2, float eps, float weight_decay)
{
    my_adamw_step(param, grad, m, v, (int)n, (int)step, lr, beta1, beta2, eps, weight_decay);
}
