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
        die("valid_len %d is outside 0..%d (the row has %d keys)",
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
    tensor_check_shape("x", x, SHAPE(-1, -1, -1));
    int batch = x->shape[0], num_queries = x->shape[1], num_keys = x->shape[2];
    valid_lens_check(valid_lens, batch, num_queries, num_keys);

    Tensor *weights = tensor_copy(x);
    for (int b = 0; b < batch; b++)
        for (int q = 0; q < num_queries; q++) {
            float *row = weights->data + ((size_t)b * num_queries + (size_t)q) * num_keys;
            masked_softmax_row(row, num_keys, valid_len_at(valid_lens, b, q));
        }
    return weights;
}

/* ---- backward -------------------------------------------------------------
 * p = softmax(s) has the Jacobian dp_i/ds_j = p_i (delta_ij - p_j), an
 * (n, n) matrix. Multiplied by the incoming gradient g = dL/dp it collapses:
 *     dL/ds_j = sum_i g_i p_i (delta_ij - p_j) = p_j g_j - p_j sum_i g_i p_i
 *             = p_j (g_j - <g, p>),
 * one dot product shared by the whole row, then one pass: O(n), not O(n^2).
 * A masked key has p_j = 0 and so gets exactly 0, whatever g says: it did
 * not take part. A row with no valid key is all zeros and stays so. */

/* weights (n,), grad_weights (n,) -> grad_scores (n,) */
void softmax_row_backward(const float *weights, const float *grad_weights,
                          float *grad_scores, int n)
{
    // pass 3 backwards: <g, p>, the part of the gradient that normalising
    // takes away from every entry (kept in double, as the forward's sum)
    double dot = 0.0, sum = 0.0;
    for (int j = 0; j < n; j++)
        if (weights[j] != 0.0f) {
            dot += (double)grad_weights[j] * weights[j];
            sum += weights[j];
        }
    // The float weights sum to 1 only up to rounding, and when one weight
    // is near 1, g_j - <g, p> is a small difference of large numbers that
    // a sum of 1 + 1e-7 throws off by 1e-7 |g_j| (relative errors of 1e-4
    // in dS were measured). Dividing by the weights' own sum, which is the
    // same formula in exact arithmetic, makes every row of dS sum to 0 again.
    if (sum > 0.0)
        dot /= sum;
    // passes 2 and 1 backwards: through exp (its derivative is itself, so
    // p_j comes back as a factor) and the shift by the maximum, which moves
    // every score alike and so changes no weight: it has no gradient.
    // A key of weight 0 (masked) is skipped outright, so its gradient is
    // +0 exactly, even where -0 or an infinite gradient would come out.
    for (int j = 0; j < n; j++)
        grad_scores[j] = weights[j] == 0.0f
                             ? 0.0f
                             : weights[j] * (float)((double)grad_weights[j] - dot);
}

/* weights (B, T, K), grad_weights (B, T, K) -> grad_scores (B, T, K);
 * any shape works: every run of the last dimension is one row */
Tensor *masked_softmax_backward(const Tensor *weights, const Tensor *grad_weights)
{
    tensor_check_shape("grad_weights", grad_weights,
                       weights->ndim, weights->shape);
    /* The mask needs no second look: masked_softmax left p = 0 on every
     * masked key, and p = 0 gives gradient 0 above. */
    Tensor *grad_scores = tensor_copy(weights);
    int num_keys = weights->shape[weights->ndim - 1];
    size_t rows = weights->size / (size_t)num_keys;
    for (size_t r = 0; r < rows; r++) {
        size_t offset = r * (size_t)num_keys;
        softmax_row_backward(weights->data + offset, grad_weights->data + offset,
                             grad_scores->data + offset, num_keys);
    }
    return grad_scores;
}
