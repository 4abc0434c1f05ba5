/*
 * Exercise 6.18: the learning-rate schedule
 * (06_permutation_invariance/your_gpt.md, "Exercises": three
 * hints there, each a step closer to the code).
 *
 * The learning rate at step = 0, 1, ..., nanoGPT's: a straight rise over
 * the first warmup steps, from lr / (warmup + 1) at step 0 toward lr; then
 * half a cosine from lr down to min_lr at decay_steps; min_lr after.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/lr_schedule.c
 */
#include "exercises.h"

double my_lr_schedule(int step, double lr, double min_lr, int warmup, int decay_steps)
{
    not_started();   /* delete this line when you begin */
    (void)step;
    (void)lr;
    (void)min_lr;
    (void)warmup;
    (void)decay_steps;
    return 0.0;
}
