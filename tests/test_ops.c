/* test_ops.c - matmul, matmul_bt and linear against values worked by hand. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ops.h"

Test(ops, matmul_non_square)
{
    /* (2, 3) @ (3, 2) */
    const float a[] = {1, 2, 3,
                       4, 5, 6};
    const float b[] = {7, 8,
                       9, 10,
                       11, 12};
    const float c[] = {1 * 7 + 2 * 9 + 3 * 11, 1 * 8 + 2 * 10 + 3 * 12,
                       4 * 7 + 5 * 9 + 6 * 11, 4 * 8 + 5 * 10 + 6 * 12};   /* 58 64 139 154 */
    Tensor *A = tensor_from(a, SHAPE(2, 3)), *B = tensor_from(b, SHAPE(3, 2));
    Tensor *expected = tensor_from(c, SHAPE(2, 2));
    Tensor *C = matmul(A, B);
    expect_close(C, expected, 0.0f, 0.0f);
    tensor_free(A);
    tensor_free(B);
    tensor_free(C);
    tensor_free(expected);
}

Test(ops, matmul_bt_uses_rows_of_b)
{
    /* A (2, 3) @ B^T with B (4, 3) -> (2, 4): C[i][j] = a_i . b_j */
    const float a[] = {1, 0, -1,
                       2, 3, 0.5f};
    const float b[] = {1, 1, 1,
                       0, 2, 0,
                       -1, 0, 4,
                       0.5f, -0.5f, 2};
    const float c[] = {0, 0, -5, -1.5f,
                       5.5f, 6, 0, 0.5f};
    Tensor *A = tensor_from(a, SHAPE(2, 3)), *B = tensor_from(b, SHAPE(4, 3));
    Tensor *expected = tensor_from(c, SHAPE(2, 4));
    Tensor *C = matmul_bt(A, B);
    expect_close(C, expected, 0.0f, 0.0f);
    tensor_free(A);
    tensor_free(B);
    tensor_free(C);
    tensor_free(expected);
}

/* matmul_bt_raw takes a few rows of A (a decoder's one token) as dot
 * products and more rows through a copy of B^T: either way each output is
 * summed in p order from 0, so it equals matmul_raw on B^T bit for bit */
Test(ops, matmul_bt_is_matmul_of_the_transpose_bit_for_bit)
{
    Rng rng = rng_new(17);
    const int sizes[][3] = {{1, 1, 1}, {1, 128, 512}, {1, 37, 5}, {3, 64, 65},
                            {7, 33, 9}, {8, 17, 31}, {12, 40, 3}, {20, 70, 70}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int m = sizes[s][0], k = sizes[s][1], n = sizes[s][2];
        Tensor *a = tensor_uniform(&rng, -1.0f, 1.0f, SHAPE(m, k));
        Tensor *b = tensor_uniform(&rng, -3.0f, 3.0f, SHAPE(n, k));
        Tensor *b_t = tensor_zeros(SHAPE(k, n));
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                AT2(b_t, p, j) = AT2(b, j, p);
        Tensor *want = tensor_zeros(SHAPE(m, n)), *got = tensor_zeros(SHAPE(m, n));
        matmul_raw(a->data, b_t->data, want->data, m, k, n);
        matmul_bt_raw(a->data, b->data, got->data, m, k, n);
        for (size_t i = 0; i < want->size; i++)
            cr_assert(memcmp(&got->data[i], &want->data[i], sizeof(float)) == 0,
                      "(%d, %d, %d): element %zu is %.9g, matmul of B^T gives %.9g", m, k, n,
                      i, (double)got->data[i], (double)want->data[i]);
        TENSOR_FREE(a, b, b_t, want, got);
    }
}

Test(ops, batched_matmul_keeps_batches_apart)
{
    /* batch 0: identity @ X = X; batch 1: 2 * identity @ Y = 2Y */
    const float a[] = {1, 0, 0, 1,   2, 0, 0, 2};
    const float b[] = {1, 2, 3, 4, 5, 6,   -1, -2, -3, -4, -5, -6};
    const float c[] = {1, 2, 3, 4, 5, 6,   -2, -4, -6, -8, -10, -12};
    Tensor *A = tensor_from(a, SHAPE(2, 2, 2)), *B = tensor_from(b, SHAPE(2, 2, 3));
    Tensor *expected = tensor_from(c, SHAPE(2, 2, 3));
    Tensor *C = matmul(A, B);
    expect_close(C, expected, 0.0f, 0.0f);
    /* and A @ (B^T)^T: transpose each batch of B by hand, then matmul_bt */
    Tensor *B_t = tensor_permute(B, (const int[]){0, 2, 1});
    Tensor *C2 = matmul_bt(A, B_t);
    expect_close(C2, expected, 0.0f, 0.0f);
    tensor_free(A);
    tensor_free(B);
    tensor_free(B_t);
    tensor_free(C);
    tensor_free(C2);
    tensor_free(expected);
}

Test(ops, linear_uses_pytorch_weight_layout)
{
    /* x (2, 3); W (4, 3) = (out_features, in_features); b (4,)
     * y[r][o] = sum_i x[r][i] * W[o][i] + b[o] */
    const float x[] = {1, 2, 3,
                       -1, 0, 2};
    const float w[] = {1, 0, 0,
                       0, 1, 0,
                       1, 1, 1,
                       2, -1, 0.5f};
    const float b[] = {0.5f, -0.5f, 0, 10};
    const float y[] = {1.5f, 1.5f, 6, 11.5f,
                       -0.5f, -0.5f, 1, 9};
    Tensor *X = tensor_from(x, SHAPE(2, 3)), *W = tensor_from(w, SHAPE(4, 3));
    Tensor *B = tensor_from(b, SHAPE(4));
    Tensor *expected = tensor_from(y, SHAPE(2, 4));
    Tensor *Y = linear(X, W, B);
    expect_close(Y, expected, 0.0f, 0.0f);

    /* 3-D input: every row is its own input vector; no bias */
    tensor_reshape(X, SHAPE(2, 1, 3));
    Tensor *Y3 = linear(X, W, NULL);
    cr_expect_eq(Y3->ndim, 3);
    cr_expect_eq(Y3->shape[2], 4);
    cr_expect_eq(AT3(Y3, 1, 0, 3), -2.0f + 0.0f + 1.0f);
    cr_expect_eq(AT3(Y3, 0, 0, 2), 6.0f);
    tensor_free(X);
    tensor_free(W);
    tensor_free(B);
    tensor_free(Y);
    tensor_free(Y3);
    tensor_free(expected);
}

/* Kept in a static so the leak checker sees them reachable when the
 * expected error stops the process. */
static Tensor *kept[2];

static void linear_transposed_weight(void)
{
    /* W given as (in, out) = (3, 4) instead of (4, 3) */
    kept[0] = tensor_zeros(SHAPE(2, 3));
    kept[1] = tensor_zeros(SHAPE(3, 4));
    linear(kept[0], kept[1], NULL);
}

Test(ops, linear_rejects_weight_of_wrong_layout)
{
    int status;
    char *err = stderr_of(linear_transposed_weight, &status);
    cr_expect_eq(status, DIE_STATUS);
    cr_expect_str_eq(err, "tensor_check_shape: weight expected shape (*, 3), got (3, 4)\n");
    free(err);
}

static void matmul_misfit(void)
{
    kept[0] = tensor_zeros(SHAPE(2, 3));
    kept[1] = tensor_zeros(SHAPE(2, 3));
    matmul(kept[0], kept[1]);
}

Test(ops, matmul_rejects_shapes_that_do_not_fit)
{
    int status;
    char *err = stderr_of(matmul_misfit, &status);
    cr_expect_eq(status, DIE_STATUS);
    cr_expect_str_eq(err, "product_output: shapes do not fit: (2, 3) and (2, 3)\n");
    free(err);
}

Test(ops, relu_keeps_nan_and_clears_negatives)
{
    const float v[] = {-1, 0, 2, NAN};
    Tensor *x = tensor_from(v, SHAPE(4));
    relu_inplace(x);
    cr_expect_eq(x->data[0], 0.0f);
    cr_expect_eq(x->data[2], 2.0f);
    cr_expect(x->data[3] != x->data[3]);
    tensor_free(x);
}
