/*
 * loss.h - cross-entropy over logits (introduced in chapter 05's optional
 * section "Attention that learns").
 *
 * Legend: N = number of predictions (batch_size times answers per
 * example), C = number of classes.
 *
 * For one row of logits z (C,) and the right class y:
 *     loss = -log softmax(z)[y] = logsumexp(z) - z[y]
 *     logsumexp(z) = m + log(sum_j exp(z_j - m)),  m = max_j z_j
 * Subtracting m keeps every exponential in (0, 1], so large logits cannot
 * overflow (chapter 02's stable softmax, once more). The loss of a batch is
 * the mean over its N rows, nn.CrossEntropyLoss's default reduction.
 *
 * The gradient of the mean loss is (softmax(z) - onehot(y)) / N for each
 * row: the predicted probabilities minus the truth, shared over the batch.
 */
#ifndef LOSS_H
#define LOSS_H

#include "tensor.h"

/* One row: logits (C,) -> logsumexp, computed stably (in double). */
double logsumexp_row(const float *logits, int num_classes);

/* logits (N, C), targets (N,) with ids in [0, C) -> the mean cross-entropy,
 * as nn.functional.cross_entropy(logits, targets) gives (computed in double).
 * logits may have more dimensions: every dimension but the last is N. */
double cross_entropy(const Tensor *logits, const int *targets);

/* Backward: logits (N, C), targets (N,) -> grad_logits (N, C) (new) =
 * grad_loss * (softmax(logits) - onehot(targets)) / N, shaped like logits.
 * grad_loss is dL/d(loss), 1 when the loss is what is minimised. */
Tensor *cross_entropy_backward(const Tensor *logits, const int *targets, float grad_loss);
/* The same on raw rows, into grad (N, C) that the caller holds (every
 * element written): for memory laid out once. Returns the mean
 * cross-entropy as cross_entropy gives it (the same bits), from the same
 * log-sum-exp of each row. targets must be in [0, C): they are not checked. */
double cross_entropy_backward_rows(const float *logits, const int *targets, int N, int C,
                                   float grad_loss, float *grad);

/* A training step's loss and its gradient at once: the mean cross-entropy
 * (returned), *correct (when not NULL) as count_correct gives it, and
 * *grad_logits (new) as cross_entropy_backward gives it for grad_loss 1. */
double cross_entropy_with_grad(const Tensor *logits, const int *targets, int *correct,
                               Tensor **grad_logits);

/* How many of the N rows have their largest logit at the target (the
 * first largest on a tie, like argmax). */
int count_correct(const Tensor *logits, const int *targets);

#endif
