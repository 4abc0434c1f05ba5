/*
 * Exercise 6.18, worked answer: warmup, then a cosine.
 *
 * Adam's first moments are poor estimates (a few gradients, corrected by
 * a large factor), so the first steps are kept small: the rate climbs in
 * a straight line, already lr / (warmup + 1) at step 0. Then it falls
 * along half a cosine, slowly at first and last, to min_lr at
 * decay_steps, where it stays.
 */
#include "exercises.h"

#include <math.h>

double my_lr_schedule(int step, double lr, double min_lr, int warmup, int decay_steps)
{
    if (step < warmup)
        return lr * (step + 1) / (warmup + 1);
    if (step >= decay_steps)
        return min_lr;
    const double progress = (double)(step - warmup) / (decay_steps - warmup);   // 0 to 1
    return min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * progress)) * (lr - min_lr);
}
