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

/* A (m, k) @ B^T, B (n, k) -> C (m, n) */
void matmul_bt_raw(const float *a, const float *b, float *c, int m, int k, int n)
{
    /* A dot product per output would walk B's rows fine, but its sum is a
     * chain the compiler may not reorder. Transposing B once (k * n moves)
     * turns the product back into the vectorisable i, p, j loop above. */
    float *b_t = checked_malloc("matmul_bt", (size_t)k * (size_t)n, sizeof(float));
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++)
            b_t[(size_t)p * n + j] = b[(size_t)j * k + p];
    matmul_raw(a, b_t, c, m, k, n);
    free(b_t);
}

/* Shapes of a product: (batch, m, k) and B's two sizes; transposed says
 * which of B's sizes is k. Stops with both shapes when they do not fit. */
static Tensor *product(const char *func, const Tensor *a, const Tensor *b, bool transposed)
{
    char sa[80], sb[80];
    bool ok = (a->ndim == 2 && b->ndim == 2) ||
              (a->ndim == 3 && b->ndim == 3 && a->shape[0] == b->shape[0]);
    int batched = a->ndim == 3;
    int m = a->shape[batched], k = a->shape[batched + 1];
    int b_rows = b->shape[batched], b_cols = b->shape[batched + 1];
    int n = transposed ? b_rows : b_cols;
    ok = ok && (transposed ? b_cols : b_rows) == k;
    if (!ok)
        die(func, "shapes do not fit: %s and %s%s",
            shape_str(sa, sizeof sa, a->ndim, a->shape),
            shape_str(sb, sizeof sb, b->ndim, b->shape),
            transposed ? " (the second is transposed: it needs the same last size)" : "");

    int batch = batched ? a->shape[0] : 1;
    Tensor *c = batched ? tensor_zeros(SHAPE(batch, m, n)) : tensor_zeros(SHAPE(m, n));
    for (int i = 0; i < batch; i++) {
        const float *a_mat = a->data + (size_t)i * m * k;
        const float *b_mat = b->data + (size_t)i * b_rows * b_cols;
        float *c_mat = c->data + (size_t)i * m * n;
        if (transposed)
            matmul_bt_raw(a_mat, b_mat, c_mat, m, k, n);
        else
            matmul_raw(a_mat, b_mat, c_mat, m, k, n);
    }
    return c;
}

Tensor *matmul(const Tensor *a, const Tensor *b)
{
    return product("matmul", a, b, false);
}

Tensor *matmul_bt(const Tensor *a, const Tensor *b)
{
    return product("matmul_bt", a, b, true);
}

Tensor *linear(const Tensor *x, const Tensor *weight, const Tensor *bias)
{
    int in = x->shape[x->ndim - 1];
    int out = weight->shape[0];
    tensor_check_shape("linear", "weight", weight, SHAPE(-1, in));
    if (bias != NULL)
        tensor_check_shape("linear", "bias", bias, SHAPE(out));

    /* Every row of x, whatever the leading dims, is one input vector. */
    int rows = (int)(x->size / (size_t)in);
    int out_shape[TENSOR_MAX_DIMS];
    memcpy(out_shape, x->shape, sizeof out_shape);
    out_shape[x->ndim - 1] = out;
    Tensor *y = tensor_zeros(x->ndim, out_shape);
    matmul_bt_raw(x->data, weight->data, y->data, rows, in, out);
    if (bias != NULL)
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < out; j++)
                y->data[(size_t)r * out + j] += bias->data[j];
    return y;
}

void relu_inplace(Tensor *x)
{
    for (size_t i = 0; i < x->size; i++)
        if (x->data[i] < 0.0f)   /* NaN stays NaN, as in torch.relu */
            x->data[i] = 0.0f;
}
