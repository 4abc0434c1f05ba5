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
#include "worked_example.h"

static const char PROG[] = "permutation_invariance";

/* The largest sizes: at all of them at once, with --samples at its
 * largest too, the program still ends within a few seconds. A permutation
 * of the tokens or of the keys fits in int perm[MAX_TOKENS]. */
enum { MAX_BATCH = 4, MAX_TOKENS = 64, MAX_HIDDENS = 64, MAX_SAMPLES = 1000 };

/* Sizes that are not options: 2 sequences unless --valid-lens gives one
 * length for each, and 4 random permutations in each table. */
enum { DEFAULT_BATCH = 2, TRIALS = 4 };

typedef struct {
    uint64_t seed;
    int tokens, hiddens, heads, samples;
    int batch;                     /* B: how many lengths --valid-lens gives, or 2 */
    int keys;                      /* K = T - 1, at least 2: part 4's key-value pairs */
    const char *valid_lens_text;   /* NULL: T - 2 for every sequence */
    int valid_lens[MAX_BATCH];     /* part 5's mask, one length per sequence */
    const char *plot_dir;
} Options;

/* Part 5 permutes inside the valid prefix, so every sequence needs at
 * least one valid token: lengths from 1 to T. The lengths also set the
 * batch: one per sequence, or a single one for each of 2 sequences. */
static void read_valid_lens(Options *opt)
{
    long lens[MAX_BATCH] = {opt->tokens > 2 ? opt->tokens - 2 : 1};   /* the default */
    char err[CLI_ERR_LEN];
    const int n = opt->valid_lens_text == NULL ? 1
                  : cli_read_long_list("--valid-lens", opt->valid_lens_text, 1, opt->tokens, lens,
                                       MAX_BATCH, err, sizeof err);
    if (n < 0)
        cli_fail(PROG, "%s", err);
    opt->batch = n == 1 ? DEFAULT_BATCH : n;
    for (int b = 0; b < opt->batch; b++)
        opt->valid_lens[b] = (int)lens[n == 1 ? 0 : b];
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .tokens = 6, .hiddens = 8, .heads = 2, .samples = 1000};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed of every random number"},
        {"--tokens", CLI_INT, &opt.tokens, .min = 2, .max = MAX_TOKENS, .metavar = "T",
         .help = "tokens per sequence"},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_HIDDENS, .metavar = "H",
         .help = "num_heads, must divide D", .splits = &opt.hiddens},
        {"--valid-lens", CLI_STRING, &opt.valid_lens_text, .metavar = "L",
         .help = "part 5's valid tokens, each 1 to T: one length per\n"
                 "sequence (2 to 4 sequences), or one for each of 2",
         .default_text = "T - 2, at least 1"},
        {"--samples", CLI_INT, &opt.samples, .min = 1, .max = MAX_SAMPLES, .metavar = "N",
         .help = "permutations behind part 7's statistics"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "also write the heatmaps permutation_weights.dat/.gp into DIR"},
    };
    *done = cli_parse(&(CliTable){PROG, "Self-attention is permutation equivariant, f(P X) = P f(X), "
                                        "not invariant.\nChecks it on seeded random tokens for plain "
                                        "attention and the multi-head\nlayer, then the invariant cases, "
                                        "masks, positional encoding and rounding.\nSizes that follow: "
                                        "B = 2 sequences unless --valid-lens gives one length\nper "
                                        "sequence, K = T - 1 key-value pairs in part 4 (at least 2), "
                                        "and\n4 random permutations in each table.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    read_valid_lens(&opt);
    opt.keys = opt.tokens > 2 ? opt.tokens - 1 : 2;   /* a count other than T where it can */
    return opt;
}

/* ---- part 1: the essay's check --------------------------------------------- */

/* q (3, 3): the essay's numbers (worked_example.h) */
static void part1_essay_check(void)
{
    printf("Part 1. The essay's check: 3 tokens, rows reversed\n\n");
    const int reverse[3] = {2, 1, 0};
    /* The essay drew q = torch.randn(3, 3) and printed it to 4 decimals:
     * chapter 03's worked example. Its function is softmax(q q^T) q, line
     * for line, without d2l's 1 / sqrt(d); the property holds either way,
     * because a constant factor on every score moves with the scores. */
    Tensor *q = tensor_from(EXAMPLE_TOKENS, SHAPE(3, 3));
    tensor_print_named("q", q);
    Tensor *attention = unscaled_attention(q, q, q, NULL);   /* softmax(q q^T) q */
    tensor_print_named("attention", attention);
    Tensor *permuted = permute_along(q, 0, reverse);   /* q[[2, 1, 0]] */
    tensor_print_named("permuted = q[[2, 1, 0]]", permuted);
    Tensor *permuted_attention = unscaled_attention(permuted, permuted, permuted, NULL);
    tensor_print_named("permuted_attention", permuted_attention);

    Tensor *attention_moved = permute_along(attention, 0, reverse);
    Tensor *printed = tensor_from(EXAMPLE_PRINTED_OUTPUT, SHAPE(3, 3));
    const float scale = tensor_max_abs(attention);
    const float equivariance = tensor_max_abs_diff(permuted_attention, attention_moved);
    const float invariance = tensor_max_abs_diff(permuted_attention, attention);
    printf("\nThe essay's assert: allclose(attention[[2, 1, 0]], permuted_attention)\n");
    printf("  max |permuted_attention - attention[[2, 1, 0]]| = %g\n", (double)equivariance);
    printf("  max |permuted_attention - attention|            = %.4f\n", (double)invariance);
    printf("  max |attention - what the essay printed|       = %.6f\n",
           (double)tensor_max_abs_diff(attention, printed));
    printf("f(P X) = P f(X): %s.  f(P X) = f(X): %s.\n", rounding_verdict(equivariance, scale),
           rounding_verdict(invariance, scale));
    tensor_print_named("what the essay printed for attention", printed);
    printf("\n");
    cli_check(equal_up_to_rounding(equivariance, scale),
              "part 1: the essay's assert does not hold");
    TENSOR_FREE(q, attention, permuted, permuted_attention, attention_moved, printed);
}

/* ---- parts 2 and 3: equivariance ------------------------------------------- */

/* Sequence 0's weights for X and for P X side by side in the terminal, and
 * with --plot all three matrices in one figure. X (B, T, D), perm (T,). */
static int show_weights(const Options *opts, const Tensor *X, const int *perm)
{
    Tensor *weights = NULL, *weights_PX = NULL;
    Tensor *fX = self_attend(NULL, X, NULL, &weights);
    equivariance_gap(NULL, X, fX, NULL, perm, NULL, &weights_PX);
    Tensor *moved = permute_queries_and_keys(weights, perm);
    Tensor *A = tensor_select(weights, 0, 0);             /* weights[0] (T, T) */
    Tensor *A_PX = tensor_select(weights_PX, 0, 0);
    Tensor *PAPT = tensor_select(moved, 0, 0);
    Tensor *panels = TENSOR_STACK(A, A_PX, PAPT);         /* (3, T, T), one figure */
    char pbuf[64];
    printf("\nSequence 0's weights, perm = %s:\n", permutation_str(pbuf, sizeof pbuf, perm,
                                                                  X->shape[1]));
    heatmap_terminal(stdout, A, "A = weights(X)");
    heatmap_terminal(stdout, A_PX, "weights(P X)");
    int status = 0;
    if (opts->plot_dir) {
        /* the title carries perm, so the moved rows can be traced in the picture */
        const char *titles[3] = {"A = weights(X)", "weights(P X)", "P A P^T"};
        char title[128];
        snprintf(title, sizeof title, "sequence 0, perm = %s: weights(P X) = P A P^T", pbuf);
        status = plot_heatmaps_titled(opts->plot_dir, "permutation_weights", title, panels,
                                      "keys", "queries", titles);
        if (status == 0)
            printf("wrote %s/permutation_weights.dat and .gp (render with gnuplot)\n",
                   opts->plot_dir);
    }
    TENSOR_FREE(fX, weights, weights_PX, moved, A, A_PX, PAPT, panels);
    return status;
}

/* X (B, T, D): the equivariance table for plain attention and its heatmaps */
static int part2_plain_attention(const Options *opts, const Tensor *X, Rng *rng)
{
    printf("Part 2. Scaled dot-product self-attention, Q = K = V = X\n\n");
    printf("X (%d, %d, %d) ~ normal(0, 1); f(X) = softmax(X X^T / sqrt(%d)) X\n",
           X->shape[0], X->shape[1], X->shape[2], X->shape[2]);
    int perm[MAX_TOKENS];
    const EquivarianceTally tally = equivariance_table(NULL, X, TRIALS, rng, perm);
    cli_check(tally.holds, "part 2: self-attention is not equivariant");
    int status = show_weights(opts, X, perm);
    printf("\n");
    return status;
}

/* X (B, T, D): the same table for the layer, f(X) = layer(X, X, X) (B, T, D) */
static void part3_multihead_layer(const MultiHeadAttention *layer, const Tensor *X, Rng *rng)
{
    printf("Part 3. The multi-head layer of chapter 05, with its projections\n\n");
    printf("f(X) = MultiHeadAttention(X, X, X): num_hiddens %d, num_heads %d, bias on;\n"
           "weights (B, H, T, T), compared per head\n", layer->num_hiddens, layer->num_heads);
    const EquivarianceTally tally = equivariance_table(layer, X, TRIALS, rng, NULL);
    cli_check(tally.holds, "part 3: the layer is not equivariant");
    printf("\n");
}

/* ---- part 4: invariance ----------------------------------------------------- */

/* X (B, T, D) -> pooled (B, D): the mean over tokens of an equivariant
 * output is invariant, because P only reorders the terms of the mean. */
static void pooling_check(const MultiHeadAttention *layer, const Tensor *X, const int *perm)
{
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fX = self_attend(layer, X, NULL, NULL);
    Tensor *fPX = self_attend(layer, PX, NULL, NULL);
    Tensor *pooled = mean_over_tokens(fX);
    Tensor *pooled_P = mean_over_tokens(fPX);
    const float scale = tensor_max_abs(pooled);
    const float diff = tensor_max_abs_diff(pooled, pooled_P);
    char pbuf[64];
    printf("The layer, then the mean over tokens, perm = %s:\n",
           permutation_str(pbuf, sizeof pbuf, perm, X->shape[1]));
    tensor_print_named("mean_t f(X)[t]  ", pooled);
    tensor_print_named("mean_t f(P X)[t]", pooled_P);
    print_gap("  max |mean f(P X) - mean f(X)| = ", diff, scale);
    printf("  before pooling, max |f(P X) - f(X)| = %.4f\n\n",
           (double)tensor_max_abs_diff(fPX, fX));
    cli_check(equal_up_to_rounding(diff, scale), "part 4: pooling is not invariant");
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
    int perm[MAX_TOKENS];
    rng_permutation(rng, perm, K);
    cli_check(key_value_moves_table(layer, queries, keys, values, perm),
              "part 4: moving key-value pairs together changed the output");
    printf("\n");
    rng_permutation(rng, perm, T);
    pooling_check(layer, X, perm);
    TENSOR_FREE(queries, keys, values);
}

/* ---- part 5: valid_lens --------------------------------------------------- */

/* max |f(P X) - P f(X)| for the layer with one valid_lens, printed; true
 * when equal up to rounding */
static bool masked_check(const MultiHeadAttention *layer, const Tensor *X,
                         const ValidLens *valid_lens, const int *perm, const char *what)
{
    Tensor *fX = self_attend(layer, X, valid_lens, NULL);
    const float scale = tensor_max_abs(fX);
    const float diff = equivariance_gap(layer, X, fX, valid_lens, perm, NULL, NULL);
    char pbuf[64];
    printf("  %s perm = %s\n", what, permutation_str(pbuf, sizeof pbuf, perm, X->shape[1]));
    print_gap("    max |f(PX) - P f(X)| = ", diff, scale);
    tensor_free(fX);
    return equal_up_to_rounding(diff, scale);
}

/* Swap one valid position of perm (T,) with one padding position: a
 * padding token now sits where a query may see it. */
static void padding_moved_in(const Options *opts, const MultiHeadAttention *layer,
                             const Tensor *X, const ValidLens *valid_lens, int *perm,
                             int shortest, Rng *rng)
{
    /* j is padding in every sequence whose valid_len is at most j */
    int i = (int)rng_below(rng, (uint32_t)shortest);
    int j = shortest + (int)rng_below(rng, (uint32_t)(opts->tokens - shortest));
    int tmp = perm[i];
    perm[i] = perm[j];
    perm[j] = tmp;
    masked_check(layer, X, valid_lens, perm, "padding moved into it,");
    int crossed = 0;
    for (int b = 0; b < opts->batch; b++)
        crossed += opts->valid_lens[b] <= j;
    printf("    in %d of %d %s: padding token %d seen at position %d, real token %d hidden "
           "at %d\n\n", crossed, opts->batch, plural(opts->batch, "sequence", "sequences"),
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
    /* positions below the shortest length are real in every sequence */
    int shortest = T;
    for (int b = 0; b < B; b++)
        shortest = opts->valid_lens[b] < shortest ? opts->valid_lens[b] : shortest;
    printf("positions 0..%d are real tokens in every sequence\n", shortest - 1);
    int perm[MAX_TOKENS];
    permutation_of_prefix(rng, perm, shortest, T);
    cli_check(masked_check(layer, X, valid_lens, perm, "inside that prefix,"),
              "part 5: a permutation inside the valid prefix changed the output");
    if (shortest < T)
        padding_moved_in(opts, layer, X, valid_lens, perm, shortest, rng);
    else
        printf("  no padding to move in\n\n");
    valid_lens_free(valid_lens);
}

/* ---- part 6: positional encoding ------------------------------------------ */

/* One row: perm applied to X (B, T, D), with f(X) and g(X) = f(X + PE) */
static void positional_row(const MultiHeadAttention *layer, const Tensor *X, const Tensor *fX,
                           const Tensor *gX, const int *perm, int trial)
{
    Tensor *PX = permute_tokens(X, perm);
    Tensor *PX_pos = add_positional_encoding(PX);   /* moved tokens, positions stay */
    Tensor *gPX = self_attend(layer, PX_pos, NULL, NULL);
    Tensor *P_gX = permute_tokens(gX, perm);
    const float f_gap = equivariance_gap(layer, X, fX, NULL, perm, NULL, NULL);
    char pbuf[64], fbuf[48], gbuf[48];
    printf("%5d  %-26s  %-28s  %s\n", trial,
           permutation_str(pbuf, sizeof pbuf, perm, X->shape[1]),
           eps_diff_str(fbuf, sizeof fbuf, f_gap, tensor_max_abs(fX)),
           eps_diff_str(gbuf, sizeof gbuf, tensor_max_abs_diff(gPX, P_gX), tensor_max_abs(gX)));
    TENSOR_FREE(PX, PX_pos, gPX, P_gX);
}

/* X (B, T, D) + PE (T, D) before the layer */
static void part6_positional_encoding(const Options *opts, const MultiHeadAttention *layer,
                                      const Tensor *X, Rng *rng)
{
    const int T = opts->tokens;
    printf("Part 6. Adding positions breaks equivariance\n\n");
    /* d2l calls the table P; here it is PE, since P is the permutation. */
    Tensor *PE = positional_encoding(T, opts->hiddens);
    tensor_print_named("PE", PE);
    Tensor *X_pos = add_positional_encoding(X);
    Tensor *gX = self_attend(layer, X_pos, NULL, NULL);    /* g(X) = f(X + PE) */
    Tensor *fX = self_attend(layer, X, NULL, NULL);
    printf("%5s  %-26s  %-28s  %s\n", "trial", "perm", "max |f(PX) - P f(X)|",
           "max |g(PX) - P g(X)|");
    int perm[MAX_TOKENS];
    for (int trial = 1; trial <= TRIALS; trial++) {
        rng_permutation(rng, perm, T);
        positional_row(layer, X, fX, gX, perm, trial);
    }
    printf("\n");
    TENSOR_FREE(PE, X_pos, gX, fX);
}

/* ---- part 7: floating point ------------------------------------------------ */

/* X (B, T, D), perm (T,): one permutation followed through the three
 * passes of attention, to see where a difference appears */
static void rounding_step_by_step(const Tensor *X, const int *perm)
{
    const AttentionPassGaps gaps = attention_pass_gaps(X, perm);
    char pbuf[64];
    printf("perm = %s, step by step:\n", permutation_str(pbuf, sizeof pbuf, perm, X->shape[1]));
    printf("  %-26s %-11s %s\n", "step", "max diff", "sums over");
    printf("  %-26s %-11.3g %s\n", "scores   X X^T", (double)gaps.scores, "features");
    printf("  %-26s %-11.3g %s\n", "weights  softmax of rows", (double)gaps.weights,
           "keys, in double");
    printf("  %-26s %-11.3g %s\n", "output   weights @ values", (double)gaps.output,
           "keys, in float");
}

/* X (B, T, D): where the last-bit differences come from */
static void part7_rounding(const Options *opts, const Tensor *X, Rng *rng)
{
    const int T = opts->tokens;
    printf("Part 7. Why equal means equal to a tolerance, not bit for bit\n\n");
    int perm[MAX_TOKENS];
    Tensor *fX = self_attend(NULL, X, NULL, NULL);
    /* The identity moves nothing, so the same operations run in the same
     * order and give the same bits. */
    for (int i = 0; i < T; i++)
        perm[i] = i;
    const float identity_diff = equivariance_gap(NULL, X, fX, NULL, perm, NULL, NULL);
    printf("identity perm: max |f(PX) - P f(X)| = %g\n", (double)identity_diff);
    cli_check(identity_diff == 0.0f, "part 7: the identity permutation changed some bits");

    rng_permutation(rng, perm, T);
    rounding_step_by_step(X, perm);
    volatile float a = 0.1f, b = 0.6f, c = 0.7f;   /* volatile: added at run time */
    printf("the same three floats, added in two orders:\n"
           "  (0.1f + 0.6f) + 0.7f = %.9g\n"
           "  0.1f + (0.6f + 0.7f) = %.9g\n",
           (double)((a + b) + c), (double)(a + (b + c)));
    /* max |f(PX) - P f(X)| in eps over many permutations */
    const EquivarianceStats stats =
        equivariance_statistics(NULL, X, fX, opts->samples, perm, rng);
    printf("Over %d random %s of part 2's X, max |f(PX) - P f(X)| in eps units:\n"
           "  bit for bit equal %d %s, mean %.2f eps, largest %.2f eps (tolerance %.0f eps)\n",
           opts->samples, plural(opts->samples, "permutation", "permutations"), stats.exact,
           plural(stats.exact, "time", "times"), stats.mean, stats.worst, PERMUTATION_TOL_EPS);
    cli_check(stats.worst <= PERMUTATION_TOL_EPS,
              "part 7: rounding went past the tolerance");
    tensor_free(fX);
}

int main(int argc, char **argv)
{
    int done;
    Options opts = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    const int B = opts.batch, T = opts.tokens, D = opts.hiddens;
    printf("Self-attention and permutations: equivariant, not invariant\n\n");

    /* Every part draws from its own stream of the seed, so one part can
     * change without changing another's numbers. */
    Rng data_rng = rng_new_stream(opts.seed, 1);
    Tensor *X = tensor_normal(&data_rng, 0.0f, 1.0f, SHAPE(B, T, D));
    MultiHeadAttention *layer = multihead_new(D, D, D, D, opts.heads, 0.0f, true, &data_rng);
    Rng rng[8];
    for (int part = 2; part <= 7; part++)
        rng[part] = rng_new_stream(opts.seed, (uint64_t)part);

    part1_essay_check();                                     /* the essay's 3 tokens */
    int plot_status = part2_plain_attention(&opts, X, &rng[2]);   /* f(PX) = P f(X) */
    if (plot_status == 0) {
        part3_multihead_layer(layer, X, &rng[3]);            /* the same, with projections */
        part4_invariance(&opts, layer, X, &rng[4]);          /* key-value pairs; pooling */
        part5_valid_lens(&opts, layer, X, &rng[5]);          /* masks belong to positions */
        part6_positional_encoding(&opts, layer, X, &rng[6]); /* positions break it */
        part7_rounding(&opts, X, &rng[7]);                   /* equal up to rounding */
    }
    multihead_free(layer);
    tensor_free(X);
    const int check_status = cli_checks_status();
    return plot_status != 0 ? plot_status : check_status;
}
