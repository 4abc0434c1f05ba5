/*
 * ops.h - matrix products and the linear layer (introduced in chapter 01).
 *
 * Legend: m, k, n are matrix sizes; B is a batch of independent matrices.
 *   matmul     A (m, k) @ B (k, n)    -> C (m, n)     and batched (B, m, k) @ (B, k, n)
 *   matmul_bt  A (m, k) @ B^T, B (n, k) -> C (m, n)   and batched (B, m, k) @ (B, n, k)^T
 *   linear     x (..., in) @ W^T + b, W (out, in), b (out,) -> (..., out)
 *
 * Weights use PyTorch's nn.Linear layout (out_features, in_features), so
 * weights exported from PyTorch load as they are.
 *
 * Gradients (the convention of every backward in common/, stated once here):
 * a backward RETURNS new tensors for the gradients of its inputs (the caller
 * frees them; a NULL out-pointer means "not wanted", and it is not
 * computed) and ADDS (+=) into the gradients of parameters, as PyTorch's
 * .grad accumulates: zero them before each step. Each backward sits beside
 * its forward, with the same legend, and reads like it in reverse.
 *
 * These are the clear versions: three loops in the order i, p, j, so the
 * innermost loop adds a multiple of one row of B to one row of C. Both rows
 * are contiguous, which lets the compiler turn that loop into vector
 * instructions without reordering any sum (it stays exact IEEE arithmetic).
 */
#ifndef OPS_H
#define OPS_H

#include <stdbool.h>

#include "tensor.h"

/* Raw kernels on row-major arrays; c is overwritten. */
void matmul_raw(const float *a, const float *b, float *c, int m, int k, int n);
void matmul_bt_raw(const float *a, const float *b, float *c, int m, int k, int n);

/* New tensors. 2-D with 2-D, or 3-D with 3-D of the same batch size. */
Tensor *matmul(const Tensor *a, const Tensor *b);
Tensor *matmul_bt(const Tensor *a, const Tensor *b);

/* y = x W^T + b over the last dimension of x (1 to 4 dims); bias may be NULL. */
Tensor *linear(const Tensor *x, const Tensor *weight, const Tensor *bias);

/* Backward of y = x W^T + b: x (..., in), weight (out, in), grad_y (..., out)
 * -> grad_x (..., in), returned (new); grad_weight (out, in) += grad_y^T x;
 * grad_bias (out,) += the sum of grad_y's rows (NULL: no bias).
 * grad_weight may be NULL too (the weight is frozen: nothing is added). */
Tensor *linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                        Tensor *grad_weight, Tensor *grad_bias);

/* The shape rules of a product and of a linear layer, stated once for the
 * clear versions here and the fast ones in fast_matmul.c. Each stops (die)
 * with both shapes unless the inputs fit, and returns the zeroed output with
 * its sizes. */
typedef struct {
    int batch;          /* 1 for 2-D inputs */
    int m, k, n;        /* A (m, k), C (m, n) */
    int b_rows, b_cols; /* B as stored: (k, n), or (n, k) when transposed */
} ProductSizes;
Tensor *product_output(const Tensor *a, const Tensor *b, bool transposed, ProductSizes *sizes);
/* x (..., in), weight (out, in), bias (out,) or NULL checked: y_shape
 * receives y's shape (..., out), x->ndim dims, and *rows the number of
 * input vectors, the product of x's leading dims. Stops (die) when the
 * shapes do not fit. */
void linear_shape(const Tensor *x, const Tensor *weight, const Tensor *bias,
                  int y_shape[TENSOR_MAX_DIMS], int *rows);
/* linear_shape, then y (..., out) zeroed */
Tensor *linear_output(const Tensor *x, const Tensor *weight, const Tensor *bias, int *rows);

/* Elementwise helpers that chapters reuse. */
void relu_inplace(Tensor *x);

/* A reduction over a row: the index of the largest of row (n,), the first
 * on a tie, like torch.argmax. */
int argmax(const float *row, int n);

#endif
