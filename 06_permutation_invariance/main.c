/*
 * 06_permutation_invariance - what reordering the tokens does to attention.
 *
 * A permutation P of the tokens puts token perm[i] at position i:
 * (P X)[i] = X[perm[i]], X[:, perm] in PyTorch. A function f of a sequence
 * is
 *   equivariant  when f(P X) = P f(X): the outputs move with their tokens;
 *   invariant    when f(P X) = f(X):   the outputs do not move at all.
 * Self-attention is equivariant, not invariant. The program checks it, and
 * the cases around it, on seeded random inputs, with numbers computed here:
 *
 * Part 1: the 3-token PyTorch check of the essay "Attention from several
 *         angles", reproduced in C.
 * Part 2: scaled dot-product self-attention (Q = K = V = X).
 * Part 3: the multi-head layer of chapter 05, projections and all.
 * Part 4: invariance: move the key-value pairs and keep the queries; pool
 *         the outputs over tokens; and what breaks when keys move alone.
 * Part 5: valid_lens: permutations inside the valid prefix and across it.
 * Part 6: a positional encoding added before the layer breaks equivariance.
 * Part 7: floating point: why "equal" means equal to a tolerance.
 *
 * Legend: B = batch_size, T = number of tokens (queries), K = num_keys,
 * H = num_heads, D = num_hiddens, d = D / H.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "io/cli.h"
#include "multihead.h"
#include "ops.h"
#include "permute_tokens.h"
#include "io/plot.h"
#include "positional.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "permutation_invariance";

/* Two outputs count as equal when they differ by at most TOL_EPS float32
 * epsilons times the size of the output. Part 7 explains where differences
 * of a few epsilons come from; a real change (parts 4 to 6) is millions of
 * epsilons. tests/test_permutation.c uses the same rule. */
static const double TOL_EPS = 64.0;

/* The largest sizes: at all of them at once, with --trials and --samples
 * at their largest too, the program still ends within a few seconds. */
enum { MAX_BATCH = 4, MAX_TOKENS = 64, MAX_HIDDENS = 64, MAX_KEYS = 64, MAX_TRIALS = 20,
       MAX_SAMPLES = 1000 };

typedef struct {
    uint64_t seed;
    int batch, tokens, hiddens, heads, keys, trials, samples;
    int valid_lens[MAX_BATCH];   /* part 5's mask, one length per sequence */
    const char *plot_dir;
} Options;

static void usage(void)
{
    printf("usage: %s [options]\n"
           "\n"
           "Self-attention is permutation equivariant, f(P X) = P f(X), not invariant.\n"
           "Checks it on seeded random tokens for plain attention and the multi-head\n"
           "layer, then the invariant cases, masks, positional encoding and rounding.\n"
           "\n"
           "options:\n"
           "  --seed N        seed of every random number (default 0)\n"
           "  --batch B       sequences, 1 to %d (default 2)\n"
           "  --tokens T      tokens per sequence, 2 to %d (default 6)\n"
           "  --hiddens D     num_hiddens, 1 to %d (default 8)\n"
           "  --heads H       num_heads, must divide D (default 2)\n"
           "  --keys K        key-value pairs for the cross-attention case, 2 to %d (default 5)\n"
           "  --valid-lens L  part 5's valid tokens: B comma-separated lengths, or one for\n"
           "                  every sequence, each 1 to T (default T - 2, at least 1)\n"
           "  --trials N      random permutations per table, 1 to %d (default 4)\n"
           "  --samples N     permutations behind part 7's statistics, 1 to %d (default 1000)\n"
           "  --plot DIR      also write the heatmaps permutation_weights.dat/.gp into DIR\n"
           "  --help          this text\n", PROG, MAX_BATCH, MAX_TOKENS, MAX_HIDDENS, MAX_KEYS,
           MAX_TRIALS, MAX_SAMPLES);
}

static Options parse_options(int argc, char **argv)
{
    Options o = {.seed = 0, .batch = 2, .tokens = 6, .hiddens = 8, .heads = 2, .keys = 5,
                 .trials = 4, .samples = 1000, .plot_dir = NULL};
    const char *lens_text = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--seed"))
            o.seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
        else if (cli_is(argv[i], "--batch"))
            o.batch = (int)cli_long(PROG, "--batch", cli_value(PROG, argc, argv, &i), 1,
                                    MAX_BATCH);
        else if (cli_is(argv[i], "--tokens"))
            o.tokens = (int)cli_long(PROG, "--tokens", cli_value(PROG, argc, argv, &i), 2,
                                     MAX_TOKENS);
        else if (cli_is(argv[i], "--hiddens"))
            o.hiddens = (int)cli_long(PROG, "--hiddens", cli_value(PROG, argc, argv, &i), 1,
                                      MAX_HIDDENS);
        else if (cli_is(argv[i], "--heads"))
            o.heads = (int)cli_long(PROG, "--heads", cli_value(PROG, argc, argv, &i), 1,
                                    MAX_HIDDENS);
        else if (cli_is(argv[i], "--keys"))
            o.keys = (int)cli_long(PROG, "--keys", cli_value(PROG, argc, argv, &i), 2, MAX_KEYS);
        else if (cli_is(argv[i], "--valid-lens"))
            lens_text = cli_value(PROG, argc, argv, &i);   /* read once T and B are known */
        else if (cli_is(argv[i], "--trials"))
            o.trials = (int)cli_long(PROG, "--trials", cli_value(PROG, argc, argv, &i), 1,
                                     MAX_TRIALS);
        else if (cli_is(argv[i], "--samples"))
            o.samples = (int)cli_long(PROG, "--samples", cli_value(PROG, argc, argv, &i), 1,
                                      MAX_SAMPLES);
        else if (cli_is(argv[i], "--plot"))
            o.plot_dir = cli_value(PROG, argc, argv, &i);
        else if (cli_is(argv[i], "--help")) {
            usage();
            exit(0);
        } else
            cli_unknown(PROG, argv[i]);
    }
    if (o.hiddens % o.heads != 0)
        cli_fail(PROG, "--heads %d does not divide --hiddens %d: every head needs the same "
                 "size num_hiddens / num_heads", o.heads, o.hiddens);
    /* Part 5 permutes inside the valid prefix, so every sequence needs at
     * least one valid token: lengths from 1 to T. */
    if (lens_text == NULL) {
        for (int b = 0; b < o.batch; b++)
            o.valid_lens[b] = o.tokens > 2 ? o.tokens - 2 : 1;
    } else {
        long lens[MAX_BATCH];
        int n = cli_long_list(PROG, "--valid-lens", lens_text, 1, o.tokens, lens, MAX_BATCH);
        if (n != 1 && n != o.batch)
            cli_fail(PROG, "--valid-lens needs one length (for every sequence) or %d (one per "
                     "sequence), got %d", o.batch, n);
        for (int b = 0; b < o.batch; b++)
            o.valid_lens[b] = (int)lens[n == 1 ? 0 : b];
    }
    if (o.plot_dir)
        cli_check_dir(PROG, "--plot", o.plot_dir);
    return o;
}

/* ---- small helpers --------------------------------------------------------- */

/* "[2, 0, 1]" into buf, the list one writes in X[:, [2, 0, 1]]; long
 * permutations end in ", ...]" after the first 8 entries. */
static const char *perm_str(char *buf, size_t len, const int *perm, int n)
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

/* A difference in units of float32 epsilon (2^-23, the gap between 1 and
 * the next float) times the size of the output it was measured on: 1 unit
 * is about one rounding of the largest output entry. */
static double eps_units(float diff, float scale)
{
    if (!(scale > 0.0f))
        scale = 1.0f;   /* an all-zero output: measure against 1 instead */
    return (double)diff / ((double)FLT_EPSILON * (double)scale);
}

static bool within_tolerance(float diff, float scale)
{
    return eps_units(diff, scale) <= TOL_EPS;
}

/* "0 (bit for bit)", "2.38e-07 (0.5 eps)" or "1.2345 (4.1e+06 eps)". */
static const char *diff_str(char *buf, size_t len, float diff, float scale)
{
    double units = eps_units(diff, scale);
    if (diff == 0.0f)
        snprintf(buf, len, "0 (bit for bit)");
    else if (units < 1e4)
        snprintf(buf, len, "%.2e (%.1f eps)", (double)diff, units);
    else
        snprintf(buf, len, "%.4f (%.1e eps)", (double)diff, units);
    return buf;
}

static const char *verdict(float diff, float scale)
{
    return within_tolerance(diff, scale) ? "equal" : "DIFFERENT";
}

/* perm (T,): a uniformly random permutation of the first n entries, the
 * rest left where they are. */
static void permute_prefix(Rng *rng, int *perm, int n, int T)
{
    rng_permutation(rng, perm, n);
    for (int i = n; i < T; i++)
        perm[i] = i;
}

/* x (B, T, D) -> mean over the tokens (B, D), a pooled summary of the set */
static Tensor *mean_over_tokens(const Tensor *x)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    Tensor *mean = tensor_zeros(SHAPE(B, D));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++)
                AT2(mean, b, k) += AT3(x, b, t, k) / (float)T;
    return mean;
}

/* X (B, T, D), valid_lens NULL or (B,) -> f(X) (B, T, D): plain scaled
 * dot-product self-attention, the tokens are their own queries, keys and
 * values. weights (B, T, T) when not NULL. */
static Tensor *self_attention(const Tensor *X, const ValidLens *valid_lens, Tensor **weights)
{
    return dot_product_attention(X, X, X, valid_lens, NULL, weights);
}

/* X (B, T, D) -> layer(X, X, X) (B, T, D), in evaluation mode */
static Tensor *layer_self(const MultiHeadAttention *layer, const Tensor *X,
                          const ValidLens *valid_lens, Tensor **weights)
{
    return multihead_forward(layer, X, X, X, valid_lens, false, NULL, weights);
}

/* ---- part 1: the essay's check --------------------------------------------- */

/* The essay's function, line for line: inner = query @ key^T; softmax over
 * the last dimension; inner @ value. It does not divide by sqrt(d), unlike
 * d2l and common/attention.c; the property holds either way, because a
 * constant factor on every score moves with the scores.
 * query, key (n, d), value (n, v) -> (n, v) */
static Tensor *essay_self_attention(const Tensor *query, const Tensor *key, const Tensor *value)
{
    Tensor *inner = matmul_bt(query, key);    /* (n, n) */
    Tensor *weights = softmax(inner);         /* (n, n), rows sum to 1 */
    Tensor *out = matmul(weights, value);     /* (n, v) */
    tensor_free(inner);
    tensor_free(weights);
    return out;
}

/* q (3, 3): the essay's numbers */
static void part1_essay_check(void)
{
    printf("Part 1. The essay's check: 3 tokens, rows reversed\n\n");
    /* The essay drew q = torch.randn(3, 3) and printed it to 4 decimals;
     * these are the printed numbers. */
    static const float essay_q[9] = {
        0.8063f,  0.5281f,  2.7724f,
        1.4511f, -0.4305f,  1.3205f,
        1.3092f, -0.5249f, -1.0714f,
    };
    /* ...and what it printed for attention = self_attention(q, q, q). */
    static const float essay_printed_attention[9] = {
        0.8178f,  0.5111f,  2.7465f,
        1.0429f,  0.1725f,  2.2049f,
        1.3184f, -0.5126f, -0.8610f,
    };
    const int reverse[3] = {2, 1, 0};

    printf("softmax(Q K^T) V with Q = K = V = q, without the 1/sqrt(d) of later chapters,\n"
           "exactly as the essay's PyTorch code computes it.\n");
    Tensor *q = tensor_from(essay_q, SHAPE(3, 3));
    tensor_print_named("q", q);
    Tensor *attention = essay_self_attention(q, q, q);
    tensor_print_named("attention", attention);

    Tensor *permuted = permute_along(q, 0, reverse);   /* q[[2, 1, 0]] */
    tensor_print_named("permuted = q[[2, 1, 0]]", permuted);
    Tensor *permuted_attention = essay_self_attention(permuted, permuted, permuted);
    tensor_print_named("permuted_attention", permuted_attention);

    Tensor *attention_moved = permute_along(attention, 0, reverse);
    Tensor *printed = tensor_from(essay_printed_attention, SHAPE(3, 3));
    printf("\nThe essay's assert: allclose(attention[[2, 1, 0]], permuted_attention)\n");
    printf("  max |permuted_attention - attention[[2, 1, 0]]| = %g\n",
           (double)tensor_max_abs_diff(permuted_attention, attention_moved));
    printf("  max |permuted_attention - attention|            = %.4f\n",
           (double)tensor_max_abs_diff(permuted_attention, attention));
    printf("  max |attention - what the essay printed|       = %.6f\n",
           (double)tensor_max_abs_diff(attention, printed));
    printf("The assert compares f(P X) with P f(X): the outputs moved with their tokens.\n"
           "That is equivariance. The essay calls it invariance, which would mean\n"
           "f(P X) = f(X), and the second line shows that is false.\n");
    /* The essay printed its input to 4 decimals and computed with all the
     * digits, so a printed output can differ in its last digit. */
    printf("The essay's input was printed to 4 decimals, so its printout can differ from\n"
           "ours in the last digit:");
    int mismatches = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            char ours[16], theirs[16];
            snprintf(ours, sizeof ours, "%.4f", (double)AT2(attention, i, j));
            snprintf(theirs, sizeof theirs, "%.4f", (double)AT2(printed, i, j));
            if (strcmp(ours, theirs) != 0) {
                printf("%s attention[%d, %d] is %s here, %s there", mismatches ? ";" : "",
                       i, j, ours, theirs);
                mismatches++;
            }
        }
    printf("%s.\n\n", mismatches ? "" : " none does");

    tensor_free(q);
    tensor_free(attention);
    tensor_free(permuted);
    tensor_free(permuted_attention);
    tensor_free(attention_moved);
    tensor_free(printed);
}

/* ---- parts 2 and 3: equivariance ------------------------------------------- */

/* Draw opts->trials permutations and print, for each, how far f(P X) is
 * from P f(X) and from f(X); also whether the weights moved as P A P^T.
 * f is plain self-attention when layer is NULL, else the layer.
 * X (B, T, D). With first_perm not NULL, the first permutation is copied
 * there. */
static void equivariance_table(const Options *opts, const MultiHeadAttention *layer,
                               const Tensor *X, Rng *rng, int *first_perm)
{
    const int T = X->shape[1];
    Tensor *weights = NULL;
    Tensor *fX = layer ? layer_self(layer, X, NULL, &weights) : self_attention(X, NULL, &weights);
    const float scale = tensor_max_abs(fX);
    printf("max |f(X)| = %.4f: differences are also given in eps units, float32 epsilon\n"
           "(%.3g) times that size. weights: max |weights(P X) - P A P^T|.\n",
           (double)scale, (double)FLT_EPSILON);
    printf("%5s  %-26s  %-28s  %-11s  %s\n", "trial", "perm",
           "max |f(PX) - P f(X)|", "weights", "max |f(PX) - f(X)|");

    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    float worst = 0.0f;
    int moved = 0, identities = 0;   /* trials where f(P X) != f(X); identity perms drawn */
    for (int trial = 1; trial <= opts->trials; trial++) {
        rng_permutation(rng, perm, T);
        bool identity = true;
        for (int i = 0; i < T; i++)
            identity = identity && perm[i] == i;
        identities += identity;
        if (trial == 1 && first_perm)
            memcpy(first_perm, perm, (size_t)T * sizeof *perm);
        Tensor *PX = permute_tokens(X, perm);
        Tensor *weights_PX = NULL;
        Tensor *fPX = layer ? layer_self(layer, PX, NULL, &weights_PX)
                            : self_attention(PX, NULL, &weights_PX);
        Tensor *P_fX = permute_tokens(fX, perm);
        /* Weights (..., T, T): the queries are the tokens and so are the
         * keys, so both the rows and the columns move. */
        Tensor *P_weights_PT = permute_queries_and_keys(weights, perm);

        float equi = tensor_max_abs_diff(fPX, P_fX);
        float weights_diff = tensor_max_abs_diff(weights_PX, P_weights_PT);
        float inv = tensor_max_abs_diff(fPX, fX);
        if (equi > worst)
            worst = equi;
        moved += !within_tolerance(inv, scale);
        char pbuf[64], ebuf[48], wbuf[24];
        snprintf(wbuf, sizeof wbuf, "%.2e", (double)weights_diff);
        printf("%5d  %-26s  %-28s  %-11s  %.4f\n", trial, perm_str(pbuf, sizeof pbuf, perm, T),
               diff_str(ebuf, sizeof ebuf, equi, scale), weights_diff == 0.0f ? "0" : wbuf,
               (double)inv);
        tensor_free(PX);
        tensor_free(weights_PX);
        tensor_free(fPX);
        tensor_free(P_fX);
        tensor_free(P_weights_PT);
    }
    printf("f(P X) = P f(X): %s for every permutation (largest difference %.1f eps,\n"
           "tolerance %.0f eps). ", eps_units(worst, scale) <= TOL_EPS ? "holds" : "FAILS",
           eps_units(worst, scale), TOL_EPS);
    /* Invariance, judged by the same rule on the last column. The identity
     * moves nothing, so for it f(P X) = f(X) holds trivially. */
    const int kept = opts->trials - moved;
    if (kept == 0)
        printf("f(P X) = f(X): false, the outputs moved with their tokens.\n");
    else if (moved > 0)
        printf("f(P X) = f(X): false for %d of the %d permutations;\n"
               "it held for the other %d, %s.\n", moved, opts->trials, kept,
               identities < kept ? "whose outputs did not move"
               : kept == 1      ? "the identity, which moves nothing"
                                : "each the identity, which moves nothing");
    else if (identities == opts->trials)
        printf("f(P X) = f(X) held too, but only because every\n"
               "permutation drawn was the identity, which moves nothing: try more --trials.\n");
    else
        printf("f(P X) = f(X) held too: no output moved.\n");
    free(perm);
    tensor_free(fX);
    tensor_free(weights);
}

/* Sequence 0's weights for X and for P X side by side in the terminal, and
 * with --plot all three matrices in one figure. */
static int show_weights(const Options *opts, const Tensor *X, const int *perm)
{
    const int T = X->shape[1];
    Tensor *weights = NULL, *weights_PX = NULL;
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fX = self_attention(X, NULL, &weights);
    Tensor *fPX = self_attention(PX, NULL, &weights_PX);
    Tensor *moved = permute_queries_and_keys(weights, perm);

    /* (3, T, T): sequence 0 of each, stacked for one figure */
    Tensor *panels = tensor_zeros(SHAPE(3, T, T));
    const size_t n = (size_t)T * (size_t)T;
    memcpy(panels->data, weights->data, n * sizeof(float));
    memcpy(panels->data + n, weights_PX->data, n * sizeof(float));
    memcpy(panels->data + 2 * n, moved->data, n * sizeof(float));
    Tensor *A = tensor_from(panels->data, SHAPE(T, T));
    Tensor *A_PX = tensor_from(panels->data + n, SHAPE(T, T));

    char pbuf[64];
    printf("\nSequence 0's attention weights, queries down, keys across. Moving the\n"
           "tokens by perm = %s moves the rows and the columns together:\n"
           "weights(P X) = P A P^T, the same picture with its rows and columns relabelled.\n",
           perm_str(pbuf, sizeof pbuf, perm, T));
    heatmap_terminal(stdout, A, "A = weights(X)");
    heatmap_terminal(stdout, A_PX, "weights(P X)");

    int status = 0;
    if (opts->plot_dir) {
        const char *titles[3] = {"A = weights(X)", "weights(P X)", "P A P^T"};
        status = plot_heatmaps(opts->plot_dir, "permutation_weights", panels, "keys", "queries", titles);
        if (status == 0)
            printf("wrote %s/permutation_weights.dat and .gp (render with gnuplot)\n",
                   opts->plot_dir);
    }
    tensor_free(PX);
    tensor_free(fX);
    tensor_free(fPX);
    tensor_free(weights);
    tensor_free(weights_PX);
    tensor_free(moved);
    tensor_free(panels);
    tensor_free(A);
    tensor_free(A_PX);
    return status;
}

/* X (B, T, D): the equivariance table for plain attention and its heatmaps */
static int part2_plain(const Options *opts, const Tensor *X, Rng *rng)
{
    printf("Part 2. Scaled dot-product self-attention, Q = K = V = X\n\n");
    printf("X (%d, %d, %d) ~ normal(0, 1); f(X) = softmax(X X^T / sqrt(%d)) X.\n"
           "P X = X[:, perm] puts token perm[i] at position i.\n",
           X->shape[0], X->shape[1], X->shape[2], X->shape[2]);
    int *perm = checked_malloc(PROG, (size_t)X->shape[1], sizeof *perm);
    equivariance_table(opts, NULL, X, rng, perm);
    int status = show_weights(opts, X, perm);
    free(perm);
    printf("\n");
    return status;
}

/* X (B, T, D): the same table for the layer, f(X) = layer(X, X, X) (B, T, D) */
static void part3_layer(const Options *opts, const MultiHeadAttention *layer, const Tensor *X,
                        Rng *rng)
{
    printf("Part 3. The multi-head layer of chapter 05, with its projections\n\n");
    printf("f(X) = MultiHeadAttention(X, X, X): num_hiddens %d, num_heads %d, bias on.\n"
           "W_q, W_k, W_v and W_o act on each token's features alone, so they cannot\n"
           "tell positions apart either. Weights are (B, H, T, T), compared per head.\n",
           layer->num_hiddens, layer->num_heads);
    equivariance_table(opts, layer, X, rng, NULL);
    printf("\n");
}

/* ---- part 4: invariance ----------------------------------------------------- */

/* queries (B, T, D) with key-value pairs (B, K, D) moved, and X (B, T, D)
 * pooled to (B, D) */
static void part4_invariance(const Options *opts, const MultiHeadAttention *layer,
                             const Tensor *X, Rng *rng)
{
    const int B = opts->batch, D = opts->hiddens, T = opts->tokens, K = opts->keys;
    printf("Part 4. Invariance: move the key-value pairs, keep the queries\n\n");
    /* queries (B, T, D) from one sequence, keys and values (B, K, D) from
     * another set, as in a decoder attending over encoder outputs. */
    Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, D));
    Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, D));
    Tensor *values = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, D));
    int *perm = checked_malloc(PROG, (size_t)(K > T ? K : T), sizeof *perm);
    rng_permutation(rng, perm, K);
    char pbuf[64], dbuf[48];

    Tensor *out = multihead_forward(layer, queries, keys, values, NULL, false, NULL, NULL);
    const float scale = tensor_max_abs(out);
    Tensor *P_keys = permute_tokens(keys, perm);
    Tensor *P_values = permute_tokens(values, perm);
    Tensor *both = multihead_forward(layer, queries, P_keys, P_values, NULL, false, NULL, NULL);
    Tensor *keys_only = multihead_forward(layer, queries, P_keys, values, NULL, false, NULL, NULL);
    Tensor *values_only = multihead_forward(layer, queries, keys, P_values, NULL, false, NULL,
                                            NULL);
    printf("queries (%d, %d, %d), keys and values (%d, %d, %d); the key-value pairs are\n"
           "reordered by perm = %s.\n"
           "Each output is a weighted sum over the pairs, and a sum does not depend on\n"
           "the order of its terms (up to rounding, part 7) as long as each key keeps\n"
           "its value.\n", B, T, D, B, K, D, perm_str(pbuf, sizeof pbuf, perm, K));
    const struct { const char *what; const Tensor *moved; } rows[3] = {
        {"keys and values together", both},
        {"keys only", keys_only},
        {"values only", values_only},
    };
    printf("  %-26s  %-28s\n", "moved", "max |f(Q, K', V') - f(Q, K, V)|");
    for (int r = 0; r < 3; r++) {
        float diff = tensor_max_abs_diff(rows[r].moved, out);
        printf("  %-26s  %-28s  %s\n", rows[r].what, diff_str(dbuf, sizeof dbuf, diff, scale),
               verdict(diff, scale));
    }
    printf("Moving the keys without their values hands each value the weight meant for\n"
           "another: the lookup answers with the wrong entries.\n\n");

    /* Pooling: the mean over tokens of an equivariant output is invariant,
     * because P only reorders the terms of the mean. */
    rng_permutation(rng, perm, T);
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fX = layer_self(layer, X, NULL, NULL);
    Tensor *fPX = layer_self(layer, PX, NULL, NULL);
    Tensor *pooled = mean_over_tokens(fX);
    Tensor *pooled_P = mean_over_tokens(fPX);
    const float pooled_scale = tensor_max_abs(pooled);
    printf("Self-attention, then the mean over tokens: with perm = %s\n",
           perm_str(pbuf, sizeof pbuf, perm, T));
    tensor_print_named("mean_t f(X)[t]  ", pooled);
    tensor_print_named("mean_t f(P X)[t]", pooled_P);
    float pooled_diff = tensor_max_abs_diff(pooled, pooled_P);
    printf("  max |mean f(P X) - mean f(X)| = %s  %s\n"
           "Pooled, the output is a function of the set of tokens, whatever their order\n"
           "(before pooling, f(P X) and f(X) differ by %.4f).\n\n",
           diff_str(dbuf, sizeof dbuf, pooled_diff, pooled_scale),
           verdict(pooled_diff, pooled_scale), (double)tensor_max_abs_diff(fPX, fX));

    free(perm);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    tensor_free(out);
    tensor_free(P_keys);
    tensor_free(P_values);
    tensor_free(both);
    tensor_free(keys_only);
    tensor_free(values_only);
    tensor_free(PX);
    tensor_free(fX);
    tensor_free(fPX);
    tensor_free(pooled);
    tensor_free(pooled_P);
}

/* ---- part 5: valid_lens --------------------------------------------------- */

/* max |f(P X) - P f(X)| for the layer with one valid_lens, printed */
static void masked_check(const MultiHeadAttention *layer, const Tensor *X,
                         const ValidLens *valid_lens, const int *perm, const char *what)
{
    const int T = X->shape[1];
    Tensor *fX = layer_self(layer, X, valid_lens, NULL);
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fPX = layer_self(layer, PX, valid_lens, NULL);
    Tensor *P_fX = permute_tokens(fX, perm);
    const float scale = tensor_max_abs(fX);
    const float diff = tensor_max_abs_diff(fPX, P_fX);
    char pbuf[64], dbuf[48];
    printf("  %s perm = %s\n    max |f(PX) - P f(X)| = %s  %s\n", what,
           perm_str(pbuf, sizeof pbuf, perm, T), diff_str(dbuf, sizeof dbuf, diff, scale),
           verdict(diff, scale));
    tensor_free(fX);
    tensor_free(PX);
    tensor_free(fPX);
    tensor_free(P_fX);
}

/* X (B, T, D) with valid_lens (B,): sequence b has opts->valid_lens[b]
 * real tokens, then padding */
static void part5_valid_lens(const Options *opts, const MultiHeadAttention *layer,
                             const Tensor *X, Rng *rng)
{
    const int B = opts->batch, T = opts->tokens;
    printf("Part 5. valid_lens: the mask is tied to positions, not to tokens\n\n");
    ValidLens *valid_lens = valid_lens_1d(opts->valid_lens, B);
    valid_lens_print_named("valid_lens", valid_lens);
    /* shortest and longest: positions below every length are real in every
     * sequence, positions from the shortest on are padding in some */
    int shortest = T, longest = 0;
    for (int b = 0; b < B; b++) {
        shortest = opts->valid_lens[b] < shortest ? opts->valid_lens[b] : shortest;
        longest = opts->valid_lens[b] > longest ? opts->valid_lens[b] : longest;
    }
    const bool same = shortest == longest;
    if (shortest == T)
        printf("No key is padding: every valid_len is T = %d, so the mask hides nothing.\n", T);
    else if (same)
        printf("Keys at positions %d.. are padding in every sequence: no query may look at\n"
               "them. The mask is a loop bound on positions, so it does not move with P.\n",
               shortest);
    else
        printf("Keys at positions valid_lens[b].. are padding in sequence b: no query may look\n"
               "at them. The mask is a loop bound on positions, so it does not move with P.\n");

    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    permute_prefix(rng, perm, shortest, T);
    masked_check(layer, X, valid_lens, perm,
                 same ? "inside the valid prefix," : "inside the shortest valid prefix,");
    if (shortest < T) {
        /* Swap one valid position with one padding position: a padding
         * token now sits where a query may see it. j is padding in every
         * sequence whose valid_len is at most j, the shortest among them. */
        int i = (int)rng_below(rng, (uint32_t)shortest);
        int j = shortest + (int)rng_below(rng, (uint32_t)(T - shortest));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
        masked_check(layer, X, valid_lens, perm, "padding moved into it,");
        int crossed = 0;
        for (int b = 0; b < B; b++)
            crossed += opts->valid_lens[b] <= j;
        printf("Inside the prefix, every query still sees the same set of real tokens.\n");
        if (crossed < B)
            printf("Across it, in the %d of %d sequences whose valid_len is at most %d:\n",
                   crossed, B, j);
        else
            printf("Across it, ");
        printf("padding token %d is now seen at position %d and real token %d is\n"
               "hidden at position %d: the set the queries attend to has changed.\n\n",
               perm[i], i, perm[j], j);
    } else {
        printf("There is no padding to move (try --valid-lens %d).\n\n", T - 1);
    }
    free(perm);
    valid_lens_free(valid_lens);
}

/* ---- part 6: positional encoding ------------------------------------------ */

/* X (B, T, D) + PE (T, D) before the layer */
static void part6_positional(const Options *opts, const MultiHeadAttention *layer,
                             const Tensor *X, Rng *rng)
{
    const int T = opts->tokens, D = opts->hiddens;
    printf("Part 6. Adding positions breaks equivariance\n\n");
    /* d2l calls the table P; here it is PE, since P is the permutation. */
    Tensor *PE = positional_encoding(T, D);
    printf("d2l's sinusoidal encoding, one row per position (d2l calls it P):\n"
           "PE[i, 2j] = sin(i / 10000^(2j/D)), PE[i, 2j+1] = cos(i / 10000^(2j/D)).\n");
    tensor_print_named("PE", PE);
    printf("g(X) = f(X + PE): the same layer, now fed token + position.\n");

    Tensor *X_pos = add_positional_encoding(X);
    Tensor *gX = layer_self(layer, X_pos, NULL, NULL);
    Tensor *fX = layer_self(layer, X, NULL, NULL);
    const float g_scale = tensor_max_abs(gX), f_scale = tensor_max_abs(fX);
    printf("%5s  %-26s  %-28s  %s\n", "trial", "perm", "max |f(PX) - P f(X)|",
           "max |g(PX) - P g(X)|");
    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    for (int trial = 1; trial <= opts->trials; trial++) {
        rng_permutation(rng, perm, T);
        Tensor *PX = permute_tokens(X, perm);
        Tensor *PX_pos = add_positional_encoding(PX);   /* moved tokens, positions stay */
        Tensor *gPX = layer_self(layer, PX_pos, NULL, NULL);
        Tensor *fPX = layer_self(layer, PX, NULL, NULL);
        Tensor *P_gX = permute_tokens(gX, perm);
        Tensor *P_fX = permute_tokens(fX, perm);
        char pbuf[64], fbuf[48], gbuf[48];
        printf("%5d  %-26s  %-28s  %s\n", trial, perm_str(pbuf, sizeof pbuf, perm, T),
               diff_str(fbuf, sizeof fbuf, tensor_max_abs_diff(fPX, P_fX), f_scale),
               diff_str(gbuf, sizeof gbuf, tensor_max_abs_diff(gPX, P_gX), g_scale));
        tensor_free(PX);
        tensor_free(PX_pos);
        tensor_free(gPX);
        tensor_free(fPX);
        tensor_free(P_gX);
        tensor_free(P_fX);
    }
    printf("After the move, token perm[i] is added PE[i], not PE[perm[i]]: what a token\n"
           "carries now depends on where it stands. \"dog bites man\" and \"man bites dog\"\n"
           "hold the same words; without positions, attention would give each word\n"
           "the same output in both. That is why language models add positions.\n\n");
    free(perm);
    tensor_free(PE);
    tensor_free(X_pos);
    tensor_free(gX);
    tensor_free(fX);
}

/* ---- part 7: floating point ------------------------------------------------ */

/* X (B, T, D): where the last-bit differences come from */
static void part7_rounding(const Options *opts, const Tensor *X, Rng *rng)
{
    const int T = opts->tokens;
    printf("Part 7. Why equal means equal to a tolerance, not bit for bit\n\n");
    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    Tensor *weights = NULL;
    Tensor *fX = self_attention(X, NULL, &weights);
    const float scale = tensor_max_abs(fX);

    /* The identity moves nothing, so the same operations run in the same
     * order and give the same bits. */
    for (int i = 0; i < T; i++)
        perm[i] = i;
    Tensor *same = permute_tokens(X, perm);
    Tensor *f_same = self_attention(same, NULL, NULL);
    printf("identity perm: max |f(PX) - P f(X)| = %g\n", (double)tensor_max_abs_diff(f_same, fX));

    /* Follow one permutation through the three steps of attention and see
     * where the first difference appears. */
    rng_permutation(rng, perm, T);
    Tensor *PX = permute_tokens(X, perm);
    Tensor *weights_PX = NULL;
    Tensor *fPX = self_attention(PX, NULL, &weights_PX);
    Tensor *scores = matmul_bt(X, X);
    Tensor *scores_PX = matmul_bt(PX, PX);
    Tensor *scores_moved = permute_queries_and_keys(scores, perm);
    Tensor *weights_moved = permute_queries_and_keys(weights, perm);
    Tensor *P_fX = permute_tokens(fX, perm);
    char pbuf[64];
    printf("perm = %s, step by step:\n", perm_str(pbuf, sizeof pbuf, perm, T));
    printf("  %-26s %-11s %s\n", "step", "max diff", "what is summed");
    printf("  %-26s %-11.3g %s\n", "scores   X X^T", (double)tensor_max_abs_diff(scores_PX, scores_moved),
           "the features, which P does not touch");
    printf("  %-26s %-11.3g %s\n", "weights  softmax of rows",
           (double)tensor_max_abs_diff(weights_PX, weights_moved),
           "the keys, in a new order (in double)");
    printf("  %-26s %-11.3g %s\n", "output   weights @ values", (double)tensor_max_abs_diff(fPX, P_fX),
           "the keys, in a new order (in float)");
    printf("The scores are the same numbers, each computed from the same terms in the\n"
           "same order, only stored elsewhere. The softmax denominator is a sum over the\n"
           "keys, but common/softmax.c adds it in double, so its rounding rarely reaches\n"
           "the float weights. The weighted sum of values adds in float, in a new order.\n");
    volatile float a = 0.1f, b = 0.6f, c = 0.7f;   /* volatile: added at run time */
    printf("Float addition rounds after every step, so the order of the terms matters:\n"
           "  (0.1f + 0.6f) + 0.7f = %.9g\n"
           "  0.1f + (0.6f + 0.7f) = %.9g\n",
           (double)((a + b) + c), (double)(a + (b + c)));

    /* How large do the differences get? Over many permutations, in eps. */
    int exact = 0;
    double worst = 0.0, total = 0.0;
    for (int s = 0; s < opts->samples; s++) {
        rng_permutation(rng, perm, T);
        Tensor *PXs = permute_tokens(X, perm);
        Tensor *fPXs = self_attention(PXs, NULL, NULL);
        Tensor *P_fXs = permute_tokens(fX, perm);
        double units = eps_units(tensor_max_abs_diff(fPXs, P_fXs), scale);
        exact += units == 0.0;
        worst = units > worst ? units : worst;
        total += units;
        tensor_free(PXs);
        tensor_free(fPXs);
        tensor_free(P_fXs);
    }
    printf("Over %d random permutations of part 2's X, max |f(PX) - P f(X)| in eps units:\n"
           "  bit for bit equal %d times, mean %.2f eps, largest %.2f eps\n",
           opts->samples, exact, total / opts->samples, worst);
    printf("A sum of K terms can gather up to about K roundings, though they mostly\n"
           "cancel. The tolerance of %.0f eps leaves room for the largest sizes this\n"
           "program takes (%d tokens), and is still tiny beside the millions of eps\n"
           "of a real change (parts 4 to 6).\n", TOL_EPS, MAX_TOKENS);
    free(perm);
    tensor_free(weights);
    tensor_free(fX);
    tensor_free(same);
    tensor_free(f_same);
    tensor_free(PX);
    tensor_free(weights_PX);
    tensor_free(fPX);
    tensor_free(scores);
    tensor_free(scores_PX);
    tensor_free(scores_moved);
    tensor_free(weights_moved);
    tensor_free(P_fX);
}

int main(int argc, char **argv)
{
    Options opts = parse_options(argc, argv);
    const int B = opts.batch, T = opts.tokens, D = opts.hiddens;

    printf("Self-attention and permutations: equivariant, not invariant\n\n"
           "P reorders the tokens: (P X)[i] = X[perm[i]], X[:, perm] in PyTorch.\n"
           "f is equivariant when f(P X) = P f(X), invariant when f(P X) = f(X).\n\n");
    part1_essay_check();

    /* Every part draws from its own stream of the seed, so changing the
     * number of trials of one part does not change the numbers of another. */
    Rng data_rng = rng_new_stream(opts.seed, 1);
    Tensor *X = tensor_normal(&data_rng, 0.0f, 1.0f, SHAPE(B, T, D));
    MultiHeadAttention *layer = multihead_new(D, D, D, D, opts.heads, 0.0f, true, &data_rng);

    Rng rng2 = rng_new_stream(opts.seed, 2), rng3 = rng_new_stream(opts.seed, 3);
    Rng rng4 = rng_new_stream(opts.seed, 4), rng5 = rng_new_stream(opts.seed, 5);
    Rng rng6 = rng_new_stream(opts.seed, 6), rng7 = rng_new_stream(opts.seed, 7);
    int status = part2_plain(&opts, X, &rng2);
    if (status == 0) {
        part3_layer(&opts, layer, X, &rng3);
        part4_invariance(&opts, layer, X, &rng4);
        part5_valid_lens(&opts, layer, X, &rng5);
        part6_positional(&opts, layer, X, &rng6);
        part7_rounding(&opts, X, &rng7);
    }
    multihead_free(layer);
    tensor_free(X);
    return status == 0 ? 0 : 1;
}
