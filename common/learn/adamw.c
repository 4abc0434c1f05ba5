/*
 * adamw.c - AdamW's decoupled weight decay on top of Adam's step, and the
 * learning-rate schedule a GPT trains with (introduced in chapter 06's
 * page "A language model"; Adam itself in chapter 05's section "Attention
 * that learns"). See adamw.h.
 *
 * Kept apart from optim.c so that adam_step reaches both pieces through
 * their names: each can be the learner's (make 06_permutation_invariance
 * EXERCISE=...).
 */
#include "learn/adamw.h"

#include <math.h>

#include "learn/adam_update.h"

static const double PI = 3.14159265358979323846;

/* param, grad, m, v (n,): decay, then Adam's step */
void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, long step,
                  float lr, float beta1, float beta2, float eps, float weight_decay)
{
    // the decay shrinks the parameter toward 0 by itself, outside the moments
    if (weight_decay != 0.0f) {
        const float decay = (float)(1.0 - (double)lr * (double)weight_decay);
        for (size_t j = 0; j < n; j++)
            param[j] *= decay;
    }
    adam_update(param, grad, m, v, n, step, lr, beta1, beta2, eps);
}

double lm_learning_rate(int step, double lr, double min_lr, int warmup, int decay_steps)
{
    if (step < warmup)
        return lr * (double)(step + 1) / (double)(warmup + 1);
    if (step >= decay_steps)
        return min_lr;
    const double progress = (double)(step - warmup) / (double)(decay_steps - warmup);
    return min_lr + 0.5 * (1.0 + cos(PI * progress)) * (lr - min_lr);
}
