/*
 * kernel_regression.h - Nadaraya-Watson kernel regression as attention
 * pooling (introduced in chapter 03's page additive.md), d2l's
 * nadaraya_watson with a Gaussian kernel of width sigma.
 *
 * Legend: n = training examples (the keys x_i and values y_i), m = queries.
 *
 *   scores[i, j]  = -(x_query[i] - x_train[j])^2 / (2 sigma^2)    (m, n)
 *   weights[i, :] = softmax(scores[i, :])                         (m, n)
 *   y_hat[i]      = sum_j weights[i, j] y_train[j]                (m,)
 *
 * The softmax of these scores is the kernel normalised,
 * exp(-(x - x_j)^2 / 2 sigma^2) / sum_l exp(-(x - x_l)^2 / 2 sigma^2):
 * nothing is learned, the query attends to the keys near it.
 */
#ifndef KERNEL_REGRESSION_H
#define KERNEL_REGRESSION_H

#include "tensor.h"

/* x_train (n,), y_train (n,), x_query (m,), sigma > 0 -> y_hat (m,), new.
 * When weights is not NULL it receives the weights (m, n), new; rows sum
 * to 1. Shapes that do not fit stop with a message naming the tensor. */
Tensor *nadaraya_watson(const Tensor *x_train, const Tensor *y_train, const Tensor *x_query,
                        float sigma, Tensor **weights);

#endif
