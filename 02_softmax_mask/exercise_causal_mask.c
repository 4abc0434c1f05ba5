/*
 * exercise_causal_mask - a worked solution to chapter 02's exercise 2.
 *
 * A decoder must not look ahead: query i may attend to keys 0..i only.
 * That is a 2-D valid_lens with valid_len = i + 1 for query i, so
 * masked_softmax needs no new code. Padding combines with it by taking the
 * smaller of the two lengths.
 *
 * Legend: B = batch_size, n = number of tokens (T = K = n).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "io/plot.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "exercise_causal_mask";

typedef struct {
    int num_tokens;
    uint64_t seed;
} Options;

/* weights (B, n, n): are the entries above the diagonal exactly 0, and
 * does every row with a key sum to 1? Prints the verdict. */
static int check_causal(const Tensor *weights)
{
    const int batch = weights->shape[0], n = weights->shape[1];
    int above = 0, bad_rows = 0;
    for (int b = 0; b < batch; b++)
        for (int q = 0; q < n; q++) {
            double sum = 0.0;
            for (int k = 0; k < n; k++) {
                sum += AT3(weights, b, q, k);
                above += k > q && AT3(weights, b, q, k) != 0.0f;
            }
            bad_rows += sum < 1.0 - 1e-6 || sum > 1.0 + 1e-6;
        }
    printf("weights above the diagonal that are not exactly 0: %d\n", above);
    printf("rows that do not sum to 1 (within 1e-6): %d\n", bad_rows);
    return above + bad_rows;
}

/* Part 1: valid_len = i + 1 for query i. scores (1, n, n) -> weights
 * (1, n, n); returns how many checks failed. */
static int part1_causal_mask(const Tensor *scores)
{
    const int n = scores->shape[1];
    printf("1. The causal mask: query i sees keys 0..i, so valid_len = i + 1.\n\n");
    int *lens = checked_malloc((size_t)n, sizeof(int));
    for (int q = 0; q < n; q++)
        lens[q] = q + 1;
    ValidLens *causal = valid_lens_2d(lens, 1, n);
    valid_lens_print_named("valid_lens", causal);
    Tensor *weights = masked_softmax(scores, causal);
    tensor_print_named("masked_softmax(scores, valid_lens)", weights);
    Tensor *drawn = tensor_from(weights->data, SHAPE(n, n));
    heatmap_terminal(stdout, drawn, "causal: a lower triangle");
    int failures = check_causal(weights);
    printf("Query 0 sees only itself, so its weight is exactly 1: %.4f\n\n",
           (double)AT3(weights, 0, 0, 0));
    failures += AT3(weights, 0, 0, 0) != 1.0f;
    TENSOR_FREE(weights, drawn);
    valid_lens_free(causal);
    free(lens);
    return failures;
}

/* Part 2: two sequences of the same scores (1, n, n); the second has
 * real_length real tokens, then padding. A key is allowed when it is not
 * in the future AND not padding, so the length is min(i + 1, real length).
 * Returns how many checks failed. */
static int part2_causal_and_padding(const Tensor *scores, int real_length)
{
    const int n = scores->shape[1];
    const int real_lengths[2] = {n, real_length};
    const bool one_padded = real_length == n - 1;
    printf("2. Causal and padding together: sequence 1 has %d real token%s, then padding.\n"
           "   valid_len = min(i + 1, real length).\n\n", real_length, real_length == 1 ? "" : "s");
    Tensor *batch_scores = tensor_zeros(SHAPE(2, n, n));
    int *lens = checked_malloc(2 * (size_t)n, sizeof(int));
    for (int b = 0; b < 2; b++) {
        memcpy(batch_scores->data + (size_t)b * scores->size, scores->data,
               scores->size * sizeof(float));
        for (int q = 0; q < n; q++)
            lens[b * n + q] = q + 1 < real_lengths[b] ? q + 1 : real_lengths[b];
    }
    ValidLens *both = valid_lens_2d(lens, 2, n);
    valid_lens_print_named("valid_lens", both);
    Tensor *weights = masked_softmax(batch_scores, both);
    Tensor *padded = tensor_from(&AT3(weights, 1, 0, 0), SHAPE(n, n));
    tensor_print_named("weights of sequence 1", padded);
    char title[80];
    snprintf(title, sizeof title, "causal + padding: no weight on key%s %d%s",
             one_padded ? "" : "s", real_length, one_padded ? "" : " and later");
    heatmap_terminal(stdout, padded, title);
    int failures = check_causal(weights);
    printf("The padded %s (row%s %d%s) still attend%s to the real token%s;\n"
           "%s ignored later, when the loss skips padding.\n",
           one_padded ? "query" : "queries", one_padded ? "" : "s", real_length,
           one_padded ? "" : " and later", one_padded ? "s" : "",
           real_length == 1 ? "" : "s", one_padded ? "its output is" : "their outputs are");
    TENSOR_FREE(batch_scores, weights, padded);
    valid_lens_free(both);
    free(lens);
    return failures;
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.num_tokens = 5, .seed = 0};
    const CliOption options[] = {
        {"--tokens", CLI_INT, &opt.num_tokens, .min = 2, .max = HEATMAP_TERMINAL_MAX,
         .metavar = "N", .help = "number of tokens n"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the random scores"},
    };
    *done = cli_parse(&(CliTable){PROG, "The causal mask of a decoder as d2l's 2-D valid_lens, alone and combined\n"
                                        "with padding.",
                                  CLI_COUNT(options), options}, argc, argv);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    const int n = opt.num_tokens;
    Rng rng = rng_new(opt.seed);
    /* scores (1, n, n), like Q K^T / sqrt(d) of a self-attention */
    Tensor *scores = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, n, n));

    int failures = part1_causal_mask(scores);
    /* 3 real tokens, fewer when n is small, so that at least one is padding */
    failures += part2_causal_and_padding(scores, n - 1 < 3 ? n - 1 : 3);

    tensor_free(scores);
    cli_check(failures == 0, "a causal weight above the diagonal, or a row that does not "
              "sum to 1");
    return cli_checks_status();
}
