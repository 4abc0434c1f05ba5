/*
 * 03_self_attention/streaming - attention without the n x n matrix.
 *
 * Part 1: the online softmax on one query and six keys, block by block,
 *         every step printed, and the result set beside the ordinary
 *         softmax(scores) @ values.
 * Part 2: streaming_attention (common/streaming_attention.c) against the
 *         clear dot_product_attention on random tensors with a mask.
 * Part 3: the memory each way needs, as n grows.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, d = query and key
 * size, v = value size; m = running maximum, l = running sum of
 * exponentials, o = running (unnormalised) output.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "io/cli.h"
#include "random.h"
#include "softmax.h"
#include "fast/streaming_attention.h"
#include "tensor.h"

static const char PROG[] = "streaming";

enum { EX_KEYS = 6, EX_D = 2, EX_V = 2, MAX_SIZE = 4096, MAX_HIDDENS = 1024 };
/* Part 2's limits: bytes held at once, and B * T * K * d */
#define MAX_BYTES 1e9
#define MAX_MULTIPLY_ADDS 2e9

typedef struct {
    uint64_t seed;
    int block;          /* keys per block in Part 1 */
    int batch, num_queries, num_keys, num_hiddens, threads;
} Options;

static void print_row(const char *name, const float *x, int n)
{
    printf("%s[", name);
    for (int j = 0; j < n; j++)
        printf("%s%.4f", j ? ", " : "", (double)x[j]);
    printf("]");
}

/* ---- Part 1: the online softmax, by hand ------------------------------------ */

/* The example: one query (d = 2), six keys (6, 2), six values (6, 2),
 * chosen so the maximum moves in one block and stays put in another. */
static const float ex_query[EX_D] = {1.0f, 0.5f};
static const float ex_keys[EX_KEYS][EX_D] = {
    {0.2f, 0.4f}, {1.0f, -0.6f}, {2.0f, 1.4f}, {-0.5f, 0.3f}, {1.6f, 1.0f}, {0.4f, -1.2f}};
static const float ex_values[EX_KEYS][EX_V] = {
    {1.0f, 0.0f}, {0.0f, 1.0f}, {2.0f, 2.0f}, {-1.0f, 0.0f}, {0.0f, -2.0f}, {3.0f, 1.0f}};

/* The ordinary way: all scores (EX_KEYS,), their maximum, all weights,
 * then the weighted sum of values into expected (EX_V,). */
static void all_at_once(const float *scores, float *expected)
{
    float max_all = scores[0], sum_all = 0.0f, weights[EX_KEYS];
    for (int j = 1; j < EX_KEYS; j++)
        max_all = scores[j] > max_all ? scores[j] : max_all;
    for (int j = 0; j < EX_KEYS; j++)
        sum_all += weights[j] = expf(scores[j] - max_all);
    for (int c = 0; c < EX_V; c++)
        expected[c] = 0.0f;
    for (int j = 0; j < EX_KEYS; j++) {
        weights[j] /= sum_all;
        for (int c = 0; c < EX_V; c++)
            expected[c] += weights[j] * ex_values[j][c];
    }
    printf("All at once: weights = softmax(scores) = ");
    print_row("", weights, EX_KEYS);
    printf("\n             output  = weights @ values  = ");
    print_row("", expected, EX_V);
    printf("\n\n");
}

/* One block of n scores starting at key k0 folded into the running m, l
 * and o (EX_V,), every step printed. */
static void add_block(const float *scores, int k0, int n, float *m, float *l, float *o)
{
    if (n == 1)
        printf("\nkey %d: score ", k0);
    else
        printf("\nkeys %d..%d: scores ", k0, k0 + n - 1);
    print_row("", scores + k0, n);
    printf("\n");
    float block_max = scores[k0];
    for (int j = 1; j < n; j++)
        block_max = scores[k0 + j] > block_max ? scores[k0 + j] : block_max;
    float m_new = block_max > *m ? block_max : *m;
    /* everything summed so far was exp(s - m); it must become exp(s - m_new) */
    float rescale = expf(*m - m_new);
    if (*m == -INFINITY)
        printf("  m: -inf -> %.4f (the first block sets it)\n", (double)m_new);
    else if (m_new > *m)
        printf("  m: %.4f -> %.4f (a larger score: the maximum moves)\n", (double)*m,
               (double)m_new);
    else
        printf("  m: %.4f stays (no score here beats it)\n", (double)*m);
    printf("  rescale = exp(m_old - m_new) = %.4f\n", (double)rescale);
    float p[EX_KEYS], block_sum = 0.0f;
    for (int j = 0; j < n; j++)
        block_sum += p[j] = expf(scores[k0 + j] - m_new);
    print_row("  p = exp(scores - m_new) = ", p, n);
    printf(", their sum %.4f\n", (double)block_sum);
    float l_new = *l * rescale + block_sum;
    printf("  l = l * rescale + sum(p) = %.4f * %.4f + %.4f = %.4f\n", (double)*l,
           (double)rescale, (double)block_sum, (double)l_new);
    for (int c = 0; c < EX_V; c++) {
        float add = 0.0f;
        for (int j = 0; j < n; j++)
            add += p[j] * ex_values[k0 + j][c];
        o[c] = o[c] * rescale + add;
    }
    print_row("  o = o * rescale + p @ values = ", o, EX_V);
    printf("\n");
    *m = m_new;
    *l = l_new;
}

/* Checks (cli_check) that the streamed output equals the one computed at
 * once. */
static void part1_online_softmax(int block)
{
    printf("Part 1. The online softmax on one query, %d %s at a time\n\n", block,
           block == 1 ? "key" : "keys");
    float scores[EX_KEYS];
    for (int j = 0; j < EX_KEYS; j++)
        scores[j] = (ex_query[0] * ex_keys[j][0] + ex_query[1] * ex_keys[j][1]) /
                    sqrtf((float)EX_D);
    print_row("query  = ", ex_query, EX_D);
    printf("\nscores = query . key_j / sqrt(2) = ");
    print_row("", scores, EX_KEYS);
    printf("\n\n");
    float expected[EX_V];
    all_at_once(scores, expected);

    /* The streaming way: one block at a time, only m, l and o kept. */
    printf("Block by block: start with m = -inf, l = 0, o = [0, 0]\n");
    float m = -INFINITY, l = 0.0f, o[EX_V] = {0, 0};
    for (int k0 = 0; k0 < EX_KEYS; k0 += block)
        add_block(scores, k0, EX_KEYS - k0 < block ? EX_KEYS - k0 : block, &m, &l, o);
    float streamed[EX_V];
    for (int c = 0; c < EX_V; c++)
        streamed[c] = o[c] / l;
    printf("\nAfter the last block: output = o / l = ");
    print_row("", streamed, EX_V);
    float diff = fmaxf(fabsf(streamed[0] - expected[0]), fabsf(streamed[1] - expected[1]));
    printf("\nThe same as all at once (largest difference below 1e-6: %s).\n",
           diff < 1e-6f ? "yes" : "NO");
    printf("Only m, l and o (here 4 numbers) were kept between blocks; the weights\n"
           "of one block existed only while that block was being added.\n\n");
    char what[80];
    snprintf(what, sizeof what, "the online softmax differs from softmax by %.1e", (double)diff);
    cli_check(diff < 1e-6f, what);
}

/* ---- Part 2: the real thing against the clear version ------------------------- */

/* Checks that the two agree within 1e-5 of the output's size. */
static void part2_compare_with_clear(const Options *opt, Rng *rng)
{
    const int B = opt->batch, T = opt->num_queries, K = opt->num_keys, d = opt->num_hiddens;
    printf("Part 2. streaming_attention against dot_product_attention\n\n");
    Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, d));
    Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, d));
    Tensor *values = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, d));
    /* every other sequence sees only its first two thirds of the keys */
    int *lens = checked_malloc((size_t)B, sizeof(int));
    for (int b = 0; b < B; b++)
        lens[b] = b % 2 == 0 ? K : (2 * K + 2) / 3;
    ValidLens *valid_lens = valid_lens_1d(lens, B);
    printf("queries (%d, %d, %d), keys (%d, %d, %d), values (%d, %d, %d)\n", B, T, d, B, K, d,
           B, K, d);
    valid_lens_print_named("valid_lens", valid_lens);

    Tensor *expected = dot_product_attention(queries, keys, values, valid_lens, NULL, NULL);
    Tensor *actual = streaming_attention(queries, keys, values, valid_lens, opt->threads);
    const float magnitude = tensor_max_abs(expected);
    const float diff = tensor_max_abs_diff(actual, expected);
    const bool same = diff <= 1e-5f * magnitude;
    char diff_text[24];   /* the digits of a residue depend on the machine's vectors */
    printf("\nlargest |streaming - clear|: %s, largest |output| = %.4f\n",
           residue_text(diff_text, sizeof diff_text, diff, 1e-6), (double)magnitude);
    printf("streaming equals clear within 1e-5 of the output's size: %s\n\n",
           same ? "yes" : "NO");
    char what[128];
    snprintf(what, sizeof what, "streaming_attention differs from dot_product_attention by "
             "%.1e, more than 1e-5 of the output's size %.4f", (double)diff, (double)magnitude);
    cli_check(same, what);

    const int v = d;   /* the values here are as wide as the keys */
    const double clear_bytes = 4.0 * B * T * K;
    const double thread_bytes =
        4.0 * (STREAM_BLOCK_QUERIES * (d + v) + STREAM_TILE_QUERIES * STREAM_BLOCK_KEYS);
    const double packed_bytes = 4.0 * K * (d + v);
    printf("dot_product_attention held all B * T * n_k = %d * %d * %d scores: %.2f MB.\n", B, T,
           K, clear_bytes / 1e6);
    printf("streaming_attention held, per thread, a block of %d queries with their\n"
           "running outputs, and the %d scores of %d of them at a time,\n"
           "%d * (d + v) + %d * %d floats: %.0f KB whatever T and n_k are; and the\n"
           "keys and values of the block's sequence, packed for the vector kernel,\n"
           "n_k * (d + v) floats: %.2f MB.\n\n",
           STREAM_BLOCK_QUERIES, STREAM_BLOCK_KEYS, STREAM_TILE_QUERIES, STREAM_BLOCK_QUERIES,
           STREAM_TILE_QUERIES, STREAM_BLOCK_KEYS, thread_bytes / 1e3, packed_bytes / 1e6);
    TENSOR_FREE(queries, keys, values, expected, actual);
    valid_lens_free(valid_lens);
    free(lens);
}

/* ---- Part 3: memory as n grows ----------------------------------------------------- */

static void part3_memory_table(void)
{
    const int d = 64, heads = 8;
    printf("Part 3. Memory for self-attention over n tokens, %d heads of size d = %d\n\n",
           heads, d);
    printf("multihead_forward (the clear layer) keeps the weights of every head,\n"
           "4 * H * n * n bytes. streaming_attention, given one head at a time, keeps\n"
           "per thread that head's keys and values packed, 4 * 2 * n * d bytes, and\n"
           "a block of %d queries with their running outputs and the %d scores of\n"
           "%d of them at a time, 4 * (%d * 2 * d + %d * %d) bytes.\n\n",
           STREAM_BLOCK_QUERIES, STREAM_BLOCK_KEYS, STREAM_TILE_QUERIES, STREAM_BLOCK_QUERIES,
           STREAM_TILE_QUERIES, STREAM_BLOCK_KEYS);
    const double thread_bytes =
        4.0 * (STREAM_BLOCK_QUERIES * 2 * d + STREAM_TILE_QUERIES * STREAM_BLOCK_KEYS);
    printf("      n    clear weights   streaming, 1 thread\n");
    for (int n = 1024; n <= 32768; n *= 2) {
        double clear = 4.0 * heads * (double)n * n;
        double streaming = 4.0 * 2 * n * d + thread_bytes;
        printf("%7d %13.1f MB %16.1f MB\n", n, clear / 1e6, streaming / 1e6);
    }
    printf("\nEach further thread holds as much again. At n = 32768 the weights alone\n"
           "would need 34 GB; streaming needs 17 MB, and the time stays what it was:\n"
           "the same multiply-adds, in another order.\n");
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .block = 2, .batch = 2, .num_queries = 300, .num_keys = 700,
                   .num_hiddens = 64, .threads = 1};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the random tensors of Part 2"},
        {"--block", CLI_INT, &opt.block, .min = 1, .max = EX_KEYS, .metavar = "N",
         .help = "keys per block in the worked example"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 64, .metavar = "B",
         .help = "sequences in Part 2"},
        {"--queries", CLI_INT, &opt.num_queries, .min = 1, .max = MAX_SIZE, .metavar = "T",
         .help = "queries per sequence in Part 2"},
        {"--keys", CLI_INT, &opt.num_keys, .min = 1, .max = MAX_SIZE, .metavar = "N",
         .help = "key-value pairs per sequence in Part 2"},
        {"--dim", CLI_INT, &opt.num_hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "d",
         .help = "size of queries, keys and values in Part 2"},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = 64, .metavar = "N",
         .help = "threads for streaming_attention; the answer does not\ndepend on it"},
    };
    *done = cli_parse(&(CliTable){PROG, "Attention computed over blocks of keys with a running maximum "
                                        "and sum\n(the online softmax), so the T x n_k matrix of weights "
                                        "is never stored.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    /* Part 2 must fit in memory and finish in seconds, so three sizes are
     * checked before anything is made. */
    const double B = opt.batch, T = opt.num_queries, K = opt.num_keys, d = opt.num_hiddens;
    // the clear version needs all B * T * K scores at once
    const double clear_bytes = 4.0 * B * T * K;
    if (clear_bytes > MAX_BYTES)
        cli_fail(PROG, "--batch %d --queries %d --keys %d would need %.1f GB for the clear "
                 "version's scores; keep B * T * n_k under 250 million",
                 opt.batch, opt.num_queries, opt.num_keys, clear_bytes / 1e9);
    // everything at once: queries, keys, values, both outputs, the scores
    const double total_bytes = 4.0 * (B * T * d + 2.0 * B * K * d + 2.0 * B * T * d + B * T * K);
    if (total_bytes > MAX_BYTES)
        cli_fail(PROG, "--batch %d --queries %d --keys %d --dim %d would need %.1f GB for "
                 "the inputs, outputs and scores; keep it under 1 GB",
                 opt.batch, opt.num_queries, opt.num_keys, opt.num_hiddens, total_bytes / 1e9);
    // each version does B * T * K * d multiply-adds twice (scores, then values)
    const double multiply_adds = B * T * K * d;
    if (multiply_adds > MAX_MULTIPLY_ADDS)
        cli_fail(PROG, "--batch %d --queries %d --keys %d --dim %d is too much work: "
                 "B * T * n_k * d = %.1f billion multiply-adds; keep it under 2 billion",
                 opt.batch, opt.num_queries, opt.num_keys, opt.num_hiddens, multiply_adds / 1e9);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    part1_online_softmax(opt.block);         /* six keys, by hand */
    part2_compare_with_clear(&opt, &rng);    /* the real function */
    part3_memory_table();                    /* what it saves */
    return cli_checks_status();
}
