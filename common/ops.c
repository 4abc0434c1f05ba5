/* ops.c - the clear matrix products and linear layer. See ops.h. */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

/* A (m, k) @ B (k, n) -> C (m, n) */
void matmul_raw(const float *a, const float *b, float *c, int m, int k, int n)
{
    memset(c, 0, (size_t)m * (size_t)n * sizeof(float));
    for (int i = 0; i < m; i++) {
        float *c_row = c + (size_t)i * n;
        for (int p = 0; p < k; p++) {
            const float a_ip = a[(size_t)i * k + p];
            const float *b_row = b + (size_t)p * n;
            /* c_row += a_ip * b_row: contiguous, independent, vectorisable */
            for (int j = 0; j < n; j++)
                c_row[j] += a_ip * b_row[j];
        }
    }
}

/* A few rows of A against B^T: each output is a dot product taken in p
 * order from 0, as matmul_raw takes it (the same bits), four outputs at a
 * time so that four chains of additions are in flight, each walking a row
 * of B from its start. No copy of B: for one row of A (a decoder's token)
 * the copy costs more than the product (12 times the time at 1 x 512 x 512). */
enum { BT_CHAINS = 4, BT_FEW_ROWS = 8, BT_SQUARE = 16 };

static void few_rows_bt(const float *a, const float *b, float *c, int m, int k, int n)
{
    for (int i = 0; i < m; i++) {
        const float *a_row = a + (size_t)i * k;
        float *c_row = c + (size_t)i * n;
        int j0 = 0;
        for (; j0 + BT_CHAINS <= n; j0 += BT_CHAINS) {
            float sums[BT_CHAINS] = {0};
            const float *b_rows = b + (size_t)j0 * k;
            for (int p = 0; p < k; p++) {
#pragma GCC unroll 4
                for (int j = 0; j < BT_CHAINS; j++)
                    sums[j] += a_row[p] * b_rows[(size_t)j * k + p];
            }
            memcpy(c_row + j0, sums, sizeof sums);
        }
        for (int j = j0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++)
                sum += a_row[p] * b[(size_t)j * k + p];
            c_row[j] = sum;
        }
    }
}

/* A (m, k) @ B^T, B (n, k) -> C (m, n) */
void matmul_bt_raw(const float *a, const float *b, float *c, int m, int k, int n)
{
    if (m < BT_FEW_ROWS) {
        few_rows_bt(a, b, c, m, k, n);
        return;
    }
    /* A dot product per output would walk B's rows fine, but its sum is a
     * chain the compiler may not reorder. Transposing B once (k * n moves,
     * in squares that stay in the cache) turns the product back into the
     * vectorisable i, p, j loop above. */
    float *b_t = checked_malloc((size_t)k * (size_t)n, sizeof(float));
    for (int j0 = 0; j0 < n; j0 += BT_SQUARE)
        for (int p0 = 0; p0 < k; p0 += BT_SQUARE)
            for (int j = j0; j < j0 + BT_SQUARE && j < n; j++)
                for (int p = p0; p < p0 + BT_SQUARE && p < k; p++)
                    b_t[(size_t)p * n + j] = b[(size_t)j * k + p];
    matmul_raw(a, b_t, c, m, k, n);
    free(b_t);
}

Tensor *product_output(const Tensor *a, const Tensor *b, bool transposed, ProductSizes *sizes)
{
    char sa[80], sb[80];
    bool ok = (a->ndim == 2 && b->ndim == 2) ||
              (a->ndim == 3 && b->ndim == 3 && a->shape[0] == b->shape[0]);
    int batched = a->ndim == 3;
    ProductSizes n;
    n.batch = batched ? a->shape[0] : 1;
    n.m = a->shape[batched];
    n.k = a->shape[batched + 1];
    n.b_rows = b->shape[batched];
    n.b_cols = b->shape[batched + 1];
    n.n = transposed ? n.b_rows : n.b_cols;
    ok = ok && (transposed ? n.b_cols : n.b_rows) == n.k;
    if (!ok)
        die("shapes do not fit: %s and %s%s",
            shape_str(sa, sizeof sa, a->ndim, a->shape),
            shape_str(sb, sizeof sb, b->ndim, b->shape),
            transposed ? " (the second is transposed: it needs the same last size)" : "");
    *sizes = n;
    return batched ? tensor_zeros(SHAPE(n.batch, n.m, n.n)) : tensor_zeros(SHAPE(n.m, n.n));
}

/* (batch, m, k) with B's two sizes; transposed says which of B's sizes is k. */
static Tensor *product(const Tensor *a, const Tensor *b, bool transposed)
{
    ProductSizes n;
    Tensor *c = product_output(a, b, transposed, &n);
    for (int i = 0; i < n.batch; i++) {
        const float *a_mat = a->data + (size_t)i * n.m * n.k;
        const float *b_mat = b->data + (size_t)i * n.b_rows * n.b_cols;
        float *c_mat = c->data + (size_t)i * n.m * n.n;
        if (transposed)
            matmul_bt_raw(a_mat, b_mat, c_mat, n.m, n.k, n.n);
        else
            matmul_raw(a_mat, b_mat, c_mat, n.m, n.k, n.n);
    }
    return c;
}

Tensor *matmul(const Tensor *a, const Tensor *b)
{
    return product(a, b, false);
}

Tensor *matmul_bt(const Tensor *a, const Tensor *b)
{
    return product(a, b, true);
}

void linear_shape(const Tensor *x, const Tensor *weight, const Tensor *bias,
                  int y_shape[TENSOR_MAX_DIMS], int *rows)
{
    int in = x->shape[x->ndim - 1];
    tensor_check_shape("weight", weight, SHAPE(-1, in));
    int out = weight->shape[0];
    if (bias != NULL)
        tensor_check_shape("bias", bias, SHAPE(out));
    /* Every row of x, whatever the leading dims, is one input vector. */
    *rows = (int)(x->size / (size_t)in);
    memcpy(y_shape, x->shape, TENSOR_MAX_DIMS * sizeof *y_shape);
    y_shape[x->ndim - 1] = out;
}

Tensor *linear_output(const Tensor *x, const Tensor *weight, const Tensor *bias, int *rows)
{
    int y_shape[TENSOR_MAX_DIMS];
    linear_shape(x, weight, bias, y_shape, rows);
    return tensor_zeros(x->ndim, y_shape);
}

Tensor *linear(const Tensor *x, const Tensor *weight, const Tensor *bias)
{
    int rows;
    Tensor *y = linear_output(x, weight, bias, &rows);
    int in = x->shape[x->ndim - 1], out = weight->shape[0];
    matmul_bt_raw(x->data, weight->data, y->data, rows, in, out);
    if (bias != NULL)
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < out; j++)
                y->data[(size_t)r * out + j] += bias->data[j];
    return y;
}

/* x (..., in), weight (out, in), grad_y (..., out) -> grad_x (..., in);
 * grad_weight (out, in) += grad_y^T x, grad_bias (out,) += column sums of grad_y */
Tensor *linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                        Tensor *grad_weight, Tensor *grad_bias)
{
    int rows;
    /* grad_y has the forward's output shape: the same rule checks both. */
    int y_shape[TENSOR_MAX_DIMS];
    linear_shape(x, weight, NULL, y_shape, &rows);
    tensor_check_shape("grad_y", grad_y, x->ndim, y_shape);
    const int in = x->shape[x->ndim - 1], out = weight->shape[0];
    if (grad_weight != NULL)
        tensor_check_shape("grad_weight", grad_weight, SHAPE(out, in));
    if (grad_bias != NULL)
        tensor_check_shape("grad_bias", grad_bias, SHAPE(out));

    // backwards through y = x W^T: each y[r, j] = sum_i x[r, i] W[j, i] reaches
    // x[r, i] through W[j, i] and W[j, i] through x[r, i].
    // grad_x = grad_y @ W, (rows, out) @ (out, in) -> (rows, in)
    int x_shape[TENSOR_MAX_DIMS];
    memcpy(x_shape, x->shape, sizeof x_shape);
    Tensor *grad_x = tensor_zeros(x->ndim, x_shape);
    matmul_raw(grad_y->data, weight->data, grad_x->data, rows, out, in);

    // grad_W += grad_y^T @ x, (out, rows) @ (rows, in): the whole product
    // first, then one addition per element, so the accumulated gradient is
    // this step's gradient added once (as .grad += in PyTorch)
    if (grad_weight != NULL) {
        float *grad_y_t = checked_malloc((size_t)out * rows, sizeof(float));
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < out; j++)
                grad_y_t[(size_t)j * rows + r] = grad_y->data[(size_t)r * out + j];
        float *step = checked_malloc((size_t)out * in, sizeof(float));
        matmul_raw(grad_y_t, x->data, step, out, rows, in);
        for (size_t i = 0; i < (size_t)out * in; i++)
            grad_weight->data[i] += step[i];
        free(grad_y_t);
        free(step);
    }

    // grad_b += the sum of grad_y's rows: b is added to every row of y
    if (grad_bias != NULL)
        for (int j = 0; j < out; j++) {
            double sum = 0.0;
            for (int r = 0; r < rows; r++)
                sum += grad_y->data[(size_t)r * out + j];
            grad_bias->data[j] += (float)sum;
        }
    return grad_x;
}

int argmax(const float *row, int n)
{
    int best = 0;
    for (int j = 1; j < n; j++)
        if (row[j] > row[best])
            best = j;
    return best;
}

void relu_inplace(Tensor *x)
{
    for (size_t i = 0; i < x->size; i++)
        if (x->data[i] < 0.0f)   /* NaN stays NaN, as in torch.relu */
            x->data[i] = 0.0f;
}
