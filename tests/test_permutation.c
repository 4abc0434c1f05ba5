/*
 * test_permutation.c - permuting tokens (chapter 06): the helpers in
 * common/permute_tokens.c and common/positional.c, the equivariance and
 * invariance properties over many seeds and sizes, the 3x3 check of the
 * essay "Attention from several angles", and the chapter's programs.
 *
 * Legend: B = batch_size, T = tokens, K = key-value pairs, H = num_heads,
 * D = num_hiddens.
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention.h"
#include "helpers.h"
#include "multihead.h"
#include "ops.h"
#include "permute_tokens.h"
#include "positional.h"
#include "softmax.h"

/* Equal: within TOL_EPS float32 epsilons times the largest output entry,
 * the rule 06_permutation_invariance/main.c prints with. Permuting only
 * changes the order of sums over the keys, a few roundings (part 7 of the
 * chapter's program, at its largest sizes, 4 x 64 tokens of 64 hiddens,
 * measures under 4 eps over 1000 permutations). */
static const double TOL_EPS = 64.0;
/* Different: more than FAR_FACTOR times that tolerance. Over the cases
 * below, the equivariant differences stay under 0.06 of the tolerance, and
 * the real changes are at least 260 times it (the smallest: 2 tokens of
 * size 1 with a nearly uniform softmax). */
static const double FAR_FACTOR = 100.0;

static float tolerance(float scale)
{
    return (float)(TOL_EPS * FLT_EPSILON) * scale;
}

/* ---- permute_tokens.c ------------------------------------------------------- */

Test(permute_tokens, is_permutation_and_inverse)
{
    cr_expect(is_permutation((const int[]){2, 0, 1}, 3));
    cr_expect(is_permutation((const int[]){0}, 1));
    cr_expect_not(is_permutation((const int[]){0, 0, 1}, 3), "repeated entry");
    cr_expect_not(is_permutation((const int[]){0, 1, 3}, 3), "entry out of range");
    cr_expect_not(is_permutation((const int[]){-1, 0, 1}, 3), "negative entry");

    const int perm[5] = {3, 0, 4, 1, 2};
    int inverse[5], back[5];
    permutation_inverse(perm, inverse, 5);
    const int inverse_by_hand[5] = {1, 3, 4, 0, 2};   /* inverse[perm[i]] = i */
    cr_expect_arr_eq(inverse, inverse_by_hand, sizeof inverse);
    permutation_inverse(inverse, back, 5);
    cr_expect_arr_eq(back, perm, sizeof back);
}

Test(permute_tokens, rows_move_as_x_index_perm)
{
    /* x (2, 3, 2) = arange: x[b, t, k] = 6b + 2t + k. perm [2, 0, 1]
     * puts token 2 first, like x[:, [2, 0, 1]] in PyTorch. */
    Tensor *x = tensor_arange(SHAPE(2, 3, 2));
    const int perm[3] = {2, 0, 1};
    Tensor *moved = permute_tokens(x, perm);
    const float by_hand[12] = {4, 5, 0, 1, 2, 3, 10, 11, 6, 7, 8, 9};
    cr_assert(tensor_has_shape(moved, SHAPE(2, 3, 2)));
    cr_expect(floats_allclose(moved->data, by_hand, 12, 0.0f, 0.0f, stderr));

    /* Undoing with the inverse gives back exactly x. */
    int inverse[3];
    permutation_inverse(perm, inverse, 3);
    Tensor *back = permute_tokens(moved, inverse);
    cr_expect(tensor_allclose(back, x, 0.0f, 0.0f, stderr));

    /* Along the last dimension: x[..., [1, 0]] swaps the two features. */
    Tensor *swapped = permute_along(x, 2, (const int[]){1, 0});
    const float swapped_by_hand[12] = {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10};
    cr_expect(floats_allclose(swapped->data, swapped_by_hand, 12, 0.0f, 0.0f, stderr));
    /* Along the first: the two sequences trade places. */
    Tensor *batches = permute_along(x, 0, (const int[]){1, 0});
    cr_expect_eq(AT3(batches, 0, 0, 0), 6.0f);
    cr_expect_eq(AT3(batches, 1, 2, 1), 5.0f);
    tensor_free(x);
    tensor_free(moved);
    tensor_free(back);
    tensor_free(swapped);
    tensor_free(batches);
}

Test(permute_tokens, weights_move_rows_and_columns)
{
    /* A[i, j] = 10 i + j; (P A P^T)[i, j] = A[perm[i], perm[j]] */
    const float a[9] = {0, 1, 2, 10, 11, 12, 20, 21, 22};
    Tensor *A = tensor_from(a, SHAPE(1, 3, 3));
    Tensor *moved = permute_queries_and_keys(A, (const int[]){2, 0, 1});
    const float by_hand[9] = {22, 20, 21, 2, 0, 1, 12, 10, 11};
    cr_expect(floats_allclose(moved->data, by_hand, 9, 0.0f, 0.0f, stderr));
    tensor_free(A);
    tensor_free(moved);
}

Test(permute_tokens, mean_over_tokens_by_hand)
{
    /* x (2, 3, 2) = arange: the mean of tokens 0, 2, 4 (and 1, 3, 5) */
    Tensor *x = tensor_arange(SHAPE(2, 3, 2));
    Tensor *mean = mean_over_tokens(x);
    const float by_hand[4] = {2, 3, 8, 9};
    cr_assert(tensor_has_shape(mean, SHAPE(2, 2)));
    cr_expect(floats_allclose(mean->data, by_hand, 4, 1e-6f, 0.0f, stderr));
    TENSOR_FREE(x, mean);
}

Test(permute_tokens, eps_strings_and_verdicts)
{
    char buf[48];
    /* scale 2: one eps unit is 2 * FLT_EPSILON */
    cr_expect_str_eq(eps_diff_str(buf, sizeof buf, 0.0f, 2.0f), "0 (bit for bit)");
    cr_expect_str_eq(eps_diff_str(buf, sizeof buf, FLT_EPSILON, 2.0f), "1.19e-07 (0.5 eps)");
    cr_expect_str_eq(eps_diff_str(buf, sizeof buf, 0.25f, 2.0f), "0.2500 (1.0e+06 eps)");
    cr_expect_str_eq(rounding_verdict(64 * 2 * FLT_EPSILON, 2.0f), "equal");
    cr_expect_str_eq(rounding_verdict(65 * 2 * FLT_EPSILON, 2.0f), "DIFFERENT");
    cr_expect_str_eq(rounding_verdict(NAN, 2.0f), "DIFFERENT");
}

Test(permute_tokens, permutation_of_prefix_keeps_the_rest)
{
    Rng rng = rng_new(5);
    int perm[8];
    for (int trial = 0; trial < 20; trial++) {
        permutation_of_prefix(&rng, perm, 3, 8);
        cr_expect(is_permutation(perm, 3), "the first 3 are a permutation of 0..2");
        for (int i = 3; i < 8; i++)
            cr_expect_eq(perm[i], i);
    }
}

static Tensor *bad_x;   /* reachable from a global, so the death test leaks nothing */

static void permute_by_0_2_2(void)
{
    bad_x = tensor_zeros(SHAPE(1, 3, 2));
    permute_tokens(bad_x, (const int[]){0, 2, 2});
}

Test(permute_tokens, not_a_permutation_stops)
{
    expect_stops_with(permute_by_0_2_2,
                      "permute_along: perm is not a permutation of 0..2 (dimension 1 has size 3)\n");
}

/* ---- positional.c ------------------------------------------------------------ */

Test(positional, values_by_hand)
{
    /* D = 4: columns (0, 1) turn at frequency 1, columns (2, 3) at
     * 1 / 10000^(2/4) = 0.01. */
    Tensor *P = positional_encoding(4, 4);
    const float by_hand[16] = {
        0.0f,          1.0f,          0.0f,          1.0f,           /* position 0 */
        0.84147098f,   0.54030231f,   0.00999983f,   0.99995000f,    /* sin 1, cos 1, sin .01, cos .01 */
        0.90929743f,  -0.41614684f,   0.01999867f,   0.99980001f,    /* sin 2, cos 2, sin .02, cos .02 */
        0.14112001f,  -0.98999250f,   0.02999550f,   0.99955003f,    /* sin 3, cos 3, sin .03, cos .03 */
    };
    cr_assert(tensor_has_shape(P, SHAPE(4, 4)));
    cr_expect(floats_allclose(P->data, by_hand, 16, 1e-7f, 1e-6f, stderr));
    tensor_free(P);

    /* D = 6: the middle pair turns at 1 / 10000^(1/3) = 0.0464158883 */
    P = positional_encoding(8, 6);
    cr_expect(fabsf(AT2(P, 1, 2) - 0.04639922f) < 1e-7f, "P[1, 2] = %.8f", (double)AT2(P, 1, 2));
    cr_expect(fabsf(AT2(P, 7, 4) - 0.01508047f) < 1e-7f, "P[7, 4] = %.8f", (double)AT2(P, 7, 4));
    cr_expect(fabsf(AT2(P, 7, 5) - (float)cos(7.0 / 464.15888336127788)) < 1e-7f);
    tensor_free(P);

    /* D = 3 is odd: the last column is a sine without its cosine. */
    P = positional_encoding(6, 3);
    cr_expect(fabsf(AT2(P, 5, 2) - 0.01077197f) < 1e-7f, "P[5, 2] = %.8f", (double)AT2(P, 5, 2));
    cr_expect(fabsf(AT2(P, 5, 1) - (float)cos(5.0)) < 1e-7f);
    tensor_free(P);
}

Test(positional, add_to_every_sequence)
{
    Rng rng = rng_new(11);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 5, 4));
    Tensor *with_pos = add_positional_encoding(x);
    Tensor *P = positional_encoding(5, 4);
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 5; t++)
            for (int k = 0; k < 4; k++)
                cr_expect_eq(AT3(with_pos, b, t, k), AT3(x, b, t, k) + AT2(P, t, k),
                             "[%d, %d, %d]", b, t, k);
    tensor_free(x);
    tensor_free(with_pos);
    tensor_free(P);
}

/* ---- properties over seeds and sizes -------------------------------------- */

typedef struct {
    int B, T, K, D, H;
} Size;

static const Size sizes[] = {
    {1, 2, 2, 1, 1}, {2, 3, 4, 4, 2}, {2, 6, 5, 8, 2}, {3, 7, 3, 12, 3},
    {1, 16, 9, 16, 4}, {2, 33, 17, 20, 5}, {1, 64, 40, 32, 8},
};
enum { NUM_SIZES = sizeof sizes / sizeof sizes[0], NUM_SEEDS = 8 };

/* Input spread: 3 makes the softmax sharp, 0.5 nearly uniform. */
static float input_std(int seed)
{
    static const float stds[3] = {1.0f, 3.0f, 0.5f};
    return stds[seed % 3];
}

/* A random permutation of n that moves at least one element. */
static void moving_permutation(Rng *rng, int *perm, int n)
{
    bool identity = true;
    while (identity) {
        rng_permutation(rng, perm, n);
        for (int i = 0; i < n; i++)
            identity = identity && perm[i] == i;
    }
}

/* Shared per case: inputs, a layer and a permutation. */
typedef struct {
    Size s;
    Tensor *X;                 /* (B, T, D) */
    MultiHeadAttention *layer;
    int perm[64];              /* a moving permutation of T */
} Case;

static Case case_new(int size_index, int seed)
{
    Case c = {.s = sizes[size_index]};
    Rng rng = rng_new_stream((uint64_t)seed, (uint64_t)size_index + 100);
    c.X = tensor_normal(&rng, 0.0f, input_std(seed), SHAPE(c.s.B, c.s.T, c.s.D));
    c.layer = multihead_new(c.s.D, c.s.D, c.s.D, c.s.D, c.s.H, 0.0f, true, &rng);
    moving_permutation(&rng, c.perm, c.s.T);
    return c;
}

static void case_free(Case *c)
{
    tensor_free(c->X);
    multihead_free(c->layer);
}

static Tensor *plain(const Tensor *X, Tensor **weights)
{
    return dot_product_attention(X, X, X, NULL, NULL, weights);
}

static Tensor *layer_self(const MultiHeadAttention *layer, const Tensor *X,
                          const ValidLens *valid_lens, Tensor **weights)
{
    return multihead_forward(layer, X, X, X, valid_lens, false, NULL, weights);
}

/* max |f(P X) - P f(X)| <= tolerance(max |f(X)|), with a report */
static void expect_equivariant(const Tensor *fX, const Tensor *fPX, const int *perm,
                               const char *what, int size_index, int seed)
{
    Tensor *P_fX = permute_tokens(fX, perm);
    float diff = tensor_max_abs_diff(fPX, P_fX);
    float tol = tolerance(tensor_max_abs(fX));
    cr_expect(diff <= tol, "%s, size %d, seed %d: max |f(PX) - P f(X)| = %g > %g",
              what, size_index, seed, (double)diff, (double)tol);
    tensor_free(P_fX);
}

Test(permutation, self_attention_is_equivariant)
{
    for (int si = 0; si < NUM_SIZES; si++)
        for (int seed = 0; seed < NUM_SEEDS; seed++) {
            Case c = case_new(si, seed);
            Tensor *PX = permute_tokens(c.X, c.perm);
            Tensor *w = NULL, *w_PX = NULL;
            Tensor *fX = plain(c.X, &w), *fPX = plain(PX, &w_PX);
            expect_equivariant(fX, fPX, c.perm, "plain attention", si, seed);
            /* the weights move as P A P^T, within rounding of a softmax */
            Tensor *moved = permute_queries_and_keys(w, c.perm);
            cr_expect(tensor_allclose(w_PX, moved, 1e-7f, 1e-5f, stderr),
                      "weights, size %d, seed %d", si, seed);
            /* and f(P X) = f(X) is false: some token really moved */
            float inv = tensor_max_abs_diff(fPX, fX);
            cr_expect(inv > (float)FAR_FACTOR * tolerance(tensor_max_abs(fX)),
                      "size %d, seed %d: f(PX) = f(X) should fail, diff %g", si, seed,
                      (double)inv);
            tensor_free(PX);
            tensor_free(w);
            tensor_free(w_PX);
            tensor_free(fX);
            tensor_free(fPX);
            tensor_free(moved);
            case_free(&c);
        }
}

Test(permutation, multihead_layer_is_equivariant)
{
    for (int si = 0; si < NUM_SIZES; si++)
        for (int seed = 0; seed < NUM_SEEDS; seed++) {
            Case c = case_new(si, seed);
            Tensor *PX = permute_tokens(c.X, c.perm);
            Tensor *w = NULL, *w_PX = NULL;
            Tensor *fX = layer_self(c.layer, c.X, NULL, &w);
            Tensor *fPX = layer_self(c.layer, PX, NULL, &w_PX);
            expect_equivariant(fX, fPX, c.perm, "multi-head layer", si, seed);
            /* weights (B, H, T, T): every head moves as P A_h P^T */
            Tensor *moved = permute_queries_and_keys(w, c.perm);
            cr_expect(tensor_allclose(w_PX, moved, 1e-7f, 1e-5f, stderr),
                      "per-head weights, size %d, seed %d", si, seed);
            tensor_free(PX);
            tensor_free(w);
            tensor_free(w_PX);
            tensor_free(fX);
            tensor_free(fPX);
            tensor_free(moved);
            case_free(&c);
        }
}

Test(permutation, key_value_pairs_together_invariant_keys_alone_not)
{
    for (int si = 0; si < NUM_SIZES; si++)
        for (int seed = 0; seed < NUM_SEEDS; seed++) {
            Case c = case_new(si, seed);
            const Size s = c.s;
            Rng rng = rng_new_stream((uint64_t)seed, 7);
            Tensor *queries = tensor_normal(&rng, 0.0f, input_std(seed), SHAPE(s.B, s.T, s.D));
            Tensor *keys = tensor_normal(&rng, 0.0f, input_std(seed), SHAPE(s.B, s.K, s.D));
            Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(s.B, s.K, s.D));
            int perm[64];
            moving_permutation(&rng, perm, s.K);
            Tensor *P_keys = permute_tokens(keys, perm), *P_values = permute_tokens(values, perm);

            for (int use_layer = 0; use_layer < 2; use_layer++) {
                Tensor *out, *both, *keys_only;
                if (use_layer) {
                    out = multihead_forward(c.layer, queries, keys, values, NULL, false, NULL, NULL);
                    both = multihead_forward(c.layer, queries, P_keys, P_values, NULL, false, NULL, NULL);
                    keys_only = multihead_forward(c.layer, queries, P_keys, values, NULL, false, NULL, NULL);
                } else {
                    out = dot_product_attention(queries, keys, values, NULL, NULL, NULL);
                    both = dot_product_attention(queries, P_keys, P_values, NULL, NULL, NULL);
                    keys_only = dot_product_attention(queries, P_keys, values, NULL, NULL, NULL);
                }
                const float tol = tolerance(tensor_max_abs(out));
                float d_both = tensor_max_abs_diff(both, out);
                float d_keys = tensor_max_abs_diff(keys_only, out);
                cr_expect(d_both <= tol, "%s, size %d, seed %d: pairs moved together differ by %g > %g",
                          use_layer ? "layer" : "plain", si, seed, (double)d_both, (double)tol);
                cr_expect(d_keys > (float)FAR_FACTOR * tol,
                          "%s, size %d, seed %d: keys moved alone differ by only %g (tol %g)",
                          use_layer ? "layer" : "plain", si, seed, (double)d_keys, (double)tol);
                tensor_free(out);
                tensor_free(both);
                tensor_free(keys_only);
            }
            tensor_free(queries);
            tensor_free(keys);
            tensor_free(values);
            tensor_free(P_keys);
            tensor_free(P_values);
            case_free(&c);
        }
}

Test(permutation, pooled_output_is_invariant)
{
    for (int si = 0; si < NUM_SIZES; si++)
        for (int seed = 0; seed < NUM_SEEDS; seed++) {
            Case c = case_new(si, seed);
            Tensor *PX = permute_tokens(c.X, c.perm);
            Tensor *fX = layer_self(c.layer, c.X, NULL, NULL);
            Tensor *fPX = layer_self(c.layer, PX, NULL, NULL);
            Tensor *pooled = mean_over_tokens(fX), *pooled_P = mean_over_tokens(fPX);
            /* The mean adds T more terms in a new order: the tolerance is
             * taken on the unpooled output, whose entries are the terms. */
            float diff = tensor_max_abs_diff(pooled, pooled_P);
            float tol = tolerance(tensor_max_abs(fX));
            cr_expect(diff <= tol, "size %d, seed %d: pooled outputs differ by %g > %g",
                      si, seed, (double)diff, (double)tol);
            tensor_free(PX);
            tensor_free(fX);
            tensor_free(fPX);
            tensor_free(pooled);
            tensor_free(pooled_P);
            case_free(&c);
        }
}

Test(permutation, positional_encoding_breaks_equivariance)
{
    for (int si = 0; si < NUM_SIZES; si++)
        for (int seed = 0; seed < NUM_SEEDS; seed++) {
            Case c = case_new(si, seed);
            Tensor *PX = permute_tokens(c.X, c.perm);
            Tensor *X_pos = add_positional_encoding(c.X), *PX_pos = add_positional_encoding(PX);
            Tensor *gX = layer_self(c.layer, X_pos, NULL, NULL);
            Tensor *gPX = layer_self(c.layer, PX_pos, NULL, NULL);
            Tensor *P_gX = permute_tokens(gX, c.perm);
            float diff = tensor_max_abs_diff(gPX, P_gX);
            float tol = tolerance(tensor_max_abs(gX));
            cr_expect(diff > (float)FAR_FACTOR * tol,
                      "size %d, seed %d: with positions, g(PX) and P g(X) differ by only %g (tol %g)",
                      si, seed, (double)diff, (double)tol);
            tensor_free(PX);
            tensor_free(X_pos);
            tensor_free(PX_pos);
            tensor_free(gX);
            tensor_free(gPX);
            tensor_free(P_gX);
            case_free(&c);
        }
}

Test(permutation, valid_lens_inside_prefix_holds_across_it_breaks)
{
    for (int si = 0; si < NUM_SIZES; si++)
        for (int seed = 0; seed < NUM_SEEDS; seed++) {
            Case c = case_new(si, seed);
            const Size s = c.s;
            if (s.T < 3) {
                case_free(&c);
                continue;
            }
            Rng rng = rng_new_stream((uint64_t)seed, 9);
            /* one length per sequence, all leaving at least one pad */
            const int L = 1 + (int)rng_below(&rng, (uint32_t)(s.T - 1));
            int lens[8];
            for (int b = 0; b < s.B; b++)
                lens[b] = L;
            ValidLens *valid_lens = valid_lens_1d(lens, s.B);

            int perm[64];
            rng_permutation(&rng, perm, L);   /* inside the prefix, the rest stays */
            for (int i = L; i < s.T; i++)
                perm[i] = i;
            Tensor *fX = layer_self(c.layer, c.X, valid_lens, NULL);
            Tensor *PX = permute_tokens(c.X, perm);
            Tensor *fPX = layer_self(c.layer, PX, valid_lens, NULL);
            expect_equivariant(fX, fPX, perm, "permutation inside the valid prefix", si, seed);

            /* swap a valid position with a padding position */
            int i = (int)rng_below(&rng, (uint32_t)L);
            int j = L + (int)rng_below(&rng, (uint32_t)(s.T - L));
            int tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
            Tensor *QX = permute_tokens(c.X, perm);
            Tensor *fQX = layer_self(c.layer, QX, valid_lens, NULL);
            Tensor *Q_fX = permute_tokens(fX, perm);
            float diff = tensor_max_abs_diff(fQX, Q_fX);
            float tol = tolerance(tensor_max_abs(fX));
            cr_expect(diff > (float)FAR_FACTOR * tol,
                      "size %d, seed %d, valid_len %d: padding moved in, but diff only %g (tol %g)",
                      si, seed, L, (double)diff, (double)tol);
            tensor_free(fX);
            tensor_free(PX);
            tensor_free(fPX);
            tensor_free(QX);
            tensor_free(fQX);
            tensor_free(Q_fX);
            valid_lens_free(valid_lens);
            case_free(&c);
        }
}

/* ---- the measuring helpers the chapter's program prints with ----------------- */

/* self_attend and equivariance_gap give exactly what the direct
 * computation gives, and the identity moves nothing, bit for bit. */
Test(permute_tokens, self_attend_and_equivariance_gap_as_computed_by_hand)
{
    for (int si = 1; si < 4; si++)
        for (int seed = 0; seed < 3; seed++) {
            Case c = case_new(si, seed);
            for (int with_layer = 0; with_layer < 2; with_layer++) {
                const MultiHeadAttention *layer = with_layer ? c.layer : NULL;
                Tensor *w = NULL, *w_PX = NULL;
                Tensor *fX = self_attend(layer, c.X, NULL, &w);
                Tensor *direct = layer ? layer_self(layer, c.X, NULL, NULL) : plain(c.X, NULL);
                cr_expect(tensor_allclose(fX, direct, 0.0f, 0.0f, stderr));
                cr_expect_eq(w->ndim, layer ? 4 : 3);
                float moved = -1.0f;
                const float gap = equivariance_gap(layer, c.X, fX, NULL, c.perm, &moved, &w_PX);
                Tensor *PX = permute_tokens(c.X, c.perm);
                Tensor *fPX = layer ? layer_self(layer, PX, NULL, NULL) : plain(PX, NULL);
                Tensor *P_fX = permute_tokens(fX, c.perm);
                cr_expect_eq(gap, tensor_max_abs_diff(fPX, P_fX), "size %d seed %d", si, seed);
                cr_expect_eq(moved, tensor_max_abs_diff(fPX, fX));
                cr_expect(gap <= tolerance(tensor_max_abs(fX)));
                cr_expect(moved > (float)FAR_FACTOR * tolerance(tensor_max_abs(fX)));
                int identity[64];
                for (int t = 0; t < c.s.T; t++)
                    identity[t] = t;
                cr_expect_eq(equivariance_gap(layer, c.X, fX, NULL, identity, &moved, NULL), 0.0f);
                cr_expect_eq(moved, 0.0f);
                TENSOR_FREE(w, w_PX, fX, direct, PX, fPX, P_fX);
            }
            case_free(&c);
        }
}

/* The scores of P X are the scores of X moved, bit for bit (the same terms
 * in the same order); the output differs by rounding only, and by exactly
 * what equivariance_gap measures. */
Test(permute_tokens, attention_pass_gaps_scores_exact)
{
    for (int si = 0; si < NUM_SIZES; si++) {
        Case c = case_new(si, 1);
        const AttentionPassGaps gaps = attention_pass_gaps(c.X, c.perm);
        Tensor *fX = plain(c.X, NULL);
        cr_expect_eq(gaps.scores, 0.0f, "size %d: %g", si, (double)gaps.scores);
        cr_expect(gaps.weights <= 1e-6f, "size %d: %g", si, (double)gaps.weights);
        cr_expect_eq(gaps.output, equivariance_gap(NULL, c.X, fX, NULL, c.perm, NULL, NULL));
        tensor_free(fX);
        case_free(&c);
    }
}

/* equivariance_table counts f(P X) = f(X) only for the identity: with 2
 * tokens, replaying the same draws, it counts exactly the identity draws. */
Test(permute_tokens, equivariance_table_counts_identities, .init = cr_redirect_stdout)
{
    Case c = case_new(0, 3);   /* 2 tokens: half the draws are the identity */
    enum { TRIALS = 16 };
    Rng rng = rng_new(11), replay = rng_new(11);
    int first[2];
    const EquivarianceTally tally = equivariance_table(NULL, c.X, TRIALS, &rng, first);
    int identities = 0, perm[2], first_drawn[2];
    for (int trial = 0; trial < TRIALS; trial++) {
        rng_permutation(&replay, perm, 2);
        identities += perm[0] == 0;
        if (trial == 0)
            memcpy(first_drawn, perm, sizeof perm);
    }
    Tensor *fX = plain(c.X, NULL);
    cr_expect(identities > 0 && identities < TRIALS, "seed 11 should draw both");
    cr_expect_eq(tally.kept, identities);
    cr_expect(tally.holds);
    cr_expect_eq(tally.scale, tensor_max_abs(fX));
    cr_expect(tally.worst <= tolerance(tally.scale));
    cr_expect_arr_eq(first, first_drawn, sizeof first);
    tensor_free(fX);
    case_free(&c);
}

/* The statistics agree with equivariance_gap on the same draws. */
Test(permute_tokens, equivariance_statistics_replayed)
{
    Case c = case_new(2, 0);
    enum { SAMPLES = 50 };
    Tensor *fX = plain(c.X, NULL);
    const float scale = tensor_max_abs(fX);
    Rng rng = rng_new(5), replay = rng_new(5);
    int perm[64];
    const EquivarianceStats stats = equivariance_statistics(NULL, c.X, fX, SAMPLES, perm, &rng);
    int exact = 0;
    double worst = 0.0, total = 0.0;
    for (int s = 0; s < SAMPLES; s++) {
        int drawn[64];
        rng_permutation(&replay, drawn, c.s.T);
        const double units = eps_units(equivariance_gap(NULL, c.X, fX, NULL, drawn, NULL, NULL),
                                       scale);
        exact += units == 0.0;
        worst = fmax(worst, units);
        total += units;
        if (s == SAMPLES - 1)
            cr_expect_arr_eq(perm, drawn, (size_t)c.s.T * sizeof *perm, "the last draw");
    }
    cr_expect_eq(stats.exact, exact);
    cr_expect_eq(stats.worst, worst);
    cr_expect(fabs(stats.mean - total / SAMPLES) < 1e-12);
    cr_expect(stats.worst <= TOL_EPS && stats.mean <= stats.worst);
    tensor_free(fX);
    case_free(&c);
}

/* Moving the key-value pairs together is reported equal. */
Test(permute_tokens, key_value_moves_table_together_equal, .init = cr_redirect_stdout)
{
    for (int si = 1; si < NUM_SIZES; si++) {
        Case c = case_new(si, 2);
        Rng rng = rng_new_stream(2, 7);
        Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(c.s.B, c.s.T, c.s.D));
        Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(c.s.B, c.s.K, c.s.D));
        Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(c.s.B, c.s.K, c.s.D));
        int perm[64];
        moving_permutation(&rng, perm, c.s.K);
        cr_expect(key_value_moves_table(c.layer, queries, keys, values, perm), "size %d", si);
        TENSOR_FREE(queries, keys, values);
        case_free(&c);
    }
}

/* ---- the 3x3 check ------------------------------------------- */

Test(permutation, essay_three_tokens_reproduced)
{
    /* The essay's q (printed to 4 decimals) and its printed outputs. Its
     * attention is softmax(q q^T) q, without the 1/sqrt(d). */
    const float q_values[9] = {0.8063f, 0.5281f, 2.7724f, 1.4511f, -0.4305f, 1.3205f,
                               1.3092f, -0.5249f, -1.0714f};
    const float printed_attention[9] = {0.8178f, 0.5111f, 2.7465f, 1.0429f, 0.1725f, 2.2049f,
                                        1.3184f, -0.5126f, -0.8610f};
    const float printed_permuted_attention[9] = {1.3184f, -0.5126f, -0.8610f, 1.0429f, 0.1725f,
                                                 2.2049f, 0.8178f, 0.5111f, 2.7465f};
    const int reverse[3] = {2, 1, 0};
    Tensor *q = tensor_from(q_values, SHAPE(3, 3));
    Tensor *permuted = permute_along(q, 0, reverse);
    Tensor *results[2];
    const Tensor *inputs[2] = {q, permuted};
    for (int r = 0; r < 2; r++) {
        Tensor *inner = matmul_bt(inputs[r], inputs[r]);
        Tensor *weights = softmax(inner);
        results[r] = matmul(weights, inputs[r]);
        tensor_free(inner);
        tensor_free(weights);
    }
    /* 1e-4: the printed input was rounded to 4 decimals (the largest
     * difference is 6.7e-5) */
    cr_expect(floats_allclose(results[0]->data, printed_attention, 9, 1e-4f, 0.0f, stderr));
    cr_expect(floats_allclose(results[1]->data, printed_permuted_attention, 9, 1e-4f, 0.0f, stderr));
    /* and the same through the library's scaled attention, once the
     * queries carry the sqrt(d) that dot_product_attention divides out */
    Tensor *q3 = tensor_from(q_values, SHAPE(1, 3, 3));
    Tensor *q_scaled = tensor_copy(q3);
    for (size_t i = 0; i < q_scaled->size; i++)
        q_scaled->data[i] *= sqrtf(3.0f);
    Tensor *lib = dot_product_attention(q_scaled, q3, q3, NULL, NULL, NULL);
    cr_expect(floats_allclose(lib->data, printed_attention, 9, 1e-4f, 0.0f, stderr));
    tensor_free(q);
    tensor_free(permuted);
    tensor_free(results[0]);
    tensor_free(results[1]);
    tensor_free(q3);
    tensor_free(q_scaled);
    tensor_free(lib);
}

/* ---- the chapter's programs ------------------------------------------------ */

static const char PROGRAM[] = "06_permutation_invariance/permutation_invariance";

/* The number printed after marker in out, or NAN. */
static double number_after(const char *out, const char *marker)
{
    const char *p = out ? strstr(out, marker) : NULL;
    return p ? strtod(p + strlen(marker), NULL) : NAN;
}

/* How many differences in text are real changes: "(2.6e+06 eps)", a
 * difference of 100,000 eps or more, where rounding gives a few eps. */
static int real_changes(const char *text)
{
    int n = 0;
    for (const char *p = strstr(text, " eps)"); p; p = strstr(p + 1, " eps)")) {
        const char *open = p;
        while (open > text && *open != '(')
            open--;
        n += strtod(open + 1, NULL) >= 1e5;
    }
    return n;
}

Test(chapter06, runs_with_defaults_and_reaches_every_verdict)
{
    /* Status 0 says every property the program checks held: the essay's
     * assert, equivariance of attention and of the layer, invariance to
     * moving key-value pairs together and of pooling, permutations inside
     * the valid prefix, identity bit for bit, rounding under tolerance. */
    RunResult r = run_program(PROGRAM, "");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect_str_empty(r.err);
    /* part 1: the essay's numbers */
    double seed_diff = number_after(r.out, "max |attention - what the essay printed|       = ");
    cr_expect(seed_diff < 1e-4 && seed_diff > 0.0, "essay difference %g", seed_diff);
    cr_expect(number_after(r.out, "max |permuted_attention - attention[[2, 1, 0]]| = ") < 1e-6);
    cr_expect(number_after(r.out, "max |permuted_attention - attention|            = ") > 1.0);
    cr_expect(strstr(r.out, "0.5110") != NULL && strstr(r.out, "0.5111") != NULL);
    /* parts 4 to 6: the three real changes (keys only, values only,
     * padding moved in) and every positional row are millions of eps */
    cr_expect_eq(real_changes(r.out), 3 + 4, "%s", r.out);
    /* part 7 */
    cr_expect_eq(number_after(r.out, "identity perm: max |f(PX) - P f(X)| = "), 0.0);
    volatile float a = 0.1f, b = 0.6f, c = 0.7f;
    /* printed with 9 digits, which name a float exactly */
    cr_expect_eq((float)number_after(r.out, "(0.1f + 0.6f) + 0.7f = "), (a + b) + c);
    cr_expect_eq((float)number_after(r.out, "0.1f + (0.6f + 0.7f) = "), a + (b + c));
    cr_expect_neq((a + b) + c, a + (b + c));
    run_result_free(&r);
}

Test(chapter06, other_sizes_and_plot)
{
    char dir[] = "/tmp/chapter06_plotXXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char args[256];
    snprintf(args, sizeof args, "--seed 3 --tokens 9 --hiddens 12 --heads 3 "
             "--valid-lens 9,9,9 --samples 50 --plot %s", dir);
    RunResult r = run_program(PROGRAM, args);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    /* three lengths, three sequences; part 4 pairs the 9 queries with
     * T - 1 = 8 key-value pairs */
    cr_expect(strstr(r.out, "valid_lens = tensor([9, 9, 9])") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "X (3, 9, 12) ~ normal(0, 1)") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "queries (3, 9, 12), keys and values (3, 8, 12)") != NULL, "%s",
              r.out);
    /* no padding: nothing is moved across it, so no padding row; part 4's
     * two real changes and part 6's 4 positional rows */
    cr_expect_eq(real_changes(r.out), 2 + 4, "%s", r.out);
    char path[512];
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/permutation_weights.%s", dir, k ? "gp" : "dat");
        cr_expect_eq(access(path, R_OK), 0, "%s was not written", path);
        unlink(path);
    }
    rmdir(dir);
    run_result_free(&r);
}

/* Part 2's table with 2 tokens: the identity leaves f(X) where it is (last
 * column exactly 0), the swap moves it. Rows: trial, perm, the equivariance
 * difference in eps, the weights difference, max |f(PX) - f(X)|. Seed 2
 * draws both among the table's 4 permutations. Part 4 still has 2
 * key-value pairs, not T - 1 = 1. */
Test(chapter06, identity_rows_move_nothing)
{
    RunResult r = run_program(PROGRAM, "--tokens 2 --seed 2");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    const char *part2 = strstr(r.out, "Part 2.");
    cr_assert(part2 != NULL);
    int identities = 0, swaps = 0;
    for (int trial = 1; trial <= 4; trial++) {
        char start[32];
        snprintf(start, sizeof start, "\n    %d  [", trial);
        const char *row = strstr(part2, start);
        cr_assert(row != NULL, "no row %d", trial);
        int first, second;
        cr_assert_eq(sscanf(row + strlen(start), "%d, %d]", &first, &second), 2);
        const char *end = strchr(row + 1, '\n');
        const char *last = end;
        while (last > row && last[-1] != ' ')
            last--;
        double moved = strtod(last, NULL);
        if (first == 0) {
            identities++;
            cr_expect_eq(moved, 0.0, "trial %d: the identity moved f(X) by %g", trial, moved);
        } else {
            swaps++;
            cr_expect_gt(moved, 1e-3, "trial %d: the swap moved f(X) by %g", trial, moved);
        }
    }
    cr_expect(identities > 0 && swaps > 0, "seed 2 should draw both: %d, %d", identities, swaps);
    cr_expect(strstr(r.out, "queries (2, 2, 8), keys and values (2, 2, 8)") != NULL, "%s",
              r.out);
    run_result_free(&r);
}

/* --valid-lens takes one length for each of 2 sequences or one per
 * sequence, and the count of lengths is the batch; the permutation inside
 * the valid prefix leaves the padding in place. */
Test(chapter06, valid_lens_one_or_per_sequence)
{
    static const struct { const char *args, *lens; int shortest; } cases[] = {
        {"--valid-lens 3", "valid_lens = tensor([3, 3])", 3},
        {"--valid-lens 6,2", "valid_lens = tensor([6, 2])", 2},
        {"--valid-lens 4,1,3", "valid_lens = tensor([4, 1, 3])", 1},
        {"--valid-lens 5,6,2,4", "valid_lens = tensor([5, 6, 2, 4])", 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        RunResult r = run_program(PROGRAM, cases[k].args);
        cr_assert_eq(r.status, 0, "%s: %s", cases[k].args, r.err);
        const char *lens = strstr(r.out, cases[k].lens);
        cr_assert(lens != NULL, "%s", r.out);
        const char *perm_text = strstr(lens, "perm = [");
        cr_assert(perm_text != NULL);
        int perm[6];
        cr_assert_eq(sscanf(perm_text, "perm = [%d, %d, %d, %d, %d, %d]", &perm[0], &perm[1],
                            &perm[2], &perm[3], &perm[4], &perm[5]), 6);
        for (int i = 0; i < 6; i++)
            if (i >= cases[k].shortest)
                cr_expect_eq(perm[i], i, "%s: padding position %d moved", cases[k].args, i);
            else
                cr_expect_lt(perm[i], cases[k].shortest);
        /* the second row moved padding in: a real change */
        cr_expect_eq(real_changes(lens), 1 + 4, "%s", r.out);
        run_result_free(&r);
    }
}

Test(chapter06, bad_options_exit_2_with_one_line)
{
    static const char *const cases[][2] = {
        {"--heads 3", "--hiddens 8 does not divide by --heads 3"},
        {"--tokens 1", "--tokens expects a whole number"},
        {"--valid-lens 7", "--valid-lens expects comma-separated whole numbers from 1 to 6, "
                           "got '7'"},
        {"--valid-lens 2,3,4,5,6", "--valid-lens takes at most 4 numbers, got '2,3,4,5,6'"},
        {"--valid-len 4", "unknown option '--valid-len'"},
        {"--samples 1001", "--samples expects a whole number from 1 to 1000"},
        {"--batch 3", "unknown option '--batch'"},
        {"--keys 4", "unknown option '--keys'"},
        {"--trials 6", "unknown option '--trials'"},
        {"--seed", "--seed needs a value"},
        {"--plot /nonexistent/dir", "/nonexistent/dir"},
        {"--shuffle", "unknown option '--shuffle'"},
    };
    expect_bad_options(PROGRAM, cases, sizeof cases / sizeof cases[0]);
    const char *const flags[] = {"--seed", "--tokens", "--hiddens", "--heads", "--valid-lens",
                                 "--samples", "--plot", "--help"};
    expect_help_lists(PROGRAM, flags, sizeof flags / sizeof flags[0]);
}

/* ---- exercise 3's worked solution ------------------------------------------ */

static long factorial(int n)
{
    return n <= 1 ? 1 : n * factorial(n - 1);
}

Test(chapter06, exercise_causal_order)
{
    /* Status 0 says the rule held at every position of every permutation. */
    RunResult r = run_program("06_permutation_invariance/exercise_causal_order", "");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    /* default perm [0, 2, 1, 3, 4]: positions 0, 3, 4 keep their output,
     * 1 and 2 do not. Rows: position, token, {tokens seen}, rule, diff. */
    const char *table = strstr(r.out, "\nposition");
    cr_assert(table != NULL);
    static const int tokens[5] = {0, 2, 1, 3, 4};
    for (int i = 0; i < 5; i++) {
        table = strchr(table + 1, '\n');
        int position, token;
        cr_assert_eq(sscanf(table, " %d %d", &position, &token), 2);
        cr_expect_eq(position, i);
        cr_expect_eq(token, tokens[i]);
        const char *end = strchr(table + 1, '\n');
        const char *last = end;
        while (last[-1] != ' ')
            last--;
        double diff = strtod(last, NULL);
        if (i == 1 || i == 2)
            cr_expect_gt(diff, 1e-3, "position %d: %g", i, diff);
        else
            cr_expect_eq(diff, 0.0, "position %d: %g", i, diff);
    }
    cr_expect_eq(number_after(r.out, "at every position: "), 1.0, "only the identity");
    cr_expect_eq(number_after(r.out, "rule was wrong: "), 0.0);
    run_result_free(&r);

    /* Position i keeps its output when perm fixes i and maps 0..i onto
     * itself: i! orders of the tokens before it times (T-1-i)! after it. */
    for (int T = 3; T <= 6; T++) {
        long kept = 0;
        for (int i = 0; i < T; i++)
            kept += factorial(i) * factorial(T - 1 - i);
        char args[64];
        snprintf(args, sizeof args, "--tokens %d --seed %d", T, T);
        r = run_program("06_permutation_invariance/exercise_causal_order", args);
        cr_expect_eq(r.status, 0, "%s: %s", args, r.err);
        const char *p = strstr(r.out, "kept their output:");
        cr_assert(p != NULL);
        long got, total;
        cr_assert_eq(sscanf(p, "kept their output: %ld of %ld", &got, &total), 2);
        cr_expect_eq(got, kept, "%s", args);
        cr_expect_eq(total, factorial(T) * T, "%s", args);
        run_result_free(&r);
    }

    r = run_program("06_permutation_invariance/exercise_causal_order", "--perm 0,1,1,2,3");
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--perm must list each of 0..4 once") != NULL, "%s", r.err);
    run_result_free(&r);
}
