/*
 * cost - Part 5 of chapter 03: what the n x n weight matrix costs.
 *
 * Self-attention on n random tokens of size d, for n = 128, 256, ... up to
 * --cost-max: the time of one dot_product_attention(X, X, X), and the bytes
 * of its n x n weight matrix, each beside its ratio to the row before.
 *
 * Legend: n = number of tokens (T = K = n in self-attention), d = size of
 * each token (query, key and value size).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "attention.h"
#include "io/cli.h"
#include "memory.h"
#include "platform.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "cost";

enum { MAX_HIDDENS = 1024, MAX_COST_N = 65536 };

typedef struct {
    uint64_t seed;
    int num_hiddens;   /* d */
    int cost_max;      /* the largest n */
} Options;

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .num_hiddens = 64, .cost_max = 4096};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the random tokens"},
        {"--dim", CLI_INT, &opt.num_hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "d",
         .help = "size d of each token"},
        {"--cost-max", CLI_INT, &opt.cost_max, .min = 128, .max = MAX_COST_N, .metavar = "N",
         .help = "largest n of the table"},
    };
    *done = cli_parse(&(CliTable){PROG, "Part 5 of chapter 03: time one self-attention forward pass "
                                        "for n = 128, 256, ...\nand count the bytes of the n x n "
                                        "weight matrix.",
                                  CLI_COUNT(options), options}, argc, argv);
    return opt;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* x (1, n, d) -> milliseconds of one dot_product_attention(x, x, x), the
 * best of runs */
static double best_time_ms(const Tensor *x, int runs)
{
    double best = INFINITY;
    for (int r = 0; r < runs; r++) {
        double start = seconds_now();
        Tensor *out = dot_product_attention(x, x, x, NULL, NULL, NULL);
        best = fmin(best, seconds_now() - start);
        tensor_free(out);
    }
    return best * 1e3;
}

/* now / prev in a column 6 wide, blank on the first row (prev 0) */
static const char *ratio_str(char *buf, size_t len, double now, double prev)
{
    if (prev > 0.0)
        snprintf(buf, len, "%6.2f", now / prev);
    else
        snprintf(buf, len, "%6s", "");
    return buf;
}

/* Time and memory of the n x n weight matrix as n doubles. */
static void part5_cost(const Options *opt, Rng *rng)
{
    const int d = opt->num_hiddens;
    const double memory = platform_memory_bytes();
    printf("Part 5. What the n x n weight matrix costs\n\n");
    printf("self-attention on n tokens of size d = %d; time: the best of a few runs\n\n", d);
    printf("      n    time (ms)   x prev   weights (MB)   x prev   share of memory\n");
    printf("                                  (10^6 bytes)\n");
    double prev_ms = 0.0, prev_mb = 0.0;
    for (int n = 128; n <= opt->cost_max; n *= 2) {
        Tensor *x = tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, n, d));
        /* repeat small sizes so the time is not all clock resolution */
        const double ms = best_time_ms(x, n <= 512 ? 5 : n <= 2048 ? 2 : 1);
        const double bytes = (double)n * n * sizeof(float);
        const double mb = bytes / 1e6;
        char time_ratio[16], mb_ratio[16];
        printf("  %5d   %10.1f   %s   %12.2f   %s", n, ms,
               ratio_str(time_ratio, sizeof time_ratio, ms, prev_ms), mb,
               ratio_str(mb_ratio, sizeof mb_ratio, mb, prev_mb));
        if (memory > 0.0)
            printf("   %14.4f%%", 100.0 * bytes / memory);
        printf("\n");
        prev_ms = ms;
        prev_mb = mb;
        tensor_free(x);
    }
    if (memory > 0.0)
        printf("\nThis machine has %.1f GB: one n x n float matrix fills it at n = %.0f.\n",
               memory / 1e9, sqrt(memory / sizeof(float)));
    printf("An 80 GB GPU (an A100) fills with a single matrix at n = %.0f.\n",
           sqrt(80e9 / sizeof(float)));
}

/* The table's last row holds the most: its n x n weights, and n x d
 * for the tokens, the output and a product's scratch. */
static int check_memory(const Options *opt)
{
    int n = 128;
    while (2 * n <= opt->cost_max)
        n *= 2;
    char detail[64];
    snprintf(detail, sizeof detail, "the (%d, %d) weights of n = %d", n, n, n);
    return memory_require(4.0 * ((double)n * n + 4.0 * n * opt->num_hiddens), detail,
                          "use a smaller --cost-max");
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    const int status = check_memory(&opt);
    if (status != 0)
        return status;
    Rng rng = rng_new(opt.seed);
    part5_cost(&opt, &rng);
    return 0;
}
