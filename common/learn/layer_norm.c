/*
 * layer_norm.c - layer normalisation, forward and backward (introduced in
 * chapter 06's page "A language model"). See layer_norm.h.
 *
 * Legend: R = rows, D = num_hiddens.
 */
#include "learn/layer_norm.h"

#include <math.h>
#include <stddef.h>

/* x (R, D) -> y (R, D), mean (R,), rstd (R,) */
void layer_norm_forward(const float *x, const float *weight, const float *bias, float *y,
                        float *mean, float *rstd, int rows, int D)
{
    for (int r = 0; r < rows; r++) {
        const float *x_row = x + (size_t)r * D;
        float *y_row = y + (size_t)r * D;
        // pass 1: the mean
        float sum = 0.0f;
        for (int j = 0; j < D; j++)
            sum += x_row[j];
        const float m = sum / (float)D;
        // pass 2: the variance about it (two passes: no cancellation)
        float square_sum = 0.0f;
        for (int j = 0; j < D; j++) {
            const float centred = x_row[j] - m;
            square_sum += centred * centred;
        }
        const float s = 1.0f / sqrtf(square_sum / (float)D + LAYER_NORM_EPS);
        // pass 3: normalise, scale and shift
        for (int j = 0; j < D; j++)
            y_row[j] = (x_row[j] - m) * s * weight[j] + bias[j];
        mean[r] = m;
        rstd[r] = s;
    }
}

/* grad_y (R, D) -> grad_x (R, D) +=, grad_weight (D,) +=, grad_bias (D,) += */
void layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                         const float *mean, const float *rstd, float *grad_x,
                         float *grad_weight, float *grad_bias, int rows, int D)
{
    for (int r = 0; r < rows; r++) {
        const float *dy = grad_y + (size_t)r * D, *x_row = x + (size_t)r * D;
        float *dx = grad_x + (size_t)r * D;
        const float m = mean[r], s = rstd[r];
        // pass 3 backwards: the affine part, and the two means the
        // normalisation's gradient subtracts (g = dy * weight)
        float g_mean = 0.0f, g_xhat_mean = 0.0f;
        for (int j = 0; j < D; j++) {
            const float xhat = (x_row[j] - m) * s;
            const float g = dy[j] * weight[j];
            g_mean += g;
            g_xhat_mean += g * xhat;
            grad_weight[j] += dy[j] * xhat;
            grad_bias[j] += dy[j];
        }
        g_mean /= (float)D;
        g_xhat_mean /= (float)D;
        // passes 2 and 1 backwards: through the variance and the mean
        for (int j = 0; j < D; j++) {
            const float xhat = (x_row[j] - m) * s;
            dx[j] += s * (dy[j] * weight[j] - g_mean - xhat * g_xhat_mean);
        }
    }
}
