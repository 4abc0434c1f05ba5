/*
 * 06_permutation_invariance - what reordering the tokens does to attention.
 *
 * A permutation P of the tokens puts token perm[i] at position i:
 * (P X)[i] = X[perm[i]], X[:, perm] in PyTorch. A function f of a sequence
 * is equivariant when f(P X) = P f(X) (the outputs move with their tokens)
 * and invariant when f(P X) = f(X) (they do not move at all).
 * Self-attention is equivariant, not invariant; main() below lists the
 * parts that show it. Every check also decides the exit status: 0 when
 * each property held, 1 (with a line on stderr) when one did not.
 *
 * Legend: B = batch_size, T = number of tokens (queries), K = num_keys,
 * H = num_heads, D = num_hiddens, d = D / H.
 */
#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "io/cli.h"
#include "io/plot.h"
#include "multihead.h"
#include "ops.h"
#include "permute_tokens.h"
#include "positional.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "permutation_invariance";

/* The largest sizes: at all of them at once, with --trials and --samples
 * at their largest too, the program still ends within a few seconds. */
enum { MAX_BATCH = 4, MAX_TOKENS = 64, MAX_HIDDENS = 64, MAX_KEYS = 64, MAX_TRIALS = 20,
       MAX_SAMPLES = 1000 };

typedef struct {
    uint64_t seed;
    int batch, tokens, hiddens, heads, keys, trials, samples;
    const char *valid_lens_text;   /* NULL: T - 2 for every sequence */
    int valid_lens[MAX_BATCH];     /* part 5's mask, one length per sequence */
    const char *plot_dir;
} Options;

/* Part 5 permutes inside the valid prefix, so every sequence needs at
 * least one valid token: lengths from 1 to T, one for all or one each. */
static void read_valid_lens(Options *opt)
{
    if (opt->valid_lens_text == NULL) {
        for (int b = 0; b < opt->batch; b++)
            opt->valid_lens[b] = opt->tokens > 2 ? opt->tokens - 2 : 1;
        return;
    }
    long lens[MAX_BATCH];
    int n = cli_long_list(PROG, "--valid-lens", opt->valid_lens_text, 1, opt->tokens, lens,
                          MAX_BATCH);
    if (n != 1 && n != opt->batch)
        cli_fail(PROG, "--valid-lens needs one length (for every sequence) or %d (one per "
                 "sequence), got %d", opt->batch, n);
    for (int b = 0; b < opt->batch; b++)
        opt->valid_lens[b] = (int)lens[n == 1 ? 0 : b];
}

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .batch = 2, .tokens = 6, .hiddens = 8, .heads = 2, .keys = 5,
                   .trials = 4, .samples = 1000};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed of every random number"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = MAX_BATCH, .metavar = "B",
         .help = "sequences"},
        {"--tokens", CLI_INT, &opt.tokens, .min = 2, .max = MAX_TOKENS, .metavar = "T",
         .help = "tokens per sequence"},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_HIDDENS, .metavar = "H",
         .help = "num_heads, must divide D"},
        {"--keys", CLI_INT, &opt.keys, .min = 2, .max = MAX_KEYS, .metavar = "K",
         .help = "key-value pairs for the cross-attention case"},
        {"--valid-lens", CLI_STRING, &opt.valid_lens_text, .metavar = "L",
         .help = "part 5's valid tokens: B comma-separated lengths,\n"
                 "or one for every sequence, each 1 to T",
         .default_text = "T - 2, at least 1"},
        {"--trials", CLI_INT, &opt.trials, .min = 1, .max = MAX_TRIALS, .metavar = "N",
         .help = "random permutations per table"},
        {"--samples", CLI_INT, &opt.samples, .min = 1, .max = MAX_SAMPLES, .metavar = "N",
         .help = "permutations behind part 7's statistics"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "also write the heatmaps permutation_weights.dat/.gp into DIR"},
    };
    cli_parse(&(CliTable){PROG, "Self-attention is permutation equivariant, f(P X) = P f(X), "
                                "not invariant.\nChecks it on seeded random tokens for plain "
                                "attention and the multi-head\nlayer, then the invariant cases, "
                                "masks, positional encoding and rounding.",
                          CLI_COUNT(options), options},
              argc, argv);
    if (opt.hiddens % opt.heads != 0)
        cli_fail(PROG, "--heads %d does not divide --hiddens %d: every head needs the same "
                 "size num_hiddens / num_heads", opt.heads, opt.hiddens);
    read_valid_lens(&opt);
    return opt;
}

/* ---- small helpers --------------------------------------------------------- */

/* Checks that fail are counted here and named on stderr; main() turns the
 * count into the exit status. */
static int failed_checks = 0;

static void check(bool holds, const char *what)
{
    if (!holds) {
        fprintf(stderr, "%s: check failed: %s\n", PROG, what);
        failed_checks++;
    }
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
    return equal_up_to_rounding(diff, scale) ? "equal" : "DIFFERENT";
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

/* X (B, T, D) -> f(X) (B, T, D): plain scaled dot-product self-attention
 * when layer is NULL, else layer(X, X, X) in evaluation mode. valid_lens
 * NULL or (B,); weights (B, T, T) or (B, H, T, T) when not NULL. */
static Tensor *attend(const MultiHeadAttention *layer, const Tensor *X,
                      const ValidLens *valid_lens, Tensor **weights)
{
    if (layer == NULL)
        return dot_product_attention(X, X, X, valid_lens, NULL, weights);
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
    TENSOR_FREE(inner, weights);
    return out;
}

/* ours, theirs (3, 3): the entries whose 4-decimal printouts differ. The
 * essay printed its input to 4 decimals and computed with all the digits,
 * so a printed output can differ in its last digit. */
static void print_printout_mismatches(const Tensor *ours, const Tensor *theirs)
{
    printf("The essay's input was printed to 4 decimals, so its printout can differ from\n"
           "ours in the last digit:");
    int mismatches = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            char a[16], b[16];
            snprintf(a, sizeof a, "%.4f", (double)AT2(ours, i, j));
            snprintf(b, sizeof b, "%.4f", (double)AT2(theirs, i, j));
            if (strcmp(a, b) != 0) {
                printf("%s attention[%d, %d] is %s here, %s there", mismatches ? ";" : "",
                       i, j, a, b);
                mismatches++;
            }
        }
    printf("%s.\n\n", mismatches ? "" : " none does");
}

/* q (3, 3): the essay's numbers */
static void part1_essay_check(void)
{
    printf("Part 1. The essay's check: 3 tokens, rows reversed\n\n");
    /* The essay drew q = torch.randn(3, 3) and printed it to 4 decimals;
     * these are the printed numbers... */
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
    const float equivariance = tensor_max_abs_diff(permuted_attention, attention_moved);
    const float invariance = tensor_max_abs_diff(permuted_attention, attention);
    printf("\nThe essay's assert: allclose(attention[[2, 1, 0]], permuted_attention)\n");
    printf("  max |permuted_attention - attention[[2, 1, 0]]| = %g\n", (double)equivariance);
    printf("  max |permuted_attention - attention|            = %.4f\n", (double)invariance);
    printf("  max |attention - what the essay printed|       = %.6f\n",
           (double)tensor_max_abs_diff(attention, printed));
    printf("The assert compares f(P X) with P f(X): the outputs moved with their tokens.\n"
           "That is equivariance. The essay calls it invariance, which would mean\n"
           "f(P X) = f(X), and the second line shows that is false.\n");
    print_printout_mismatches(attention, printed);
    check(equal_up_to_rounding(equivariance, tensor_max_abs(attention)),
          "part 1: the essay's assert does not hold");
    TENSOR_FREE(q, attention, permuted, permuted_attention, attention_moved, printed);
}

/* ---- parts 2 and 3: equivariance ------------------------------------------- */

typedef struct {
    float worst;      /* largest max |f(P X) - P f(X)| */
    int moved;        /* trials where f(P X) != f(X) */
    int identities;   /* identity permutations drawn */
} TableTally;

/* One row of the table: perm applied to X (B, T, D), with fX = f(X) and
 * its weights (..., T, T) already computed. */
static void equivariance_row(const MultiHeadAttention *layer, const Tensor *X, const Tensor *fX,
                             const Tensor *weights, const int *perm, int trial, TableTally *tally)
{
    const int T = X->shape[1];
    const float scale = tensor_max_abs(fX);
    Tensor *weights_PX = NULL;
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fPX = attend(layer, PX, NULL, &weights_PX);
    Tensor *P_fX = permute_tokens(fX, perm);
    /* Weights (..., T, T): the queries are the tokens and so are the keys,
     * so both the rows and the columns move. */
    Tensor *P_weights_PT = permute_queries_and_keys(weights, perm);

    const float equi = tensor_max_abs_diff(fPX, P_fX);
    const float weights_diff = tensor_max_abs_diff(weights_PX, P_weights_PT);
    const float inv = tensor_max_abs_diff(fPX, fX);
    tally->worst = equi > tally->worst ? equi : tally->worst;
    tally->moved += !equal_up_to_rounding(inv, scale);
    tally->identities += is_identity(perm, T);
    char pbuf[64], ebuf[48], wbuf[24];
    snprintf(wbuf, sizeof wbuf, "%.2e", (double)weights_diff);
    printf("%5d  %-26s  %-28s  %-11s  %.4f\n", trial, permutation_str(pbuf, sizeof pbuf, perm, T),
           diff_str(ebuf, sizeof ebuf, equi, scale), weights_diff == 0.0f ? "0" : wbuf,
           (double)inv);
    TENSOR_FREE(PX, weights_PX, fPX, P_fX, P_weights_PT);
}

/* Invariance, judged by the same rule on the last column. The identity
 * moves nothing, so for it f(P X) = f(X) holds trivially. */
static void print_invariance_verdict(const TableTally *tally, int trials)
{
    const int kept = trials - tally->moved;
    if (kept == 0)
        printf("f(P X) = f(X): false, the outputs moved with their tokens.\n");
    else if (tally->moved > 0)
        printf("f(P X) = f(X): false for %d of the %d permutations;\n"
               "it held for the other %d, %s.\n", tally->moved, trials, kept,
               tally->identities < kept ? "whose outputs did not move"
               : kept == 1             ? "the identity, which moves nothing"
                                       : "each the identity, which moves nothing");
    else if (tally->identities == trials)
        printf("f(P X) = f(X) held too, but only because every\n"
               "permutation drawn was the identity, which moves nothing: try more --trials.\n");
    else
        printf("f(P X) = f(X) held too: no output moved.\n");
}

/* opts->trials random permutations of X (B, T, D): how far f(P X) is from
 * P f(X) and from f(X), and whether the weights moved as P A P^T. f is
 * plain self-attention when layer is NULL, else the layer. The first
 * permutation is copied to first_perm (T,) when it is not NULL. */
static void equivariance_table(const Options *opts, const MultiHeadAttention *layer,
                               const Tensor *X, Rng *rng, int *first_perm)
{
    const int T = X->shape[1];
    Tensor *weights = NULL;
    Tensor *fX = attend(layer, X, NULL, &weights);
    const float scale = tensor_max_abs(fX);
    printf("max |f(X)| = %.4f: differences are also given in eps units, float32 epsilon\n"
           "(%.3g) times that size. weights: max |weights(P X) - P A P^T|.\n",
           (double)scale, (double)FLT_EPSILON);
    printf("%5s  %-26s  %-28s  %-11s  %s\n", "trial", "perm",
           "max |f(PX) - P f(X)|", "weights", "max |f(PX) - f(X)|");
    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    TableTally tally = {0};
    for (int trial = 1; trial <= opts->trials; trial++) {
        rng_permutation(rng, perm, T);
        if (trial == 1 && first_perm)
            memcpy(first_perm, perm, (size_t)T * sizeof *perm);
        equivariance_row(layer, X, fX, weights, perm, trial, &tally);
    }
    const bool holds = equal_up_to_rounding(tally.worst, scale);
    printf("f(P X) = P f(X): %s for every permutation (largest difference %.1f eps,\n"
           "tolerance %.0f eps). ", holds ? "holds" : "FAILS", eps_units(tally.worst, scale),
           PERMUTATION_TOL_EPS);
    print_invariance_verdict(&tally, opts->trials);
    check(holds, layer ? "part 3: the layer is not equivariant"
                       : "part 2: self-attention is not equivariant");
    free(perm);
    TENSOR_FREE(fX, weights);
}

/* Sequence 0's weights for X and for P X side by side in the terminal, and
 * with --plot all three matrices in one figure. X (B, T, D), perm (T,). */
static int show_weights(const Options *opts, const Tensor *X, const int *perm)
{
    const int T = X->shape[1];
    Tensor *weights = NULL, *weights_PX = NULL;
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fX = attend(NULL, X, NULL, &weights);
    Tensor *fPX = attend(NULL, PX, NULL, &weights_PX);
    Tensor *moved = permute_queries_and_keys(weights, perm);
    Tensor *A = tensor_select(weights, 0, 0);             /* weights[0] (T, T) */
    Tensor *A_PX = tensor_select(weights_PX, 0, 0);
    Tensor *PAPT = tensor_select(moved, 0, 0);
    Tensor *panels = TENSOR_STACK(A, A_PX, PAPT);         /* (3, T, T), one figure */

    char pbuf[64];
    printf("\nSequence 0's attention weights, queries down, keys across. Moving the\n"
           "tokens by perm = %s moves the rows and the columns together:\n"
           "weights(P X) = P A P^T, the same picture with its rows and columns relabelled.\n",
           permutation_str(pbuf, sizeof pbuf, perm, T));
    heatmap_terminal(stdout, A, "A = weights(X)");
    heatmap_terminal(stdout, A_PX, "weights(P X)");

    int status = 0;
    if (opts->plot_dir) {
        const char *titles[3] = {"A = weights(X)", "weights(P X)", "P A P^T"};
        status = plot_heatmaps(opts->plot_dir, "permutation_weights", panels, "keys", "queries",
                               titles);
        if (status == 0)
            printf("wrote %s/permutation_weights.dat and .gp (render with gnuplot)\n",
                   opts->plot_dir);
    }
    TENSOR_FREE(PX, fX, fPX, weights, weights_PX, moved, A, A_PX, PAPT, panels);
    return status;
}

/* X (B, T, D): the equivariance table for plain attention and its heatmaps */
static int part2_plain_attention(const Options *opts, const Tensor *X, Rng *rng)
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
static void part3_multihead_layer(const Options *opts, const MultiHeadAttention *layer,
                                  const Tensor *X, Rng *rng)
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

/* queries (B, T, D), keys and values (B, K, D): the output when the pairs
 * move together, keys alone, values alone, each against the unmoved one */
static void moved_pairs_table(const MultiHeadAttention *layer, const Tensor *queries,
                              const Tensor *keys, const Tensor *values, const int *perm)
{
    const int K = keys->shape[1];
    Tensor *out = multihead_forward(layer, queries, keys, values, NULL, false, NULL, NULL);
    const float scale = tensor_max_abs(out);
    Tensor *P_keys = permute_tokens(keys, perm);
    Tensor *P_values = permute_tokens(values, perm);
    Tensor *moved[3] = {
        multihead_forward(layer, queries, P_keys, P_values, NULL, false, NULL, NULL),
        multihead_forward(layer, queries, P_keys, values, NULL, false, NULL, NULL),
        multihead_forward(layer, queries, keys, P_values, NULL, false, NULL, NULL),
    };
    const char *what[3] = {"keys and values together", "keys only", "values only"};
    char pbuf[64], dbuf[48];
    printf("queries (%d, %d, %d), keys and values (%d, %d, %d); the key-value pairs are\n"
           "reordered by perm = %s.\n"
           "Each output is a weighted sum over the pairs, and a sum does not depend on\n"
           "the order of its terms (up to rounding, part 7) as long as each key keeps\n"
           "its value.\n", queries->shape[0], queries->shape[1], queries->shape[2],
           keys->shape[0], K, keys->shape[2], permutation_str(pbuf, sizeof pbuf, perm, K));
    printf("  %-26s  %-28s\n", "moved", "max |f(Q, K', V') - f(Q, K, V)|");
    for (int r = 0; r < 3; r++) {
        float diff = tensor_max_abs_diff(moved[r], out);
        printf("  %-26s  %-28s  %s\n", what[r], diff_str(dbuf, sizeof dbuf, diff, scale),
               verdict(diff, scale));
    }
    printf("Moving the keys without their values hands each value the weight meant for\n"
           "another: the lookup answers with the wrong entries.\n\n");
    check(equal_up_to_rounding(tensor_max_abs_diff(moved[0], out), scale),
          "part 4: moving key-value pairs together changed the output");
    TENSOR_FREE(out, P_keys, P_values, moved[0], moved[1], moved[2]);
}

/* X (B, T, D) -> pooled (B, D): the mean over tokens of an equivariant
 * output is invariant, because P only reorders the terms of the mean. */
static void pooling_check(const MultiHeadAttention *layer, const Tensor *X, const int *perm)
{
    const int T = X->shape[1];
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fX = attend(layer, X, NULL, NULL);
    Tensor *fPX = attend(layer, PX, NULL, NULL);
    Tensor *pooled = mean_over_tokens(fX);
    Tensor *pooled_P = mean_over_tokens(fPX);
    const float scale = tensor_max_abs(pooled);
    const float diff = tensor_max_abs_diff(pooled, pooled_P);
    char pbuf[64], dbuf[48];
    printf("Self-attention, then the mean over tokens: with perm = %s\n",
           permutation_str(pbuf, sizeof pbuf, perm, T));
    tensor_print_named("mean_t f(X)[t]  ", pooled);
    tensor_print_named("mean_t f(P X)[t]", pooled_P);
    printf("  max |mean f(P X) - mean f(X)| = %s  %s\n"
           "Pooled, the output is a function of the set of tokens, whatever their order\n"
           "(before pooling, f(P X) and f(X) differ by %.4f).\n\n",
           diff_str(dbuf, sizeof dbuf, diff, scale), verdict(diff, scale),
           (double)tensor_max_abs_diff(fPX, fX));
    check(equal_up_to_rounding(diff, scale), "part 4: pooling is not invariant");
    TENSOR_FREE(PX, fX, fPX, pooled, pooled_P);
}

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
    moved_pairs_table(layer, queries, keys, values, perm);
    rng_permutation(rng, perm, T);
    pooling_check(layer, X, perm);
    free(perm);
    TENSOR_FREE(queries, keys, values);
}

/* ---- part 5: valid_lens --------------------------------------------------- */

/* max |f(P X) - P f(X)| for the layer with one valid_lens, printed; true
 * when equal up to rounding */
static bool masked_check(const MultiHeadAttention *layer, const Tensor *X,
                         const ValidLens *valid_lens, const int *perm, const char *what)
{
    const int T = X->shape[1];
    Tensor *fX = attend(layer, X, valid_lens, NULL);
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fPX = attend(layer, PX, valid_lens, NULL);
    Tensor *P_fX = permute_tokens(fX, perm);
    const float scale = tensor_max_abs(fX);
    const float diff = tensor_max_abs_diff(fPX, P_fX);
    char pbuf[64], dbuf[48];
    printf("  %s perm = %s\n    max |f(PX) - P f(X)| = %s  %s\n", what,
           permutation_str(pbuf, sizeof pbuf, perm, T), diff_str(dbuf, sizeof dbuf, diff, scale),
           verdict(diff, scale));
    TENSOR_FREE(fX, PX, fPX, P_fX);
    return equal_up_to_rounding(diff, scale);
}

/* Swap one valid position of perm (T,) with one padding position: a
 * padding token now sits where a query may see it. */
static void padding_moved_in(const Options *opts, const MultiHeadAttention *layer,
                             const Tensor *X, const ValidLens *valid_lens, int *perm,
                             int shortest, Rng *rng)
{
    const int B = opts->batch, T = opts->tokens;
    /* j is padding in every sequence whose valid_len is at most j */
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
    /* positions below every length are real in every sequence, positions
     * from the shortest on are padding in some */
    int shortest = T, longest = 0;
    for (int b = 0; b < B; b++) {
        shortest = opts->valid_lens[b] < shortest ? opts->valid_lens[b] : shortest;
        longest = opts->valid_lens[b] > longest ? opts->valid_lens[b] : longest;
    }
    const bool same = shortest == longest;
    if (shortest == T)
        printf("No key is padding: every valid_len is T = %d, so the mask hides nothing.\n", T);
    else if (same)
        printf("Keys at positions %d.. are padding in %s: no query may look at\n"
               "them. The mask is a loop bound on positions, so it does not move with P.\n",
               shortest, B == 1 ? "the sequence" : "every sequence");
    else
        printf("Keys at positions valid_lens[b].. are padding in sequence b: no query may look\n"
               "at them. The mask is a loop bound on positions, so it does not move with P.\n");

    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    permute_prefix(rng, perm, shortest, T);
    check(masked_check(layer, X, valid_lens, perm,
                       same ? "inside the valid prefix," : "inside the shortest valid prefix,"),
          "part 5: a permutation inside the valid prefix changed the output");
    if (shortest < T)
        padding_moved_in(opts, layer, X, valid_lens, perm, shortest, rng);
    else
        printf("There is no padding to move (try --valid-lens %d).\n\n", T - 1);
    free(perm);
    valid_lens_free(valid_lens);
}

/* ---- part 6: positional encoding ------------------------------------------ */

/* One row: perm applied to X (B, T, D), with f(X) and g(X) = f(X + PE) */
static void positional_row(const MultiHeadAttention *layer, const Tensor *X, const Tensor *fX,
                           const Tensor *gX, const int *perm, int trial)
{
    const int T = X->shape[1];
    Tensor *PX = permute_tokens(X, perm);
    Tensor *PX_pos = add_positional_encoding(PX);   /* moved tokens, positions stay */
    Tensor *gPX = attend(layer, PX_pos, NULL, NULL);
    Tensor *fPX = attend(layer, PX, NULL, NULL);
    Tensor *P_gX = permute_tokens(gX, perm);
    Tensor *P_fX = permute_tokens(fX, perm);
    char pbuf[64], fbuf[48], gbuf[48];
    printf("%5d  %-26s  %-28s  %s\n", trial, permutation_str(pbuf, sizeof pbuf, perm, T),
           diff_str(fbuf, sizeof fbuf, tensor_max_abs_diff(fPX, P_fX), tensor_max_abs(fX)),
           diff_str(gbuf, sizeof gbuf, tensor_max_abs_diff(gPX, P_gX), tensor_max_abs(gX)));
    TENSOR_FREE(PX, PX_pos, gPX, fPX, P_gX, P_fX);
}

/* X (B, T, D) + PE (T, D) before the layer */
static void part6_positional_encoding(const Options *opts, const MultiHeadAttention *layer,
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
    Tensor *gX = attend(layer, X_pos, NULL, NULL);
    Tensor *fX = attend(layer, X, NULL, NULL);
    printf("%5s  %-26s  %-28s  %s\n", "trial", "perm", "max |f(PX) - P f(X)|",
           "max |g(PX) - P g(X)|");
    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    for (int trial = 1; trial <= opts->trials; trial++) {
        rng_permutation(rng, perm, T);
        positional_row(layer, X, fX, gX, perm, trial);
    }
    printf("After the move, token perm[i] is added PE[i], not PE[perm[i]]: what a token\n"
           "carries now depends on where it stands. \"dog bites man\" and \"man bites dog\"\n"
           "hold the same words; without positions, attention would give each word\n"
           "the same output in both. That is why language models add positions.\n\n");
    free(perm);
    TENSOR_FREE(PE, X_pos, gX, fX);
}

/* ---- part 7: floating point ------------------------------------------------ */

/* X (B, T, D), fX = f(X), weights (B, T, T): one permutation followed
 * through the three steps of attention, to see where a difference appears */
static void rounding_step_by_step(const Tensor *X, const Tensor *fX, const Tensor *weights,
                                  const int *perm)
{
    const int T = X->shape[1];
    Tensor *weights_PX = NULL;
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fPX = attend(NULL, PX, NULL, &weights_PX);
    Tensor *scores = matmul_bt(X, X);
    Tensor *scores_PX = matmul_bt(PX, PX);
    Tensor *scores_moved = permute_queries_and_keys(scores, perm);
    Tensor *weights_moved = permute_queries_and_keys(weights, perm);
    Tensor *P_fX = permute_tokens(fX, perm);
    char pbuf[64];
    printf("perm = %s, step by step:\n", permutation_str(pbuf, sizeof pbuf, perm, T));
    printf("  %-26s %-11s %s\n", "step", "max diff", "what is summed");
    printf("  %-26s %-11.3g %s\n", "scores   X X^T",
           (double)tensor_max_abs_diff(scores_PX, scores_moved),
           "the features, which P does not touch");
    printf("  %-26s %-11.3g %s\n", "weights  softmax of rows",
           (double)tensor_max_abs_diff(weights_PX, weights_moved),
           "the keys, in a new order (in double)");
    printf("  %-26s %-11.3g %s\n", "output   weights @ values",
           (double)tensor_max_abs_diff(fPX, P_fX), "the keys, in a new order (in float)");
    TENSOR_FREE(PX, weights_PX, fPX, scores, scores_PX, scores_moved, weights_moved, P_fX);
}

/* X (B, T, D), fX = f(X): max |f(PX) - P f(X)| in eps over many permutations */
static void rounding_statistics(const Options *opts, const Tensor *X, const Tensor *fX,
                                int *perm, Rng *rng)
{
    const int T = X->shape[1];
    const float scale = tensor_max_abs(fX);
    int exact = 0;
    double worst = 0.0, total = 0.0;
    for (int s = 0; s < opts->samples; s++) {
        rng_permutation(rng, perm, T);
        Tensor *PX = permute_tokens(X, perm);
        Tensor *fPX = attend(NULL, PX, NULL, NULL);
        Tensor *P_fX = permute_tokens(fX, perm);
        double units = eps_units(tensor_max_abs_diff(fPX, P_fX), scale);
        exact += units == 0.0;
        worst = units > worst ? units : worst;
        total += units;
        TENSOR_FREE(PX, fPX, P_fX);
    }
    printf("Over %d random %s of part 2's X, max |f(PX) - P f(X)| in eps units:\n"
           "  bit for bit equal %d %s, mean %.2f eps, largest %.2f eps\n", opts->samples,
           plural(opts->samples, "permutation", "permutations"), exact,
           plural(exact, "time", "times"), total / opts->samples, worst);
    printf("A sum of K terms can gather up to about K roundings, though they mostly\n"
           "cancel. The tolerance of %.0f eps leaves room for the largest sizes this\n"
           "program takes (%d tokens), and is still tiny beside the millions of eps\n"
           "of a real change (parts 4 to 6).\n", PERMUTATION_TOL_EPS, MAX_TOKENS);
    check(worst <= PERMUTATION_TOL_EPS, "part 7: rounding went past the tolerance");
}

/* X (B, T, D): where the last-bit differences come from */
static void part7_rounding(const Options *opts, const Tensor *X, Rng *rng)
{
    const int T = opts->tokens;
    printf("Part 7. Why equal means equal to a tolerance, not bit for bit\n\n");
    int *perm = checked_malloc(PROG, (size_t)T, sizeof *perm);
    Tensor *weights = NULL;
    Tensor *fX = attend(NULL, X, NULL, &weights);

    /* The identity moves nothing, so the same operations run in the same
     * order and give the same bits. */
    for (int i = 0; i < T; i++)
        perm[i] = i;
    Tensor *same = permute_tokens(X, perm);
    Tensor *f_same = attend(NULL, same, NULL, NULL);
    const float identity_diff = tensor_max_abs_diff(f_same, fX);
    printf("identity perm: max |f(PX) - P f(X)| = %g\n", (double)identity_diff);
    check(identity_diff == 0.0f, "part 7: the identity permutation changed some bits");

    rng_permutation(rng, perm, T);
    rounding_step_by_step(X, fX, weights, perm);
    printf("The scores are the same numbers, each computed from the same terms in the\n"
           "same order, only stored elsewhere. The softmax denominator is a sum over the\n"
           "keys, but common/softmax.c adds it in double, so its rounding rarely reaches\n"
           "the float weights. The weighted sum of values adds in float, in a new order.\n");
    volatile float a = 0.1f, b = 0.6f, c = 0.7f;   /* volatile: added at run time */
    printf("Float addition rounds after every step, so the order of the terms matters:\n"
           "  (0.1f + 0.6f) + 0.7f = %.9g\n"
           "  0.1f + (0.6f + 0.7f) = %.9g\n",
           (double)((a + b) + c), (double)(a + (b + c)));
    rounding_statistics(opts, X, fX, perm, rng);
    free(perm);
    TENSOR_FREE(weights, fX, same, f_same);
}

int main(int argc, char **argv)
{
    Options opts = parse_options(argc, argv);
    const int B = opts.batch, T = opts.tokens, D = opts.hiddens;
    printf("Self-attention and permutations: equivariant, not invariant\n\n"
           "P reorders the tokens: (P X)[i] = X[perm[i]], X[:, perm] in PyTorch.\n"
           "f is equivariant when f(P X) = P f(X), invariant when f(P X) = f(X).\n\n");

    /* Every part draws from its own stream of the seed, so changing the
     * number of trials of one part does not change the numbers of another. */
    Rng data_rng = rng_new_stream(opts.seed, 1);
    Tensor *X = tensor_normal(&data_rng, 0.0f, 1.0f, SHAPE(B, T, D));
    MultiHeadAttention *layer = multihead_new(D, D, D, D, opts.heads, 0.0f, true, &data_rng);
    Rng rng[8];
    for (int part = 2; part <= 7; part++)
        rng[part] = rng_new_stream(opts.seed, (uint64_t)part);

    part1_essay_check();                                     /* the essay's 3 tokens */
    int plot_status = part2_plain_attention(&opts, X, &rng[2]);   /* f(PX) = P f(X) */
    if (plot_status == 0) {
        part3_multihead_layer(&opts, layer, X, &rng[3]);     /* the same, with projections */
        part4_invariance(&opts, layer, X, &rng[4]);          /* key-value pairs; pooling */
        part5_valid_lens(&opts, layer, X, &rng[5]);          /* masks belong to positions */
        part6_positional_encoding(&opts, layer, X, &rng[6]); /* positions break it */
        part7_rounding(&opts, X, &rng[7]);                   /* equal up to rounding */
    }
    multihead_free(layer);
    tensor_free(X);
    if (failed_checks > 0)
        fprintf(stderr, "%s: %d %s failed\n", PROG, failed_checks,
                plural(failed_checks, "check", "checks"));
    return plot_status == 0 && failed_checks == 0 ? 0 : 1;
}
