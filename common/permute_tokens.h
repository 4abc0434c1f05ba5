/*
 * permute_tokens.h - reordering the tokens of a sequence, and measuring
 * what it does to self-attention (introduced in chapter 06).
 *
 * Legend: B = batch_size, T = number of tokens, D = num_hiddens,
 * H = num_heads, n_k = num_keys.
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

#include "multihead.h"
#include "tensor.h"
#include "valid_lens.h"

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
/* One line: label, the difference as eps_diff_str gives it, its verdict:
 * print_gap("max |f(PX) - P f(X)| = ", diff, scale) prints
 * "max |f(PX) - P f(X)| = 1.19e-07 (1.2 eps)  equal". */
void print_gap(const char *label, float diff, float scale);

/* "[2, 0, 1]" into buf, the list one writes in X[:, [2, 0, 1]]; after the
 * first 8 entries it ends in ", ...]". Returns buf. */
const char *permutation_str(char *buf, size_t len, const int *perm, int n);

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

/* ---- what a permutation does to self-attention ------------------------- */

/* X (B, T, D) -> f(X) (B, T, D) with queries = keys = values = X: plain
 * scaled dot-product attention when layer is NULL, else layer(X, X, X) in
 * evaluation mode. valid_lens NULL or (B,). When weights is not NULL,
 * *weights gets (B, T, T), or (B, H, T, T) from the layer. */
Tensor *self_attend(const MultiHeadAttention *layer, const Tensor *X,
                    const ValidLens *valid_lens, Tensor **weights);

/* X (B, T, D), fX = self_attend(layer, X, valid_lens, ...), perm (T,) ->
 * max |f(P X) - P f(X)|, the distance from equivariance. When not NULL,
 * *moved gets max |f(P X) - f(X)|, the distance from invariance, and
 * *weights_PX the weights of P X (the caller frees them). */
float equivariance_gap(const MultiHeadAttention *layer, const Tensor *X, const Tensor *fX,
                       const ValidLens *valid_lens, const int *perm, float *moved,
                       Tensor **weights_PX);

/* What equivariance_table measured. */
typedef struct {
    float scale;   /* max |f(X)|, what the eps units are relative to */
    float worst;   /* the largest max |f(P X) - P f(X)| */
    bool holds;    /* f(P X) = P f(X) up to rounding for every permutation */
    int kept;      /* permutations after which f(P X) = f(X) up to rounding */
} EquivarianceTally;

/* X (B, T, D), f as in self_attend: trials random permutations from rng,
 * printed as a table under a line giving max |f(X)|, one row each:
 *
 *     trial  perm  max |f(PX) - P f(X)|  weights  max |f(PX) - f(X)|
 *
 * where "weights" is max |weights(P X) - P A P^T|, with A the weights of X:
 * the queries and the keys are both the tokens, so rows and columns move.
 * Two verdict lines follow: f(P X) = P f(X) for every permutation, and for
 * how many f(P X) = f(X). The first permutation goes to first_perm (T,)
 * when it is not NULL. */
EquivarianceTally equivariance_table(const MultiHeadAttention *layer, const Tensor *X,
                                     int trials, Rng *rng, int *first_perm);

/* How far from equivariance, in eps units, over many permutations. */
typedef struct {
    int exact;      /* permutations with f(P X) = P f(X) bit for bit */
    double mean;    /* the mean of max |f(P X) - P f(X)|, in eps units of max |f(X)| */
    double worst;   /* the largest, in the same units */
} EquivarianceStats;

/* X (B, T, D), fX = self_attend(layer, X, NULL, ...): samples random
 * permutations drawn from rng; perm (T,) is left holding the last one. */
EquivarianceStats equivariance_statistics(const MultiHeadAttention *layer, const Tensor *X,
                                          const Tensor *fX, int samples, int *perm, Rng *rng);

/* queries (B, T, D), keys and values (B, n_k, D), perm (n_k,): the layer's
 * output when the key-value pairs move together, the keys alone and the
 * values alone, each printed as a row against the unmoved output with its
 * verdict, under a line with the shapes and perm. Returns true when moving
 * the pairs together left the output equal up to rounding, which is what
 * attention promises. */
bool key_value_moves_table(const MultiHeadAttention *layer, const Tensor *queries,
                           const Tensor *keys, const Tensor *values, const int *perm);

/* Where a permutation's rounding enters plain self-attention: X (B, T, D),
 * perm (T,) -> the largest difference after each pass of attention,
 *     scores  = max |(P X)(P X)^T - P (X X^T) P^T|
 *     weights = max |weights(P X) - P A P^T|
 *     output  = max |f(P X) - P f(X)|
 * The scores are computed without the 1/sqrt(d), which scales both sides
 * alike. */
typedef struct {
    float scores, weights, output;
} AttentionPassGaps;
AttentionPassGaps attention_pass_gaps(const Tensor *X, const int *perm);

#endif
