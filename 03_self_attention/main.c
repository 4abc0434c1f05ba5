/*
 * 03_self_attention - scaled dot-product attention, Parts 1 to 4.
 * main() lists the parts; each is a function named after what it shows.
 * Part 5, what the n x n weight matrix costs, is its own program: cost.c.
 * A check that fails makes the exit status 1, with a line on stderr.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (= number of
 * key-value pairs), d = query and key size, v = value size, n = number of
 * tokens in self-attention (T = K = n).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "io/cli.h"
#include "io/plot.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"
#include "worked_example.h"

static const char PROG[] = "self_attention";

enum { MAX_TOKENS = 64, MAX_HIDDENS = 1024 };

typedef struct {
    uint64_t seed;
    int num_tokens;     /* 0: the three fixed tokens */
    int num_hiddens;    /* 3 unless --tokens N gives random tokens */
    float dropout;
    bool train;
    const char *plot_dir;
} Options;

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .num_hiddens = 3, .dropout = 0.5f};
    bool hiddens_given = false;
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for every random tensor"},
        {"--tokens", CLI_INT, &opt.num_tokens, .min = 1, .max = MAX_TOKENS, .metavar = "N",
         .help = "self-attention on N random tokens instead of the three fixed ones",
         .default_text = "the three"},
        {"--dim", CLI_INT, &opt.num_hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "d",
         .help = "size of each random token", .given = &hiddens_given},
        {"--dropout", CLI_FLOAT, &opt.dropout, CLI_DROPOUT_RANGE,
         .help = "dropout probability on the weights;\nit acts only with --train"},
        {"--train", CLI_FLAG, &opt.train,
         .help = "training mode: apply dropout and show what it does"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write heatmaps: DIR/self_attention.{dat,gp} and\nDIR/d2l_check.{dat,gp}"},
    };
    *done = cli_parse(&(CliTable){PROG, "Scaled dot-product attention softmax(Q K^T / sqrt(d)) V: d2l's "
                                        "check,\nself-attention on a few tokens, why sqrt(d) and dropout.\n"
                                        "Part 5, the n^2 cost, is ./03_self_attention/cost.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    if (hiddens_given && opt.num_tokens == 0)
        cli_fail(PROG, "--dim sizes random tokens: give --tokens N too "
                 "(the three fixed tokens have size 3)");
    return opt;
}

/* ---- Part 1 -------------------------------------------------------------- */

/* weights (2, 1, 10), values (2, 10, 4), output (2, 1, 4): sequence 1's
 * output recomputed as the weighted sum of its first 6 value rows, in
 * double, and its masked weights checked to be exactly 0 */
static void check_sequence_1(const Tensor *weights, const Tensor *values, const Tensor *output)
{
    double worst = 0.0;
    for (int c = 0; c < 4; c++) {
        double sum = 0.0;
        for (int j = 0; j < 6; j++)
            sum += (double)AT3(weights, 1, 0, j) * AT3(values, 1, j, c);
        worst = fmax(worst, fabs(sum - AT3(output, 1, 0, c)));
    }
    bool masked_zero = true;
    for (int j = 6; j < 10; j++)
        masked_zero = masked_zero && AT3(weights, 1, 0, j) == 0.0f;
    printf("\noutput shape (2, 1, 4), as d2l's check_shape expects.\n");
    printf("Sequence 1 sees keys 0..5; keys 6..9 have weight exactly 0: %s.\n",
           masked_zero ? "yes" : "NO");
    char worst_text[32];
    printf("output[1] = sum of weight_j * values[1, j] over j < 6: largest difference %s\n",
           residue_text(worst_text, sizeof worst_text, worst, 1e-6));
    cli_check(masked_zero, "part 1: a masked key has a weight");
    cli_check(worst < 1e-6, "part 1: the output is not the weighted sum of the values");
}

/* d2l's check, with values whose rows all differ. Returns the weights
 * (2, 1, 10) for plotting. */
static Tensor *part1_d2l_check(Rng *rng)
{
    printf("Part 1. d2l's check: 1 query over 10 key-value pairs, 2 sequences\n\n");
    Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(2, 1, 2));
    Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(2, 10, 2));
    Tensor *values = tensor_normal(rng, 0.0f, 1.0f, SHAPE(2, 10, 4));
    ValidLens *valid_lens = valid_lens_1d((const int[]){2, 6}, 2);
    tensor_print_named("queries (2, 1, 2)", queries);
    tensor_print_named("keys (2, 10, 2)", keys);
    tensor_print_named("values (2, 10, 4)", values);
    valid_lens_print_named("valid_lens", valid_lens);

    Tensor *weights = NULL;
    Tensor *output = dot_product_attention(queries, keys, values, valid_lens, NULL, &weights);
    printf("\n");
    tensor_print_named("attention_weights (2, 1, 10)", weights);
    tensor_print_named("output (2, 1, 4)", output);
    check_sequence_1(weights, values, output);
    Tensor *drawn = tensor_select(weights, 1, 0);   /* weights[:, 0] (2, 10) */
    heatmap_terminal(stdout, drawn, "weights: one row per sequence, keys across");
    printf("\n");
    TENSOR_FREE(drawn, output, queries, keys, values);
    valid_lens_free(valid_lens);
    return weights;
}

/* ---- Part 2 -------------------------------------------------------------- */

/* The tokens X (1, n, d): the example's three, or random ones. */
static Tensor *make_tokens(const Options *opt, Rng *rng)
{
    if (opt->num_tokens == 0)
        return tensor_from(EXAMPLE_TOKENS, SHAPE(1, 3, 3));
    return tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, opt->num_tokens, opt->num_hiddens));
}

/* x (1, n, d): the unscaled weights (1, n, n), printed beside what the
 * PyTorch example printed when x is its three tokens */
static Tensor *show_unscaled(const Tensor *x, bool fixed)
{
    Tensor *plain_weights = NULL;
    Tensor *plain = unscaled_attention(x, x, x, &plain_weights);   /* softmax(X X^T) X */
    printf("\nWithout the scale, softmax(X X^T) X:\n");
    tensor_print_named("weights", plain_weights);
    tensor_print_named("output ", plain);
    /* The comparison holds for the example's own tokens only: tokens
     * changed on purpose (chapter 03's exercise 1 normalises them) give
     * other numbers, which is no error. */
    const bool example_tokens = x->size == 9 && memcmp(x->data, EXAMPLE_TOKENS,
                                                       sizeof EXAMPLE_TOKENS) == 0;
    if (fixed && !example_tokens) {
        printf("X is not the example's three tokens (changed in make_tokens?), so the output\n"
               "is not compared with what the PyTorch example printed.\n");
    } else if (fixed) {
        Tensor *printed = tensor_from(EXAMPLE_PRINTED_OUTPUT, SHAPE(1, 3, 3));
        const float diff = tensor_max_abs_diff(plain, printed);
        tensor_print_named("the PyTorch example printed", printed);
        printf("Largest difference %.4f (its tokens were printed to 4 decimals)\n", (double)diff);
        cli_check(diff < 2e-4f,
                  "part 2: the output is not what the PyTorch example printed");
        tensor_free(printed);
    }
    tensor_free(plain);
    return plain_weights;
}

/* x (1, n, d), weights (1, n, n): symmetry, and who attends to whom */
static void read_the_weights(const Tensor *x, const Tensor *weights)
{
    const int n = x->shape[1];
    Tensor *scores = matmul_bt(x, x);
    float asymmetry = 0.0f, weights_asymmetry = 0.0f;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            asymmetry = fmaxf(asymmetry, fabsf(AT3(scores, 0, i, j) - AT3(scores, 0, j, i)));
            weights_asymmetry = fmaxf(weights_asymmetry,
                                      fabsf(AT3(weights, 0, i, j) - AT3(weights, 0, j, i)));
        }
    printf("\nlargest |S - S^T| = %g for the scores S = X X^T, largest |W - W^T| = %.4f\n",
           (double)asymmetry, (double)weights_asymmetry);
    /* A dot product is not a distance: a token need not be its own best match. */
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int j = 1; j < n; j++)
            if (AT3(weights, 0, i, j) > AT3(weights, 0, i, best))
                best = j;
        if (best != i)
            printf("token %d attends most to token %d: x%d . x%d = %.4f > x%d . x%d = %.4f\n", i,
                   best, i, best, (double)AT3(scores, 0, i, best), i, i,
                   (double)AT3(scores, 0, i, i));
    }
    tensor_free(scores);
}

/* x (1, n, d). Returns the two weight matrices (2, n, n) for plotting. */
static Tensor *part2_self_attention(const Tensor *x, bool fixed)
{
    const int n = x->shape[1], d = x->shape[2];
    printf("Part 2. Self-attention: queries = keys = values = X\n\n");
    if (fixed)
        printf("Three tokens of size 3, one per row (a worked PyTorch example):\n");
    else
        printf("%d random %s of size %d, one per row:\n", n, n == 1 ? "token" : "tokens", d);
    tensor_print_named("X (1, n, d)", x);
    /* The PyTorch example computes softmax(X X^T) X, without 1/sqrt(d). */
    Tensor *plain_weights = show_unscaled(x, fixed);

    /* With the scale: what dot_product_attention computes. */
    Tensor *weights = NULL;
    Tensor *output = dot_product_attention(x, x, x, NULL, NULL, &weights);
    printf("\nWith the scale, dot_product_attention(X, X, X) = softmax(X X^T / sqrt(%d)) X:\n", d);
    tensor_print_named("weights", weights);
    tensor_print_named("output ", output);
    read_the_weights(x, weights);

    Tensor *plain_drawn = tensor_select(plain_weights, 0, 0);   /* (n, n) */
    Tensor *drawn = tensor_select(weights, 0, 0);
    heatmap_terminal(stdout, plain_drawn, "softmax(X X^T): queries down, keys across");
    heatmap_terminal(stdout, drawn, "softmax(X X^T / sqrt(d))");
    printf("\n");
    Tensor *panels = TENSOR_STACK(plain_drawn, drawn);          /* (2, n, n) */
    TENSOR_FREE(plain_weights, weights, output, plain_drawn, drawn);
    return panels;
}

/* ---- Part 3 -------------------------------------------------------------- */

enum { PAIRS = 2000, ROWS = 200, KEYS = 10 };

/* The variance of q . k over PAIRS random pairs q, k (d,) ~ normal(0, 1) */
static double dot_variance(Rng *rng, int d)
{
    double sum = 0.0, sum_sq = 0.0;
    for (int p = 0; p < PAIRS; p++) {
        double dot = 0.0;
        for (int i = 0; i < d; i++)
            dot += (double)rng_normal(rng) * rng_normal(rng);
        sum += dot;
        sum_sq += dot * dot;
    }
    const double mean = sum / PAIRS;
    return sum_sq / PAIRS - mean * mean;
}

/* How peaked softmax gets: the largest weight of one query (1, 1, d)
 * against KEYS random keys, unscaled and scaled, averaged over ROWS queries */
static void mean_peaks(Rng *rng, int d, double *peak_plain, double *peak_scaled)
{
    *peak_plain = *peak_scaled = 0.0;
    for (int r = 0; r < ROWS; r++) {
        Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, 1, d));
        Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, KEYS, d));
        Tensor *plain = matmul_bt(queries, keys);
        Tensor *scaled = NULL;
        Tensor *out = dot_product_attention(queries, keys, keys, NULL, NULL, &scaled);
        softmax_row(plain->data, KEYS);
        float max_plain = 0.0f, max_scaled = 0.0f;
        for (int j = 0; j < KEYS; j++) {
            max_plain = fmaxf(max_plain, plain->data[j]);
            max_scaled = fmaxf(max_scaled, scaled->data[j]);
        }
        *peak_plain += max_plain / (double)ROWS;
        *peak_scaled += max_scaled / (double)ROWS;
        TENSOR_FREE(queries, keys, plain, scaled, out);
    }
}

static void part3_why_sqrt_d(Rng *rng)
{
    static const int sizes[] = {2, 8, 32, 128, 512};
    printf("Part 3. Why divide by sqrt(d)\n\n");
    printf("q, k: d entries ~ normal(0, 1); variances over %d pairs, largest weights\n"
           "averaged over %d queries (a uniform row would give %.1f)\n\n", PAIRS, ROWS,
           1.0 / KEYS);
    printf("     d   var(q . k)   var(q . k / sqrt(d))   largest weight of %d keys\n", KEYS);
    printf("                                             unscaled    scaled\n");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int d = sizes[s];
        const double variance = dot_variance(rng, d);
        double peak_plain, peak_scaled;
        mean_peaks(rng, d, &peak_plain, &peak_scaled);
        printf("  %4d   %10.2f   %20.3f   %9.3f  %8.3f\n", d, variance, variance / d,
               peak_plain, peak_scaled);
    }
    printf("\n");
}

/* ---- Part 4 -------------------------------------------------------------- */

/* x (1, n, d): the scaled self-attention of Part 2 again, in training mode */
static void part4_dropout(const Tensor *x, const Options *opt)
{
    printf("Part 4. Dropout on the weights\n\n");
    if (!opt->train) {
        printf("evaluation mode: dropout does nothing (try --dropout 0.5 --train)\n\n");
        return;
    }
    const int n = x->shape[1];
    const double scale = 1.0 / (1.0 - opt->dropout);
    printf("training mode, p = %g: kept weights times 1 / (1 - p) = %g\n", (double)opt->dropout,
           scale);
    Tensor *eval_weights = NULL;
    Tensor *eval_output = dot_product_attention(x, x, x, NULL, NULL, &eval_weights);
    /* The coin flips come from a generator of their own, so turning dropout
     * on does not change any other number this program prints. */
    Rng coin = rng_new(opt->seed + 1);
    Dropout dropout = {opt->dropout, true, &coin};
    Tensor *weights = NULL;
    Tensor *output = dot_product_attention(x, x, x, NULL, &dropout, &weights);
    tensor_print_named("weights after dropout", weights);
    tensor_print_named("output ", output);
    printf("row sums:");
    bool all_one = true;
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int j = 0; j < n; j++)
            sum += AT3(weights, 0, i, j);
        printf(" %.4f", sum);
        all_one = all_one && fabs(sum - 1.0) < 1e-4;
    }
    printf(all_one ? "   (still 1)\n" : "   (no longer 1)\n");
    int kept = 0, dropped = 0;
    double worst = 0.0;
    for (size_t i = 0; i < weights->size; i++) {
        if (weights->data[i] == 0.0f) {
            dropped++;
            continue;
        }
        kept++;
        worst = fmax(worst, fabs(weights->data[i] / eval_weights->data[i] - scale));
    }
    printf("%d %s dropped, %d kept; kept weight / evaluation weight = %g (largest deviation "
           "%.1e)\n\n", dropped, plural(dropped, "weight", "weights"), kept, scale, worst);
    cli_check(worst < 1e-5 * scale, "part 4: a kept weight is not scaled by 1 / (1 - p)");
    TENSOR_FREE(eval_weights, eval_output, weights, output);
}

/* ---- main ------------------------------------------------------------------ */

/* check_weights (2, 1, 10), self_weights (2, n, n) -> the .dat and .gp files */
static int write_plots(const char *dir, Tensor *check_weights, const Tensor *self_weights)
{
    const char *const titles[2] = {"softmax(X X^T)", "softmax(X X^T / sqrt(d))"};
    const char *const check_title[1] = {"valid_lens = [2, 6]"};
    Tensor *check_panel = tensor_reshape(check_weights, SHAPE(2, 10));
    int status = plot_heatmaps_titled(dir, "self_attention", "self-attention weights, "
                                      "without and with the scale", self_weights, "keys",
                                      "queries", titles);
    if (status == 0)
        status = plot_heatmaps_titled(dir, "d2l_check", "d2l's check: one query per sequence "
                                      "over 10 keys", check_panel, "keys", "sequence",
                                      check_title);
    if (status != 0)
        return status;
    printf("wrote self_attention and d2l_check (.dat and .gp) into %s; "
           "render with: gnuplot %s/self_attention.gp\n", dir, dir);
    return 0;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    Tensor *check_weights = part1_d2l_check(&rng);   /* d2l's example, checked */
    Tensor *x = make_tokens(&opt, &rng);
    Tensor *self_weights = part2_self_attention(x, opt.num_tokens == 0);   /* Q = K = V */
    part3_why_sqrt_d(&rng);                          /* the variance of q . k */
    part4_dropout(x, &opt);                          /* training mode only */

    int status = opt.plot_dir ? write_plots(opt.plot_dir, check_weights, self_weights) : 0;
    TENSOR_FREE(check_weights, x, self_weights);
    const int check_status = cli_checks_status();
    return status != 0 ? status : check_status;
}
