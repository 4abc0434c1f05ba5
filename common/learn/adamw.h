/*
 * adamw.h - AdamW's decoupled weight decay on top of Adam's step, and the
 * learning-rate schedule a GPT trains with (introduced in chapter 06's
 * page "A language model"; Adam itself, optim.h, in chapter 05's section
 * "Attention that learns").
 *
 * Legend: n = the numbers of one tensor.
 *
 * Weight decay pulls every weight toward 0. Adam with an L2 term in the
 * loss would divide that pull by the gradient's running scale (a weight
 * with large gradients would hardly decay); AdamW (Loshchilov and Hutter,
 * 2019) shrinks the parameter by itself, outside the moments, so that
 * every weight decays at the same rate:
 *
 *     param *= 1 - lr * weight_decay,   then Adam's step (optim.h)
 *
 * The learning rate rises linearly from near 0 while the moments are still
 * poor estimates (warmup), then falls along half a cosine to min_lr, as
 * nanoGPT schedules it.
 */
#ifndef ADAMW_H
#define ADAMW_H

#include <stddef.h>

/* param, grad, m, v (n,), step t >= 1 -> param *= 1 - lr * weight_decay
 * (skipped when weight_decay is 0), then adam_update (adam_update.h): param, m
 * and v updated in place. */
void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, long step,
                  float lr, float beta1, float beta2, float eps, float weight_decay);

/* AdamW's learning rate at step s (0, 1, ...), nanoGPT's schedule:
 *     s < warmup:                 lr (s + 1) / (warmup + 1)     the warmup
 *     warmup <= s < decay_steps:  min_lr + (lr - min_lr) (1 + cos(pi p)) / 2,
 *                                 p = (s - warmup) / (decay_steps - warmup)
 *     s >= decay_steps:           min_lr */
double lm_learning_rate(int step, double lr, double min_lr, int warmup, int decay_steps);

#endif
