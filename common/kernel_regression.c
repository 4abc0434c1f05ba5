/*
 * kernel_regression.c - Nadaraya-Watson kernel regression as attention
 * pooling (introduced in chapter 03's page additive.md). See
 * kernel_regression.h.
 *
 * Legend: n = training examples, m = queries.
 */
#include "kernel_regression.h"

#include <math.h>

#include "softmax.h"

/* x_train (n,), y_train (n,), x_query (m,) -> y_hat (m,), weights (m, n) */
Tensor *nadaraya_watson(const Tensor *x_train, const Tensor *y_train, const Tensor *x_query,
                        float sigma, Tensor **weights)
{
    tensor_check_shape("x_train", x_train, SHAPE(-1));
    const int n = x_train->shape[0];
    tensor_check_shape("y_train", y_train, SHAPE(n));
    tensor_check_shape("x_query", x_query, SHAPE(-1));
    const int m = x_query->shape[0];
    if (!(sigma > 0.0f) || !isfinite(sigma))
        die("sigma must be a finite number above 0, got %g", (double)sigma);

    Tensor *w = tensor_zeros(SHAPE(m, n));
    Tensor *y_hat = tensor_zeros(SHAPE(m));
    const double two_sigma_sq = 2.0 * (double)sigma * (double)sigma;
    for (int i = 0; i < m; i++) {
        float *row = w->data + (size_t)i * n;
        // pass 1: scores, minus the squared distance over 2 sigma^2
        for (int j = 0; j < n; j++) {
            const double dist = (double)x_query->data[i] - x_train->data[j];
            row[j] = (float)(-dist * dist / two_sigma_sq);
        }
        // pass 2: weights; the stable softmax subtracts the largest score,
        // so a narrow kernel far from every key still has a weight of 1
        // somewhere instead of 0 / 0
        softmax_row(row, n);
        // pass 3: weighted sum of the values y_j
        double sum = 0.0;
        for (int j = 0; j < n; j++)
            sum += (double)row[j] * y_train->data[j];
        y_hat->data[i] = (float)sum;
    }
    if (weights != NULL)
        *weights = w;
    else
        tensor_free(w);
    return y_hat;
}
