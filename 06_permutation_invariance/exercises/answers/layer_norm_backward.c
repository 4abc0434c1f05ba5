/*
 * Exercise 6.8, worked answer: layer normalisation, backwards.
 *
 * With g = grad_y * weight, the gradient of xhat, each x_j reaches the loss
 * three ways: through xhat_j itself, through the row's mean and through its
 * variance. The last two subtract the two means below: a row shifted or
 * scaled as a whole normalises to the same xhat, so grad_x has no part
 * along those directions (each row of it sums to 0).
 */
#include "exercises.h"

#include <string.h>

void my_layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                            const float *mean, const float *rstd, float *grad_x,
                            float *grad_weight, float *grad_bias, int rows, int D)
{
    memset(grad_weight, 0, (size_t)D * sizeof *grad_weight);
    memset(grad_bias, 0, (size_t)D * sizeof *grad_bias);
    for (int r = 0; r < rows; r++) {
        const float *dy = grad_y + (size_t)r * D, *x_row = x + (size_t)r * D;
        float *dx = grad_x + (size_t)r * D;
        // the affine part, and the two means of g and g * xhat
        float g_mean = 0.0f, g_xhat_mean = 0.0f;
        for (int j = 0; j < D; j++) {
            const float xhat = (x_row[j] - mean[r]) * rstd[r];
            const float g = dy[j] * weight[j];
            g_mean += g;
            g_xhat_mean += g * xhat;
            grad_weight[j] += dy[j] * xhat;
            grad_bias[j] += dy[j];
        }
        g_mean /= (float)D;
        g_xhat_mean /= (float)D;
        // through xhat_j, the mean and the variance
        for (int j = 0; j < D; j++) {
            const float xhat = (x_row[j] - mean[r]) * rstd[r];
            dx[j] = rstd[r] * (dy[j] * weight[j] - g_mean - xhat * g_xhat_mean);
        }
    }
}
