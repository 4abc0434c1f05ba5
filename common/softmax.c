/*
 * softmax.c - softmax over rows and d2l's valid_lens masking (introduced in
 * chapter 02). See softmax.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys.
 */
#include "softmax.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- valid_lens ---------------------------------------------------------- */

static ValidLens *valid_lens_alloc(const char *func, int ndim, int batch, int num_queries)
{
    if (batch < 1 || num_queries < 1)
        die(func, "valid_lens needs positive sizes, got batch %d and num_queries %d",
            batch, num_queries);
    ValidLens *valid_lens = checked_malloc(func, 1, sizeof *valid_lens);
    valid_lens->ndim = ndim;
    valid_lens->shape[0] = batch;
    valid_lens->shape[1] = ndim == 2 ? num_queries : 1;
    valid_lens->data = checked_malloc(func, (size_t)batch * (size_t)valid_lens->shape[1],
                                      sizeof(int));
    return valid_lens;
}

static size_t valid_lens_count(const ValidLens *valid_lens)
{
    return (size_t)valid_lens->shape[0] * (size_t)(valid_lens->ndim == 2 ? valid_lens->shape[1] : 1);
}

/* lens (B,) -> valid_lens (B,) */
ValidLens *valid_lens_1d(const int *lens, int batch)
{
    ValidLens *valid_lens = valid_lens_alloc("valid_lens_1d", 1, batch, 1);
    memcpy(valid_lens->data, lens, (size_t)batch * sizeof(int));
    return valid_lens;
}

/* lens (B * T,) row-major -> valid_lens (B, T) */
ValidLens *valid_lens_2d(const int *lens, int batch, int num_queries)
{
    ValidLens *valid_lens = valid_lens_alloc("valid_lens_2d", 2, batch, num_queries);
    memcpy(valid_lens->data, lens, (size_t)batch * (size_t)num_queries * sizeof(int));
    return valid_lens;
}

ValidLens *valid_lens_copy(const ValidLens *valid_lens)
{
    if (valid_lens->ndim == 2)
        return valid_lens_2d(valid_lens->data, valid_lens->shape[0], valid_lens->shape[1]);
    return valid_lens_1d(valid_lens->data, valid_lens->shape[0]);
}

void valid_lens_free(ValidLens *valid_lens)
{
    if (valid_lens == NULL)
        return;
    free(valid_lens->data);
    free(valid_lens);
}

int valid_len_at(const ValidLens *valid_lens, int b, int q)
{
    /* 1-D: one length per sequence, shared by all of its queries (what d2l
     * does with repeat_interleave). 2-D: one length per query. */
    if (valid_lens->ndim == 1)
        return valid_lens->data[b];
    return valid_lens->data[(size_t)b * valid_lens->shape[1] + (size_t)q];
}

void valid_lens_check(const char *func, const ValidLens *valid_lens,
                      int batch, int num_queries, int num_keys)
{
    char have[80], scores[80];
    if (valid_lens == NULL)
        return;
    shape_str(scores, sizeof scores, SHAPE(batch, num_queries, num_keys));
    shape_str(have, sizeof have, valid_lens->ndim, valid_lens->shape);
    bool fits = (valid_lens->ndim == 1 && valid_lens->shape[0] == batch) ||
                (valid_lens->ndim == 2 && valid_lens->shape[0] == batch &&
                 valid_lens->shape[1] == num_queries);
    if (!fits)
        die(func, "valid_lens has shape %s; scores of shape %s need (%d,) or (%d, %d)",
            have, scores, batch, batch, num_queries);
    for (int b = 0; b < batch; b++) {
        for (int q = 0; q < (valid_lens->ndim == 2 ? num_queries : 1); q++) {
            int len = valid_len_at(valid_lens, b, q);
            if (len >= 0 && len <= num_keys)
                continue;
            char where[32];
            if (valid_lens->ndim == 2)
                snprintf(where, sizeof where, "[%d, %d]", b, q);
            else
                snprintf(where, sizeof where, "[%d]", b);
            die(func, "valid_lens%s = %d is outside 0..%d: a length counts keys, and "
                "there are %d", where, len, num_keys, num_keys);
        }
    }
}

void valid_lens_print_named(const char *name, const ValidLens *valid_lens)
{
    /* PyTorch right-aligns integers to the widest one. */
    char buf[16];
    int width = 1;
    size_t count = valid_lens_count(valid_lens);
    for (size_t i = 0; i < count; i++) {
        int w = snprintf(buf, sizeof buf, "%d", valid_lens->data[i]);
        if (w > width)
            width = w;
    }
    printf("%s = tensor(", name);
    int rows = valid_lens->ndim == 2 ? valid_lens->shape[0] : 1;
    int cols = valid_lens->ndim == 2 ? valid_lens->shape[1] : valid_lens->shape[0];
    int indent = (int)strlen(name) + (int)strlen(" = tensor(") + 1;
    if (valid_lens->ndim == 2)
        printf("[");
    for (int r = 0; r < rows; r++) {
        if (r > 0)
            printf(",\n%*s", indent, "");
        printf("[");
        for (int c = 0; c < cols; c++)
            printf("%s%*d", c ? ", " : "", width, valid_lens->data[(size_t)r * cols + c]);
        printf("]");
    }
    if (valid_lens->ndim == 2)
        printf("]");
    printf(")\n");
}

/* ---- softmax ------------------------------------------------------------- */

/* row (n,) -> row (n,), in place */
void softmax_row(float *row, int n)
{
    if (n <= 0)
        return;
    /* pass 1: the row maximum. exp(1000) overflows a float (the largest is
     * about 3.4e38, exp(88.7)), but softmax(x) = softmax(x - c) for any c:
     * the factor exp(-c) cancels between numerator and denominator. With
     * c = max every exponent is <= 0, so every exp is in (0, 1] and the
     * largest is exactly 1: no overflow, and the sum is at least 1. */
    float max = row[0];
    for (int j = 1; j < n; j++)
        if (row[j] > max)
            max = row[j];
    /* pass 2: exponentials and their sum. The sum is kept in double so
     * that a long row still sums to 1 within float rounding. A row of
     * -inf (or one holding +inf) gives NaN here, exactly as torch.softmax
     * does; masked_softmax_row never feeds it such a row. */
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        row[j] = expf(row[j] - max);
        sum += row[j];
    }
    /* pass 3: normalise */
    for (int j = 0; j < n; j++)
        row[j] = (float)(row[j] / sum);
}

/* row (n,) -> row (n,), in place; keys j >= valid_len get exactly 0 */
void masked_softmax_row(float *row, int n, int valid_len)
{
    if (valid_len < 0 || valid_len > n)
        die("masked_softmax_row", "valid_len %d is outside 0..%d (the row has %d keys)",
            valid_len, n, n);
    /* Replacing the masked scores by -1e6 (d2l) makes exp underflow to 0,
     * so softmax over the whole row equals softmax over the valid prefix
     * followed by zeros. Doing exactly that is clearer, gives exact zeros
     * by construction, and leaves no guesswork for valid_len 0: the mask
     * is a loop bound. */
    softmax_row(row, valid_len);
    for (int j = valid_len; j < n; j++)
        row[j] = 0.0f;
}

/* x (..., K) -> weights (..., K) */
Tensor *softmax(const Tensor *x)
{
    Tensor *weights = tensor_copy(x);
    int num_keys = x->shape[x->ndim - 1];
    size_t rows = x->size / (size_t)num_keys;
    for (size_t r = 0; r < rows; r++)
        softmax_row(weights->data + r * (size_t)num_keys, num_keys);
    return weights;
}

/* x (B, T, K), valid_lens NULL, (B,) or (B, T) -> weights (B, T, K) */
Tensor *masked_softmax(const Tensor *x, const ValidLens *valid_lens)
{
    if (valid_lens == NULL)
        return softmax(x);
    tensor_check_shape("masked_softmax", "x", x, SHAPE(-1, -1, -1));
    int batch = x->shape[0], num_queries = x->shape[1], num_keys = x->shape[2];
    valid_lens_check("masked_softmax", valid_lens, batch, num_queries, num_keys);

    Tensor *weights = tensor_copy(x);
    for (int b = 0; b < batch; b++)
        for (int q = 0; q < num_queries; q++) {
            float *row = weights->data + ((size_t)b * num_queries + (size_t)q) * num_keys;
            masked_softmax_row(row, num_keys, valid_len_at(valid_lens, b, q));
        }
    return weights;
}
