/* Bug: the warmup counts from 0, lr * step / warmup: step 0 gets a
 * learning rate of 0, a wasted step. */
#include "exercises.h"

#include <math.h>

double my_lr_schedule(int step, double lr, double min_lr, int warmup, int decay_steps)
{
    if (step < warmup)
        return lr * step / warmup;
    if (step >= decay_steps)
        return min_lr;
    const double progress = (double)(step - warmup) / (decay_steps - warmup);   // 0 to 1
    return min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * progress)) * (lr - min_lr);
}
