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

#define PROG "noisy_query"

static void usage(void)
{
    printf("usage: %s [--keys K] [--dim D] [--trials N] [--seed N] [--help]\n"
           "\n"
           "How often a noisy query still finds its key by the largest dot product.\n"
           "\n"
           "  --keys K    number of keys (default 3, as in the capital dictionary)\n"
           "  --dim D     size of each key vector (default 4)\n"
           "  --trials N  lookups per noise level (default 2000)\n"
           "  --seed N    seed (default 0)\n"
           "  --help      this text\n", PROG);
}

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

int main(int argc, char **argv)
{
    int num_keys = 3, dim = 4, trials = 2000;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--help")) {
            usage();
            return 0;
        } else if (cli_is(argv[i], "--keys")) {
            num_keys = (int)cli_long(PROG, "--keys", cli_value(PROG, argc, argv, &i), 2, 4096);
        } else if (cli_is(argv[i], "--dim")) {
            dim = (int)cli_long(PROG, "--dim", cli_value(PROG, argc, argv, &i), 1, 4096);
        } else if (cli_is(argv[i], "--trials")) {
            trials = (int)cli_long(PROG, "--trials", cli_value(PROG, argc, argv, &i), 1, 1000000);
        } else if (cli_is(argv[i], "--seed")) {
            seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
        } else {
            cli_unknown(PROG, argv[i]);
        }
    }

    static const float noise_levels[] = {0.0f, 0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
    Rng rng = rng_new(seed);
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(num_keys, dim));
    normalise_rows(keys);
    Tensor *query = tensor_zeros(SHAPE(1, dim));

    printf("%d unit keys in %d dimensions, %d noisy lookups per noise level\n", num_keys, dim, trials);
    printf("noise std   right value found   (chance: %.1f%%)\n", 100.0 / num_keys);
    for (size_t level = 0; level < sizeof noise_levels / sizeof noise_levels[0]; level++) {
        int right = 0;
        for (int t = 0; t < trials; t++) {
            int target = (int)rng_below(&rng, (uint32_t)num_keys);
            /* query (1, d) = key[target] + noise * N(0, 1) per coordinate */
            for (int p = 0; p < dim; p++)
                AT2(query, 0, p) = AT2(keys, target, p) + noise_levels[level] * rng_normal(&rng);
            Tensor *scores = matmul_bt(query, keys);   /* (1, K) */
            int best = 0;
            for (int j = 1; j < num_keys; j++)
                if (AT2(scores, 0, j) > AT2(scores, 0, best))
                    best = j;
            right += best == target;
            tensor_free(scores);
        }
        printf("  %5.2f     %6.1f%%\n", (double)noise_levels[level], 100.0 * right / trials);
    }
    tensor_free(keys);
    tensor_free(query);
    return 0;
}
