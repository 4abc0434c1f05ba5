/*
 * 03_self_attention - scaled dot-product attention, and what it costs.
 *
 * Part 1: d2l's check of dot_product_attention: queries (2, 1, 2), keys
 *         (2, 10, 2), values (2, 10, 4), valid_lens [2, 6] -> (2, 1, 4).
 * Part 2: self-attention, Q = K = V = X, on three tokens: the weight
 *         matrix printed and drawn, with and without the 1/sqrt(d).
 * Part 3: why divide by sqrt(d): the variance of q . k grows like d, and
 *         unscaled scores push softmax to one-hot.
 * Part 4: dropout on the weights (--dropout P --train).
 * --cost: time and memory of the n x n weight matrix as n doubles.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (= number of
 * key-value pairs), d = query and key size, v = value size, n = number of
 * tokens in self-attention (T = K = n).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "io/cli.h"
#include "ops.h"
#include "io/plot.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

#define PROG "self_attention"

enum { MAX_TOKENS = 64, MAX_HIDDENS = 1024, MAX_COST_N = 65536 };

typedef struct {
    uint64_t seed;
    int num_tokens;     /* 0: the three fixed tokens */
    int num_hiddens;
    float dropout;
    bool train;
    bool cost;
    int cost_max;
    const char *plot_dir;
} Options;

static void usage(void)
{
    printf("usage: %s [--seed N] [--tokens N] [--hiddens D] [--dropout P] [--train]\n"
           "                      [--cost] [--cost-max N] [--plot DIR] [--help]\n"
           "\n"
           "Scaled dot-product attention softmax(Q K^T / sqrt(d)) V: d2l's check,\n"
           "self-attention on a few tokens, why sqrt(d), dropout, and the n^2 cost.\n"
           "\n"
           "  --seed N       seed for every random tensor (default 0)\n"
           "  --tokens N     self-attention on N random tokens, 1 to %d, instead of\n"
           "                 the three fixed ones (default: the three)\n"
           "  --hiddens D    size of each random token, 1 to %d (default 3); also d\n"
           "                 in the --cost experiment (default there 64)\n"
           "  --dropout P    dropout probability on the weights, 0 <= P < 1 (default 0.5);\n"
           "                 it acts only with --train\n"
           "  --train        training mode: apply dropout and show what it does\n"
           "  --cost         time one forward pass for n = 128, 256, ... and count the\n"
           "                 bytes of the n x n weight matrix (prints timings; nothing\n"
           "                 else runs)\n"
           "  --cost-max N   largest n for --cost, 128 to %d (default 4096)\n"
           "  --plot DIR     write heatmaps: DIR/self_attention.{dat,gp} and\n"
           "                 DIR/d2l_check.{dat,gp}\n"
           "  --help         this text\n",
           PROG, MAX_TOKENS, MAX_HIDDENS, MAX_COST_N);
}

/* ---- Part 1 -------------------------------------------------------------- */

/* d2l's check, with values whose rows all differ. Returns the weights
 * (2, 1, 10) for plotting. */
static Tensor *d2l_check(Rng *rng)
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

    /* The check that proves it: recompute sequence 1's output as the
     * weighted sum of its first 6 value rows, in double. */
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
    printf("output[1] = sum of weight_j * values[1, j] over j < 6: largest difference %.1e\n",
           worst);
    Tensor *drawn = tensor_from(weights->data, SHAPE(2, 10));
    heatmap_terminal(stdout, drawn, "weights: one row per sequence, keys across");
    printf("\n");

    tensor_free(drawn);
    tensor_free(output);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    valid_lens_free(valid_lens);
    return weights;
}

/* ---- Part 2 -------------------------------------------------------------- */

/* The three tokens (rows) of a worked PyTorch example of self-attention. */
static const float example_tokens[3 * 3] = {
    0.8063f, 0.5281f, 2.7724f,
    1.4511f, -0.4305f, 1.3205f,
    1.3092f, -0.5249f, -1.0714f,
};

/* What that example's PyTorch run printed for softmax(X X^T) X. */
static const float example_output[3 * 3] = {
    0.8178f, 0.5111f, 2.7465f,
    1.0429f, 0.1725f, 2.2049f,
    1.3184f, -0.5126f, -0.8610f,
};

/* x (1, n, d) -> softmax(x x^T) x, the example's formula, without the scale.
 * The weights (1, n, n) go to *weights. */
static Tensor *unscaled_self_attention(const Tensor *x, Tensor **weights)
{
    Tensor *scores = matmul_bt(x, x);
    *weights = masked_softmax(scores, NULL);
    tensor_free(scores);
    return matmul(*weights, x);
}

static void show_dropout(const Tensor *x, const Tensor *eval_weights, const Options *opt);

/* Returns the two weight matrices (2, n, n) for plotting. */
static Tensor *self_attention(const Options *opt, Rng *rng)
{
    const bool fixed = opt->num_tokens == 0;
    const int n = fixed ? 3 : opt->num_tokens;
    const int d = fixed ? 3 : opt->num_hiddens;
    printf("Part 2. Self-attention: queries = keys = values = X\n\n");
    Tensor *x = fixed ? tensor_from(example_tokens, SHAPE(1, n, d))
                      : tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, n, d));
    if (fixed)
        printf("Three tokens of size 3, one per row (a worked PyTorch example):\n");
    else
        printf("%d random tokens of size %d, one per row:\n", n, d);
    tensor_print_named("X (1, n, d)", x);

    /* The PyTorch example computes softmax(X X^T) X, without 1/sqrt(d). */
    Tensor *plain_weights = NULL;
    Tensor *plain = unscaled_self_attention(x, &plain_weights);
    printf("\nWithout the scale, softmax(X X^T) X:\n");
    tensor_print_named("weights", plain_weights);
    tensor_print_named("output ", plain);
    if (fixed) {
        Tensor *printed = tensor_from(example_output, SHAPE(1, 3, 3));
        printf("The PyTorch example printed\n");
        tensor_print(printed);
        printf("Largest difference %.4f: its tokens were printed with 4 decimals, so this\n"
               "is as close as they allow.\n", (double)tensor_max_abs_diff(plain, printed));
        tensor_free(printed);
    }

    /* With the scale: what dot_product_attention computes. */
    Tensor *weights = NULL;
    Tensor *output = dot_product_attention(x, x, x, NULL, NULL, &weights);
    printf("\nWith the scale, dot_product_attention(X, X, X) = softmax(X X^T / sqrt(%d)) X:\n", d);
    tensor_print_named("weights", weights);
    tensor_print_named("output ", output);

    Tensor *scores = matmul_bt(x, x);
    float asymmetry = 0.0f, weights_asymmetry = 0.0f;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            asymmetry = fmaxf(asymmetry, fabsf(AT3(scores, 0, i, j) - AT3(scores, 0, j, i)));
            weights_asymmetry = fmaxf(weights_asymmetry,
                                      fabsf(AT3(weights, 0, i, j) - AT3(weights, 0, j, i)));
        }
    printf("\nX X^T is symmetric (largest |S - S^T| = %g), the weights are not\n"
           "(largest |W - W^T| = %.4f): softmax normalises each row by its own sum.\n",
           (double)asymmetry, (double)weights_asymmetry);
    /* A dot product is not a distance: a token need not be its own best match. */
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int j = 1; j < n; j++)
            if (AT3(weights, 0, i, j) > AT3(weights, 0, i, best))
                best = j;
        if (best != i)
            printf("Token %d attends most to token %d, not to itself: x%d . x%d = %.4f is larger\n"
                   "than x%d . x%d = %.4f. A dot product grows with length, not only with\n"
                   "likeness.\n", i, best, i, best, (double)AT3(scores, 0, i, best), i, i,
                   (double)AT3(scores, 0, i, i));
    }
    if (d > 1)
        printf("Dividing by sqrt(d) flattens every row; it never reorders one.\n");

    Tensor *panels = tensor_zeros(SHAPE(2, n, n));
    memcpy(panels->data, plain_weights->data, plain_weights->size * sizeof(float));
    memcpy(panels->data + plain_weights->size, weights->data, weights->size * sizeof(float));
    Tensor *drawn = tensor_from(plain_weights->data, SHAPE(n, n));
    heatmap_terminal(stdout, drawn, "softmax(X X^T): queries down, keys across");
    tensor_free(drawn);
    drawn = tensor_from(weights->data, SHAPE(n, n));
    heatmap_terminal(stdout, drawn, "softmax(X X^T / sqrt(d))");
    tensor_free(drawn);
    printf("\n");

    show_dropout(x, weights, opt);

    tensor_free(scores);
    tensor_free(x);
    tensor_free(plain);
    tensor_free(plain_weights);
    tensor_free(output);
    tensor_free(weights);
    return panels;
}

/* ---- Part 3 -------------------------------------------------------------- */

static void why_sqrt_d(Rng *rng)
{
    enum { PAIRS = 2000, ROWS = 200, KEYS = 10 };
    static const int sizes[] = {2, 8, 32, 128, 512};
    printf("Part 3. Why divide by sqrt(d)\n\n");
    printf("q and k with d independent entries of mean 0 and variance 1: q . k is a sum\n"
           "of d products of variance 1, so its variance is d. Measured on %d pairs:\n\n",
           PAIRS);
    printf("     d   var(q . k)   var(q . k / sqrt(d))   largest weight of %d keys\n", KEYS);
    printf("                                             unscaled    scaled\n");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int d = sizes[s];
        /* variance of the dot product over PAIRS random pairs */
        double sum = 0.0, sum_sq = 0.0;
        for (int p = 0; p < PAIRS; p++) {
            double dot = 0.0;
            for (int i = 0; i < d; i++)
                dot += (double)rng_normal(rng) * rng_normal(rng);
            sum += dot;
            sum_sq += dot * dot;
        }
        double mean = sum / PAIRS;
        double variance = sum_sq / PAIRS - mean * mean;

        /* how peaked softmax gets: a query against KEYS random keys */
        double peak_plain = 0.0, peak_scaled = 0.0;
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
            peak_plain += max_plain / (double)ROWS;
            peak_scaled += max_scaled / (double)ROWS;
            tensor_free(queries);
            tensor_free(keys);
            tensor_free(plain);
            tensor_free(scaled);
            tensor_free(out);
        }
        printf("  %4d   %10.2f   %20.3f   %9.3f  %8.3f\n", d, variance, variance / d,
               peak_plain, peak_scaled);
    }
    printf("\nThe last two columns average, over %d random queries, the largest of the %d\n"
           "weights one query gives; a uniform row would give %.1f.\n", ROWS, KEYS,
           1.0 / KEYS);
    printf("Unscaled, the scores spread out like sqrt(d): at d = 512 one key takes\n"
           "almost all the weight, softmax is nearly one-hot and its gradient\n"
           "w (1 - w) is nearly 0. Scaled, the scores keep variance 1 for every d.\n\n");
}

/* ---- Part 4 -------------------------------------------------------------- */

static void show_dropout(const Tensor *x, const Tensor *eval_weights, const Options *opt)
{
    if (!opt->train) {
        printf("Dropout acts in training mode only; this run is in evaluation mode, so the\n"
               "weights above are used as they are. Try --dropout 0.5 --train.\n\n");
        return;
    }
    const int n = x->shape[1];
    printf("Dropout in training mode, p = %g: each weight is zeroed with probability p\n"
           "and the others are multiplied by 1 / (1 - p) = %g.\n",
           (double)opt->dropout, 1.0 / (1.0 - opt->dropout));
    /* The coin flips come from a generator of their own, so turning dropout
     * on does not change any other number this program prints. */
    Rng coin = rng_new(opt->seed + 1);
    Dropout dropout = {opt->dropout, true, &coin};
    Tensor *weights = NULL;
    Tensor *output = dot_product_attention(x, x, x, NULL, &dropout, &weights);
    tensor_print_named("weights after dropout", weights);
    tensor_print_named("output ", output);
    printf("row sums:");
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int j = 0; j < n; j++)
            sum += AT3(weights, 0, i, j);
        printf(" %.4f", sum);
    }
    printf("   (no longer 1)\n");
    int kept = 0, dropped = 0;
    double worst = 0.0;
    for (size_t i = 0; i < weights->size; i++) {
        if (weights->data[i] == 0.0f) {
            dropped++;
            continue;
        }
        kept++;
        worst = fmax(worst, fabs(weights->data[i] / eval_weights->data[i]
                                 - 1.0 / (1.0 - opt->dropout)));
    }
    printf("%d weights dropped, %d kept; every kept weight is its evaluation value times\n"
           "%g (largest deviation %.1e). On average over many draws the weights\n"
           "are unchanged, which is why evaluation needs no rescaling.\n\n",
           dropped, kept, 1.0 / (1.0 - opt->dropout), worst);
    tensor_free(weights);
    tensor_free(output);
}

/* ---- --cost -------------------------------------------------------------- */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double physical_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (double)pages * (double)page_size : 0.0;
}

static void cost_experiment(const Options *opt, Rng *rng)
{
    const int d = opt->num_hiddens;
    const double memory = physical_memory_bytes();
    printf("Self-attention on n tokens of size d = %d: Q K^T and weights @ V each take\n"
           "n * n * d multiply-adds, and the weights are an n x n matrix of floats.\n"
           "Time is the best of a few runs of dot_product_attention; it varies from\n"
           "run to run and machine to machine, the bytes do not.\n\n", d);
    printf("      n    time (ms)   x prev   weights (MB)   x prev   share of memory\n");
    printf("                                  (10^6 bytes)\n");
    double prev_ms = 0.0, prev_mb = 0.0;
    for (int n = 128; n <= opt->cost_max; n *= 2) {
        Tensor *x = tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, n, d));
        /* repeat small sizes so the time is not all clock resolution */
        const int runs = n <= 512 ? 5 : n <= 2048 ? 2 : 1;
        double best = INFINITY;
        for (int r = 0; r < runs; r++) {
            double start = seconds_now();
            Tensor *out = dot_product_attention(x, x, x, NULL, NULL, NULL);
            best = fmin(best, seconds_now() - start);
            tensor_free(out);
        }
        const double ms = best * 1e3;
        const double bytes = (double)n * n * sizeof(float);
        const double mb = bytes / 1e6;
        printf("  %5d   %10.1f   ", n, ms);
        if (prev_ms > 0.0)
            printf("%6.2f", ms / prev_ms);
        else
            printf("%6s", "");
        printf("   %12.2f   ", mb);
        if (prev_mb > 0.0)
            printf("%6.2f", mb / prev_mb);
        else
            printf("%6s", "");
        if (memory > 0.0)
            printf("   %14.4f%%", 100.0 * bytes / memory);
        printf("\n");
        prev_ms = ms;
        prev_mb = mb;
        tensor_free(x);
    }
    printf("\nDoubling n multiplies the weight matrix by exactly 4 and the time by about 4.\n");
    if (memory > 0.0) {
        double n_fill = sqrt(memory / sizeof(float));
        printf("This machine has %.1f GB: one n x n float matrix alone fills it at n = %.0f,\n"
               "and a model holds one per head and per layer.\n", memory / 1e9, n_fill);
    }
    printf("An 80 GB GPU (an A100) fills with a single matrix at n = %.0f.\n",
           sqrt(80e9 / sizeof(float)));
}

/* ---- options and main ------------------------------------------------------ */

static Options parse_options(int argc, char **argv)
{
    Options opt = {0, 0, 0, 0.5f, false, false, 4096, NULL};
    bool hiddens_given = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--help")) {
            usage();
            exit(0);
        } else if (cli_is(argv[i], "--seed")) {
            opt.seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
        } else if (cli_is(argv[i], "--tokens")) {
            opt.num_tokens = (int)cli_long(PROG, "--tokens", cli_value(PROG, argc, argv, &i), 1,
                                           MAX_TOKENS);
        } else if (cli_is(argv[i], "--hiddens")) {
            opt.num_hiddens = (int)cli_long(PROG, "--hiddens", cli_value(PROG, argc, argv, &i), 1,
                                            MAX_HIDDENS);
            hiddens_given = true;
        } else if (cli_is(argv[i], "--dropout")) {
            const char *text = cli_value(PROG, argc, argv, &i);
            double p = cli_double(PROG, "--dropout", text, 0.0, 1.0);
            /* the library keeps p as a float, where 0.99999999 is already 1 */
            if ((float)p >= 1.0f)
                cli_fail(PROG, "--dropout must be below 1 (1 would drop every weight), got %s%s",
                         text, p < 1.0 ? ", which is 1 as a float" : "");
            opt.dropout = (float)p;
        } else if (cli_is(argv[i], "--train")) {
            opt.train = true;
        } else if (cli_is(argv[i], "--cost")) {
            opt.cost = true;
        } else if (cli_is(argv[i], "--cost-max")) {
            opt.cost_max = (int)cli_long(PROG, "--cost-max", cli_value(PROG, argc, argv, &i), 128,
                                         MAX_COST_N);
        } else if (cli_is(argv[i], "--plot")) {
            opt.plot_dir = cli_value(PROG, argc, argv, &i);
        } else {
            cli_unknown(PROG, argv[i]);
        }
    }
    if (!hiddens_given)
        opt.num_hiddens = opt.cost ? 64 : 3;
    if (hiddens_given && opt.num_tokens == 0 && !opt.cost)
        cli_fail(PROG, "--hiddens sizes random tokens: give --tokens N too "
                 "(the three fixed tokens have size 3)");
    if (opt.plot_dir)
        cli_check_dir(PROG, "--plot", opt.plot_dir);
    return opt;
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    Rng rng = rng_new(opt.seed);
    if (opt.cost) {
        cost_experiment(&opt, &rng);
        return 0;
    }

    Tensor *check_weights = d2l_check(&rng);
    Tensor *self_weights = self_attention(&opt, &rng);
    why_sqrt_d(&rng);

    int status = 0;
    if (opt.plot_dir) {
        const char *const titles[2] = {"softmax(X X^T)", "softmax(X X^T / sqrt(d))"};
        Tensor *check_panel = tensor_reshape(check_weights, SHAPE(2, 10));
        if (plot_heatmaps(opt.plot_dir, "self_attention", self_weights, "keys", "queries",
                          titles) != 0 ||
            plot_heatmaps(opt.plot_dir, "d2l_check", check_panel, "keys", "sequence", NULL) != 0)
            status = 1;
        else
            printf("wrote self_attention and d2l_check (.dat and .gp) into %s; "
                   "render with: gnuplot %s/self_attention.gp\n", opt.plot_dir, opt.plot_dir);
    }
    tensor_free(check_weights);
    tensor_free(self_weights);
    return status;
}
