/*
 * noisy_query - worked solution to chapter 01's exercise 3.
 *
 * A dictionary needs the exact key. A dot-product lookup only needs the
 * query to be closer to the right key than to the others. Here every key
 * is a random unit vector in d dimensions, a query is the right key plus
 * Gaussian noise of a given size, and the lookup returns the value whose
 * key has the largest similarity. How often is that the right value?
 *
 * Legend: K = number of keys, d = vector size.
 */
#include <math.h>
#include <stdio.h>

#include "io/cli.h"
#include "ops.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "noisy_query";

static const float noise_levels[] = {0.0f, 0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
enum { NUM_LEVELS = sizeof noise_levels / sizeof noise_levels[0] };

/* Each lookup takes K x d multiply-adds; a run of more than this many is
 * refused before it starts, so that no combination of the options within
 * their ranges runs for hours. */
#define MAX_MULTIPLY_ADDS 1e10

typedef struct {
    int num_keys, dim, trials;
    uint64_t seed;
} Options;

/* Make every row of x (K, d) a unit vector, so that no key wins by length. */
static void normalise_rows(Tensor *x)
{
    int rows = x->shape[0], cols = x->shape[1];
    for (int i = 0; i < rows; i++) {
        double norm = 0.0;
        for (int p = 0; p < cols; p++)
            norm += (double)AT2(x, i, p) * AT2(x, i, p);
        float scale = (float)(1.0 / sqrt(norm));
        for (int p = 0; p < cols; p++)
            AT2(x, i, p) *= scale;
    }
}

/* keys (K, d): the share of trials, in percent, in which a query made of a
 * random key plus noise of standard deviation noise still has its own key
 * as the most similar one. */
static double percent_found(const Tensor *keys, float noise, int trials, Rng *rng)
{
    const int num_keys = keys->shape[0], dim = keys->shape[1];
    Tensor *query = tensor_zeros(SHAPE(1, dim));
    int right = 0;
    for (int t = 0; t < trials; t++) {
        int target = (int)rng_below(rng, (uint32_t)num_keys);
        /* query (1, d) = key[target] + noise * N(0, 1) per coordinate */
        for (int p = 0; p < dim; p++)
            AT2(query, 0, p) = AT2(keys, target, p) + noise * rng_normal(rng);
        Tensor *scores = matmul_bt(query, keys);   /* (1, K) */
        int best = 0;
        for (int j = 1; j < num_keys; j++)
            if (AT2(scores, 0, j) > AT2(scores, 0, best))
                best = j;
        right += best == target;
        tensor_free(scores);
    }
    tensor_free(query);
    return 100.0 * right / trials;
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.num_keys = 3, .dim = 4, .trials = 2000, .seed = 0};
    const CliOption options[] = {
        {"--keys", CLI_INT, &opt.num_keys, .min = 2, .max = 4096, .metavar = "N",
         .help = "number of keys"},
        {"--dim", CLI_INT, &opt.dim, .min = 1, .max = 4096, .metavar = "D",
         .help = "size of each key vector"},
        {"--trials", CLI_INT, &opt.trials, .min = 1, .max = 1000000, .metavar = "N",
         .help = "lookups per noise level"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed"},
    };
    *done = cli_parse(&(CliTable){PROG, "How often a noisy query still finds its key by the largest dot product.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    const double work = (double)NUM_LEVELS * opt.trials * opt.num_keys * opt.dim;
    if (work > MAX_MULTIPLY_ADDS)
        cli_fail(PROG, "--keys %d, --dim %d and --trials %d take %.2g multiply-adds over the %d "
                 "noise levels, more than the %.0e this program allows: use fewer "
                 "trials, keys or dimensions", opt.num_keys, opt.dim, opt.trials, work,
                 (int)NUM_LEVELS, MAX_MULTIPLY_ADDS);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(opt.num_keys, opt.dim));
    normalise_rows(keys);

    printf("%d unit keys in %d %s, %d noisy %s per noise level\n", opt.num_keys, opt.dim,
           plural(opt.dim, "dimension", "dimensions"), opt.trials,
           plural(opt.trials, "lookup", "lookups"));
    printf("noise std   right value found   (chance: %.1f%%)\n", 100.0 / opt.num_keys);
    for (int level = 0; level < NUM_LEVELS; level++)
        printf("  %5.2f     %6.1f%%\n", (double)noise_levels[level],
               percent_found(keys, noise_levels[level], opt.trials, &rng));
    tensor_free(keys);
    return 0;
}
