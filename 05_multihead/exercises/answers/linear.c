/*
 * Exercise 5.1, worked answer: a linear layer in PyTorch's layout.
 *
 * Every row of x (whatever the leading dimensions) meets every row of W:
 * y[r][o] = b[o] + sum_i x[r][i] W[o][i]. W is (out, in), so row o of W is
 * the o-th output's weights, read in order like the row of x.
 */
#include "exercises.h"

Tensor *my_linear(const Tensor *x, const Tensor *weight, const Tensor *bias)
{
    int out = weight->shape[0], in = weight->shape[1];
    size_t rows = x->size / (size_t)in;
    int shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        shape[i] = x->shape[i];
    shape[x->ndim - 1] = out;
    Tensor *y = tensor_empty(x->ndim, shape);
    for (size_t r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            const float *x_row = x->data + r * (size_t)in;
            const float *w_row = weight->data + (size_t)o * in;
            float sum = 0.0f;
            for (int i = 0; i < in; i++)
                sum += x_row[i] * w_row[i];
            y->data[r * (size_t)out + o] = bias ? sum + bias->data[o] : sum;
        }
    return y;
}
