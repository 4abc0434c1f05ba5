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

/* ---- eight rows at a time ---------------------------------------------------------
 * Each sum above is a chain: an addition waits for the one before it (four
 * cycles here), and a row of 128 numbers spends most of its time waiting.
 * The rows are independent, so the versions below run LN_GROUP rows side by
 * side, sum[g] for row r0 + g: the same additions in the same order for
 * every row, hence the same bits, with eight chains in flight instead of
 * one. The rows left over (fewer than LN_GROUP) go through the plain loops. */
enum { LN_GROUP = 8 };

void layer_norm_forward_grouped(const float *x, const float *weight, const float *bias,
                                float *y, float *mean, float *rstd, int rows, int D)
{
    int r0 = 0;
    for (; r0 + LN_GROUP <= rows; r0 += LN_GROUP) {
        const float *xs = x + (size_t)r0 * D;
        float *ys = y + (size_t)r0 * D;
        float sum[LN_GROUP] = {0}, square_sum[LN_GROUP] = {0}, m[LN_GROUP], s[LN_GROUP];
        for (int j = 0; j < D; j++)
#pragma GCC unroll 8
            for (int g = 0; g < LN_GROUP; g++)
                sum[g] += xs[(size_t)g * D + j];
        for (int g = 0; g < LN_GROUP; g++)
            m[g] = sum[g] / (float)D;
        for (int j = 0; j < D; j++)
#pragma GCC unroll 8
            for (int g = 0; g < LN_GROUP; g++) {
                const float centred = xs[(size_t)g * D + j] - m[g];
                square_sum[g] += centred * centred;
            }
        for (int g = 0; g < LN_GROUP; g++) {
            s[g] = 1.0f / sqrtf(square_sum[g] / (float)D + LAYER_NORM_EPS);
            for (int j = 0; j < D; j++)
                ys[(size_t)g * D + j] = (xs[(size_t)g * D + j] - m[g]) * s[g] * weight[j] + bias[j];
            mean[r0 + g] = m[g];
            rstd[r0 + g] = s[g];
        }
    }
    layer_norm_forward(x + (size_t)r0 * D, weight, bias, y + (size_t)r0 * D, mean + r0,
                       rstd + r0, rows - r0, D);
}

void layer_norm_backward_grouped(const float *grad_y, const float *x, const float *weight,
                                 const float *mean, const float *rstd, float *grad_x,
                                 float *grad_weight, float *grad_bias, int rows, int D)
{
    int r0 = 0;
    for (; r0 + LN_GROUP <= rows; r0 += LN_GROUP) {
        const float *dys = grad_y + (size_t)r0 * D, *xs = x + (size_t)r0 * D;
        float *dxs = grad_x + (size_t)r0 * D;
        float g_mean[LN_GROUP] = {0}, g_xhat_mean[LN_GROUP] = {0};
        // the two means, row r0 + g's in lane g
        for (int j = 0; j < D; j++)
#pragma GCC unroll 8
            for (int g = 0; g < LN_GROUP; g++) {
                const float xhat = (xs[(size_t)g * D + j] - mean[r0 + g]) * rstd[r0 + g];
                const float gj = dys[(size_t)g * D + j] * weight[j];
                g_mean[g] += gj;
                g_xhat_mean[g] += gj * xhat;
            }
        // then row after row, as the plain loops: the parameters' gradients
        // (the rows added in order) and grad_x, no sum across j
        for (int g = 0; g < LN_GROUP; g++) {
            const float *dy = dys + (size_t)g * D, *x_row = xs + (size_t)g * D;
            float *dx = dxs + (size_t)g * D;
            const float m = mean[r0 + g], s = rstd[r0 + g];
            const float gm = g_mean[g] / (float)D, gxm = g_xhat_mean[g] / (float)D;
            for (int j = 0; j < D; j++) {
                const float xhat = (x_row[j] - m) * s;
                grad_weight[j] += dy[j] * xhat;
                grad_bias[j] += dy[j];
            }
            for (int j = 0; j < D; j++) {
                const float xhat = (x_row[j] - m) * s;
                dx[j] += s * (dy[j] * weight[j] - gm - xhat * gxm);
            }
        }
    }
    layer_norm_backward(grad_y + (size_t)r0 * D, x + (size_t)r0 * D, weight, mean + r0,
                        rstd + r0, grad_x + (size_t)r0 * D, grad_weight, grad_bias, rows - r0,
                        D);
}
