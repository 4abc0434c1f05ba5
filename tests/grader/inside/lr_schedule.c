/* lr_schedule.c - exercise 6.18's my_lr_schedule in place of the
 * repository's lm_learning_rate (common/learn/adamw.c): the learning rate
 * of every training step. */
#include "exercises.h"
#include "learn/adamw.h"

double lm_learning_rate(int step, double lr, double min_lr, int warmup, int decay_steps)
{
    return my_lr_schedule(step, lr, min_lr, warmup, decay_steps);
}
