/*
 * permute_tokens.h - reordering the tokens of a sequence (introduced in
 * chapter 06).
 *
 * Legend: B = batch_size, T = number of tokens, D = num_hiddens,
 * H = num_heads, K = num_keys.
 *
 * A permutation of n tokens is an int array perm holding each of 0..n-1
 * once. Applying it to X puts token perm[i] at position i:
 *
 *     (P X)[b, i, :] = X[b, perm[i], :]          X[:, perm] in PyTorch
 *
 * which is the same as multiplying every sequence by the permutation matrix
 * P with P[i, perm[i]] = 1 and zeros elsewhere. Undoing it needs the inverse
 * permutation: P^T X = X[:, inverse], inverse[perm[i]] = i.
 *
 * Moving rows copies floats and does no arithmetic, so a permuted tensor
 * holds exactly the same bits as the original, only in another order.
 */
#ifndef PERMUTE_TOKENS_H
#define PERMUTE_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

/* Two outputs of a permuted input count as equal when they differ by at
 * most PERMUTATION_TOL_EPS float32 epsilons times the size of the output:
 * a permutation only changes the order of sums over the keys, which costs
 * a few roundings, while a real change is millions of epsilons. */
#define PERMUTATION_TOL_EPS 64.0

/* A difference in units of float32 epsilon (2^-23, the gap between 1 and
 * the next float) times scale, the largest |entry| of the output it was
 * measured on; an all-zero output (scale 0) is measured against 1. */
double eps_units(float diff, float scale);
/* eps_units(diff, scale) <= PERMUTATION_TOL_EPS */
bool equal_up_to_rounding(float diff, float scale);
/* A difference with its size in eps units, into buf: "0 (bit for bit)",
 * "2.38e-07 (0.7 eps)" or, for a real change, "0.2211 (2.6e+06 eps)".
 * Returns buf. */
const char *eps_diff_str(char *buf, size_t len, float diff, float scale);
/* "equal" when equal_up_to_rounding(diff, scale), else "DIFFERENT". */
const char *rounding_verdict(float diff, float scale);

/* "[2, 0, 1]" into buf, the list one writes in X[:, [2, 0, 1]]; after the
 * first 8 entries it ends in ", ...]". Returns buf. */
const char *permutation_str(char *buf, size_t len, const int *perm, int n);
/* true when perm[i] = i for every i < n: nothing moves. */
bool is_identity(const int *perm, int n);

/* perm (T,): a uniformly random permutation of its first n entries from
 * rng, entries n..T-1 left in place (perm[i] = i). */
void permutation_of_prefix(Rng *rng, int *perm, int n, int T);

/* true when perm[0..n) holds each of 0..n-1 exactly once. */
bool is_permutation(const int *perm, int n);

/* inverse[perm[i]] = i for i < n; perm must be a permutation. */
void permutation_inverse(const int *perm, int *inverse, int n);

/* x (any shape), dim, perm (x.shape[dim],) -> out (same shape) with
 * out[..., i, ...] = x[..., perm[i], ...] along dimension dim, like
 * x.index_select(dim, torch.tensor(perm)). Stops with a message naming the
 * function when dim is out of range or perm is not a permutation. */
Tensor *permute_along(const Tensor *x, int dim, const int *perm);

/* x (B, T, ...) -> P x, the tokens (dimension 1) reordered by perm (T,). */
Tensor *permute_tokens(const Tensor *x, const int *perm);

/* weights (..., T, T) -> P weights P^T: rows and columns (the last two
 * dimensions) both reordered by perm. This is how the attention weights of
 * self-attention move when its input tokens move. */
Tensor *permute_queries_and_keys(const Tensor *weights, const int *perm);

/* x (B, T, D) -> (B, D), the mean over the tokens: a pooled summary of the
 * sequence, invariant to reordering it up to the order of the sum. */
Tensor *mean_over_tokens(const Tensor *x);

#endif
