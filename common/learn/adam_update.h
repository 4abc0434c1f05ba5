/*
 * adam_update.h - one tensor's step of Adam, the piece adam_step (optim.h)
 * and AdamW's decay (adamw.h) are made of.
 */
#ifndef ADAM_UPDATE_H
#define ADAM_UPDATE_H

#include <stddef.h>

/* param, grad, m, v (n,), step t >= 1 -> param, m and v updated in place
 * by Adam's rule, as optim.h writes it out (no decay). */
void adam_update(float *param, const float *grad, float *m, float *v, size_t n, long step,
                 float lr, float beta1, float beta2, float eps);

#endif
