/*
 * Exercise 5.5: one Adam step
 * (05_multihead/training.md, "Exercises").
 *
 * Step t = step (1 for the first) of torch.optim.Adam without weight
 * decay: from grad (n,), update the moments m, v (n,) and the parameters
 * param (n,), all in place. Do not change grad.
 *
 * Grade it:  make check EXERCISE=05_multihead/exercises/adam_step.c
 */
#include "exercises.h"

void my_adam_step(float *param, const float *grad, float *m, float *v, int n, int step,
                  float lr, float beta1, float beta2, float eps)
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
}
