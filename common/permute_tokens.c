/*
 * permute_tokens.c - reordering the tokens of a sequence (introduced in
 * chapter 06). See permute_tokens.h.
 *
 * Legend: B = batch_size, T = number of tokens, D = num_hiddens.
 */
#include "permute_tokens.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool is_identity(const int *perm, int n)
{
    for (int i = 0; i < n; i++)
        if (perm[i] != i)
            return false;
    return true;
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
    bool *seen = checked_calloc("is_permutation", (size_t)n + 1, sizeof *seen);
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
        die("permutation_inverse", "perm is not a permutation of 0..%d", n - 1);
    /* P moves token perm[i] to position i, so undoing it moves the token at
     * position i back to perm[i]. */
    for (int i = 0; i < n; i++)
        inverse[perm[i]] = i;
}

/* x (outer..., n, inner...) -> out of the same shape, rows along dim moved */
Tensor *permute_along(const Tensor *x, int dim, const int *perm)
{
    static const char func[] = "permute_along";
    if (dim < 0 || dim >= x->ndim) {
        char buf[64];
        die(func, "dim %d is out of range for a tensor of shape %s", dim,
            shape_str(buf, sizeof buf, x->ndim, x->shape));
    }
    const int n = x->shape[dim];
    if (!is_permutation(perm, n))
        die(func, "perm is not a permutation of 0..%d (dimension %d has size %d)",
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
        die("permute_tokens", "x expected shape (B, T, ...), got %s",
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
        die("permute_queries_and_keys", "weights expected shape (..., T, T), got %s",
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
        die("mean_over_tokens", "x expected shape (B, T, D), got %s",
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
