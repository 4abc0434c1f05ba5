/*
 * Exercise 6.17, worked answer: AdamW.
 *
 * Weight decay as a term wd * p added to the gradient would pass through
 * Adam's division by sqrt(v): a weight with large gradients would hardly
 * decay. AdamW keeps it out: the parameter shrinks by itself, by the same
 * factor for every weight, and then Adam's step is taken as if there were
 * no decay (here the repository's adam_update; exercise 5.5 writes it).
 */
#include "exercises.h"
#include "learn/optim.h"

void my_adamw_step(float *param, const float *grad, float *m, float *v, int n, int step,
                   float lr, float beta1, float beta2, float eps, float weight_decay)
{
    // the decay first, on the parameter as it was
    const float decay = 1.0f - lr * weight_decay;
    for (int i = 0; i < n; i++)
        param[i] *= decay;
    // then Adam's step, its moments untouched by the decay
    adam_update(param, grad, m, v, (size_t)n, step, lr, beta1, beta2, eps);
}
