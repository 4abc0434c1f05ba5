/*
 * softmax.h - softmax over rows and masking by valid_lens (introduced in
 * chapter 02).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys.
 *
 * Masks follow d2l's valid_lens: for a query, key j takes part when
 * j < valid_len. valid_lens is either 1-D (B,), one length for every query
 * of a sequence, or 2-D (B, T), one length per query. Masked scores are
 * replaced, not added to, so their weights are exactly 0 and every row with
 * at least one key agrees with d2l and PyTorch. A row with no valid key
 * (valid_len 0) gets all-zero weights, as PyTorch 2.5 and later give in
 * scaled_dot_product_attention (its safe softmax).
 * A valid_len below 0 or above n_k is an error.
 */
#ifndef SOFTMAX_H
#define SOFTMAX_H

#include "tensor.h"
#include "valid_lens.h"

/* In place over one row of n scores: numerically stable softmax. */
void softmax_row(float *row, int n);
/* In place: keys at index >= valid_len get weight exactly 0, the first
 * valid_len keys share the weight. valid_len 0 gives a row of zeros. */
void masked_softmax_row(float *row, int n, int valid_len);

/* ---- backward (chapter 03's optional section derives it) ----
 * With p = softmax(s) and a loss L, dL/ds_j = p_j (dL/dp_j - sum_i dL/dp_i p_i):
 * O(n) per row, without the (n, n) Jacobian diag(p) - p p^T. */

/* One row: weights p (n,), grad_weights (n,) -> grad_scores (n,) =
 * p * (grad_p - sum_j grad_p[j] p[j]); O(n). Masked keys (p = 0) and rows
 * with no valid key get exactly 0. */
void softmax_row_backward(const float *weights, const float *grad_weights,
                          float *grad_scores, int n);
/* weights (B, T, n_k) as masked_softmax returned them, grad_weights (B, T, n_k)
 * -> grad_scores (B, T, n_k), new. Also any shape: rows are the last dim. */
Tensor *masked_softmax_backward(const Tensor *weights, const Tensor *grad_weights);

/* New tensor: softmax over the last dimension of x (any number of dims). */
Tensor *softmax(const Tensor *x);
/* New tensor: x (B, T, n_k) -> weights (B, T, n_k); valid_lens may be NULL. */
Tensor *masked_softmax(const Tensor *x, const ValidLens *valid_lens);

#endif
