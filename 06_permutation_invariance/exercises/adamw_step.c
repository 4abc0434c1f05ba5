/*
 * Exercise 6.17: AdamW
 * (06_permutation_invariance/your_gpt.md, "Exercises": three
 * hints there, each a step closer to the code).
 *
 * param, grad, m, v (n,), step t = 1, 2, ... -> param, m and v updated in
 * place as torch.optim.AdamW does: the parameter multiplied by
 * 1 - lr * weight_decay, then Adam's step (exercise 5.5; the repository's
 * is adam_update in learn/optim.h, which you may call).
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/adamw_step.c
 */
#include "exercises.h"

void my_adamw_step(float *param, const float *grad, float *m, float *v, int n, int step,
                   float lr, float beta1, float beta2, float eps, float weight_decay)
{
    not_started();   /* delete this line when you begin */
    (void)param;
    (void)grad;
    (void)m;
    (void)v;
    (void)n;
    (void)step;
    (void)lr;
    (void)beta1;
    (void)beta2;
    (void)eps;
    (void)weight_decay;
}
