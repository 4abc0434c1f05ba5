/*
 * Exercise 5.9, worked answer: a linear layer, backwards.
 *
 * Each parameter collects from every row that used it: W and b were used
 * by all R rows, so their gradients are sums over the rows; each row of x
 * was used once, by every output:
 *
 *   grad_x = grad_y W          (R, out) @ (out, in)
 *   grad_W = grad_y^T x        (out, R) @ (R, in)
 *   grad_b = sum of grad_y's rows
 */
#include "exercises.h"

#include <string.h>

void my_linear_backward(const float *x, const float *weight, const float *grad_y,
                        float *grad_x, float *grad_weight, float *grad_bias, int rows, int in,
                        int out)
{
    memset(grad_x, 0, (size_t)rows * in * sizeof *grad_x);
    memset(grad_weight, 0, (size_t)out * in * sizeof *grad_weight);
    memset(grad_bias, 0, (size_t)out * sizeof *grad_bias);
    for (int r = 0; r < rows; r++) {
        const float *x_row = x + (size_t)r * in, *dy_row = grad_y + (size_t)r * out;
        float *dx_row = grad_x + (size_t)r * in;
        for (int o = 0; o < out; o++) {
            const float *w_row = weight + (size_t)o * in;
            float *dw_row = grad_weight + (size_t)o * in;
            for (int i = 0; i < in; i++) {
                dx_row[i] += dy_row[o] * w_row[i];
                dw_row[i] += dy_row[o] * x_row[i];
            }
            grad_bias[o] += dy_row[o];
        }
    }
}
