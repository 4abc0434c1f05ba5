/*
 * permute_tokens.c - reordering the tokens of a sequence, and measuring
 * what it does to self-attention (introduced in chapter 06). See
 * permute_tokens.h.
 *
 * Legend: B = batch_size, T = number of tokens, D = num_hiddens,
 * H = num_heads.
 */
#include "permute_tokens.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "ops.h"

double eps_units(float diff, float scale)
{
    if (!(scale > 0.0f))
        scale = 1.0f;   /* an all-zero output: measure against 1 instead */
    return (double)diff / ((double)FLT_EPSILON * (double)scale);
}

bool equal_up_to_rounding(float diff, float scale)
{
    return eps_units(diff, scale) <= PERMUTATION_TOL_EPS;   /* false for NaN */
}

const char *eps_diff_str(char *buf, size_t len, float diff, float scale)
{
    const double units = eps_units(diff, scale);
    if (diff == 0.0f)
        snprintf(buf, len, "0 (bit for bit)");
    else if (units < 1e4)
        snprintf(buf, len, "%.2e (%.1f eps)", (double)diff, units);
    else
        snprintf(buf, len, "%.4f (%.1e eps)", (double)diff, units);
    return buf;
}

const char *rounding_verdict(float diff, float scale)
{
    return equal_up_to_rounding(diff, scale) ? "equal" : "DIFFERENT";
}

void print_gap(const char *label, float diff, float scale)
{
    char buf[48];
    printf("%s%s  %s\n", label, eps_diff_str(buf, sizeof buf, diff, scale),
           rounding_verdict(diff, scale));
}

const char *permutation_str(char *buf, size_t len, const int *perm, int n)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && used < len; i++) {
        if (i == 8) {
            used += (size_t)snprintf(buf + used, len - used, ", ...");
            break;
        }
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", perm[i]);
    }
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

void permutation_of_prefix(Rng *rng, int *perm, int n, int T)
{
    rng_permutation(rng, perm, n);
    for (int i = n; i < T; i++)
        perm[i] = i;
}

bool is_permutation(const int *perm, int n)
{
    if (n < 0 || (n > 0 && perm == NULL))
        return false;
    bool *seen = checked_calloc((size_t)n + 1, sizeof *seen);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
            ok = false;
        else
            seen[perm[i]] = true;
    }
    free(seen);
    return ok;
}

/* perm (n,) -> inverse (n,) */
void permutation_inverse(const int *perm, int *inverse, int n)
{
    if (!is_permutation(perm, n))
        die("perm is not a permutation of 0..%d", n - 1);
    /* P moves token perm[i] to position i, so undoing it moves the token at
     * position i back to perm[i]. */
    for (int i = 0; i < n; i++)
        inverse[perm[i]] = i;
}

/* x (outer..., n, inner...) -> out of the same shape, rows along dim moved */
Tensor *permute_along(const Tensor *x, int dim, const int *perm)
{
    if (dim < 0 || dim >= x->ndim) {
        char buf[64];
        die("dim %d is out of range for a tensor of shape %s", dim,
            shape_str(buf, sizeof buf, x->ndim, x->shape));
    }
    const int n = x->shape[dim];
    if (!is_permutation(perm, n))
        die("perm is not a permutation of 0..%d (dimension %d has size %d)",
            n - 1, dim, n);

    /* View x as (outer, n, inner): outer counts everything before dim,
     * inner everything after it. One "row" along dim is then inner
     * contiguous floats, and moving a row is one memcpy. */
    size_t outer = 1, inner = 1;
    for (int i = 0; i < dim; i++)
        outer *= (size_t)x->shape[i];
    for (int i = dim + 1; i < x->ndim; i++)
        inner *= (size_t)x->shape[i];

    Tensor *out = tensor_zeros(x->ndim, x->shape);
    for (size_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            const float *src_row = x->data + (o * (size_t)n + (size_t)perm[i]) * inner;
            float *dst_row = out->data + (o * (size_t)n + (size_t)i) * inner;
            memcpy(dst_row, src_row, inner * sizeof *dst_row);
        }
    return out;
}

/* x (B, T, ...) -> (B, T, ...) */
Tensor *permute_tokens(const Tensor *x, const int *perm)
{
    if (x->ndim < 2) {
        char buf[64];
        die("x expected shape (B, T, ...), got %s",
            shape_str(buf, sizeof buf, x->ndim, x->shape));
    }
    return permute_along(x, 1, perm);
}

/* weights (..., T, T) -> (..., T, T) */
Tensor *permute_queries_and_keys(const Tensor *weights, const int *perm)
{
    const int n = weights->ndim;
    if (n < 2 || weights->shape[n - 1] != weights->shape[n - 2]) {
        char buf[64];
        die("weights expected shape (..., T, T), got %s",
            shape_str(buf, sizeof buf, n, weights->shape));
    }
    /* In self-attention the queries and the keys are the same tokens, so
     * moving the tokens moves the rows (queries) and the columns (keys) of
     * the weight matrix together. */
    Tensor *rows_moved = permute_along(weights, n - 2, perm);
    Tensor *both_moved = permute_along(rows_moved, n - 1, perm);
    tensor_free(rows_moved);
    return both_moved;
}

Tensor *mean_over_tokens(const Tensor *x)
{
    if (x->ndim != 3) {
        char buf[64];
        die("x expected shape (B, T, D), got %s",
            shape_str(buf, sizeof buf, x->ndim, x->shape));
    }
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    Tensor *mean = tensor_zeros(SHAPE(B, D));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++)
                AT2(mean, b, k) += AT3(x, b, t, k) / (float)T;
    return mean;
}

/* ---- what a permutation does to self-attention ------------------------- */

/* X (B, T, D) -> (B, T, D); weights (B, T, T) or (B, H, T, T) */
Tensor *self_attend(const MultiHeadAttention *layer, const Tensor *X,
                    const ValidLens *valid_lens, Tensor **weights)
{
    if (layer == NULL)
        return dot_product_attention(X, X, X, valid_lens, NULL, weights);
    return multihead_forward(layer, X, X, X, valid_lens, false, NULL, weights);
}

/* X (B, T, D), fX (B, T, D), perm (T,) -> max |f(P X) - P f(X)| */
float equivariance_gap(const MultiHeadAttention *layer, const Tensor *X, const Tensor *fX,
                       const ValidLens *valid_lens, const int *perm, float *moved,
                       Tensor **weights_PX)
{
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fPX = self_attend(layer, PX, valid_lens, weights_PX);
    Tensor *P_fX = permute_tokens(fX, perm);
    const float gap = tensor_max_abs_diff(fPX, P_fX);
    if (moved)
        *moved = tensor_max_abs_diff(fPX, fX);
    TENSOR_FREE(PX, fPX, P_fX);
    return gap;
}

/* One row of the table: perm applied to X (B, T, D), with fX = f(X) and
 * its weights (..., T, T) already computed. */
static void equivariance_row(const MultiHeadAttention *layer, const Tensor *X, const Tensor *fX,
                             const Tensor *weights, const int *perm, int trial,
                             EquivarianceTally *tally)
{
    float moved;
    Tensor *weights_PX = NULL;
    const float gap = equivariance_gap(layer, X, fX, NULL, perm, &moved, &weights_PX);
    Tensor *P_weights_PT = permute_queries_and_keys(weights, perm);
    const float weights_diff = tensor_max_abs_diff(weights_PX, P_weights_PT);
    tally->worst = gap > tally->worst ? gap : tally->worst;
    tally->kept += equal_up_to_rounding(moved, tally->scale);
    char pbuf[64], ebuf[48], wbuf[24];
    snprintf(wbuf, sizeof wbuf, "%.2e", (double)weights_diff);
    printf("%5d  %-26s  %-28s  %-11s  %.4f\n", trial,
           permutation_str(pbuf, sizeof pbuf, perm, X->shape[1]),
           eps_diff_str(ebuf, sizeof ebuf, gap, tally->scale), weights_diff == 0.0f ? "0" : wbuf,
           (double)moved);
    TENSOR_FREE(weights_PX, P_weights_PT);
}

/* X (B, T, D) -> one table row per permutation */
EquivarianceTally equivariance_table(const MultiHeadAttention *layer, const Tensor *X,
                                     int trials, Rng *rng, int *first_perm)
{
    const int T = X->shape[1];
    Tensor *weights = NULL;
    Tensor *fX = self_attend(layer, X, NULL, &weights);
    EquivarianceTally tally = {.scale = tensor_max_abs(fX)};
    printf("max |f(X)| = %.4f, float32 epsilon = %.3g\n", (double)tally.scale,
           (double)FLT_EPSILON);
    printf("%5s  %-26s  %-28s  %-11s  %s\n", "trial", "perm", "max |f(PX) - P f(X)|",
           "weights", "max |f(PX) - f(X)|");
    int *perm = checked_malloc((size_t)T, sizeof *perm);
    for (int trial = 1; trial <= trials; trial++) {
        rng_permutation(rng, perm, T);
        if (trial == 1 && first_perm)
            memcpy(first_perm, perm, (size_t)T * sizeof *perm);
        equivariance_row(layer, X, fX, weights, perm, trial, &tally);
    }
    free(perm);
    TENSOR_FREE(fX, weights);
    tally.holds = equal_up_to_rounding(tally.worst, tally.scale);
    printf("f(P X) = P f(X): %s for every permutation (largest %.1f eps, tolerance %.0f eps)\n",
           tally.holds ? "holds" : "FAILS", eps_units(tally.worst, tally.scale),
           PERMUTATION_TOL_EPS);
    /* Only the identity, which moves nothing, can keep f(P X) = f(X). */
    printf("f(P X) = f(X): holds for %d of %d\n", tally.kept, trials);
    return tally;
}

/* X (B, T, D), fX (B, T, D), perm (T,) -> the statistics */
EquivarianceStats equivariance_statistics(const MultiHeadAttention *layer, const Tensor *X,
                                          const Tensor *fX, int samples, int *perm, Rng *rng)
{
    const float scale = tensor_max_abs(fX);
    EquivarianceStats stats = {0};
    double total = 0.0;
    for (int s = 0; s < samples; s++) {
        rng_permutation(rng, perm, X->shape[1]);
        const double units =
            eps_units(equivariance_gap(layer, X, fX, NULL, perm, NULL, NULL), scale);
        stats.exact += units == 0.0;
        stats.worst = units > stats.worst ? units : stats.worst;
        total += units;
    }
    stats.mean = samples > 0 ? total / samples : 0.0;
    return stats;
}

/* queries (B, T, D), keys and values (B, K, D), perm (K,) -> three rows */
bool key_value_moves_table(const MultiHeadAttention *layer, const Tensor *queries,
                           const Tensor *keys, const Tensor *values, const int *perm)
{
    Tensor *out = multihead_forward(layer, queries, keys, values, NULL, false, NULL, NULL);
    const float scale = tensor_max_abs(out);
    Tensor *P_keys = permute_tokens(keys, perm);
    Tensor *P_values = permute_tokens(values, perm);
    const Tensor *moved_keys[3] = {P_keys, P_keys, keys};
    const Tensor *moved_values[3] = {P_values, values, P_values};
    const char *what[3] = {"keys and values together", "keys only", "values only"};
    bool together_equal = false;
    char pbuf[64];
    printf("queries (%d, %d, %d), keys and values (%d, %d, %d), pairs moved by perm = %s\n",
           queries->shape[0], queries->shape[1], queries->shape[2], keys->shape[0],
           keys->shape[1], keys->shape[2], permutation_str(pbuf, sizeof pbuf, perm,
                                                           keys->shape[1]));
    printf("  %-26s  %-28s\n", "moved", "max |f(Q, K', V') - f(Q, K, V)|");
    for (int r = 0; r < 3; r++) {
        Tensor *moved = multihead_forward(layer, queries, moved_keys[r], moved_values[r], NULL,
                                          false, NULL, NULL);
        const float diff = tensor_max_abs_diff(moved, out);
        char dbuf[48];
        printf("  %-26s  %-28s  %s\n", what[r], eps_diff_str(dbuf, sizeof dbuf, diff, scale),
               rounding_verdict(diff, scale));
        if (r == 0)
            together_equal = equal_up_to_rounding(diff, scale);
        tensor_free(moved);
    }
    TENSOR_FREE(out, P_keys, P_values);
    return together_equal;
}

/* X (B, T, D), perm (T,) -> the three differences */
AttentionPassGaps attention_pass_gaps(const Tensor *X, const int *perm)
{
    Tensor *weights = NULL, *weights_PX = NULL;
    Tensor *fX = self_attend(NULL, X, NULL, &weights);
    AttentionPassGaps gaps;
    gaps.output = equivariance_gap(NULL, X, fX, NULL, perm, NULL, &weights_PX);
    Tensor *PX = permute_tokens(X, perm);
    Tensor *scores = matmul_bt(X, X);
    Tensor *scores_PX = matmul_bt(PX, PX);
    Tensor *scores_moved = permute_queries_and_keys(scores, perm);
    Tensor *weights_moved = permute_queries_and_keys(weights, perm);
    gaps.scores = tensor_max_abs_diff(scores_PX, scores_moved);
    gaps.weights = tensor_max_abs_diff(weights_PX, weights_moved);
    TENSOR_FREE(fX, weights, weights_PX, PX, scores, scores_PX, scores_moved, weights_moved);
    return gaps;
}
