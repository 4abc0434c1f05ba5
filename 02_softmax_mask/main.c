/*
 * 02_softmax_mask - turning scores into weights, and hiding padding.
 *
 * Part 1: softmax as written in textbooks overflows on large scores; the
 *         stable version subtracts the row maximum first, which changes
 *         nothing because softmax only sees differences.
 * Part 2: d2l's masked_softmax examples: a (2, 2, 4) batch of scores with
 *         valid_lens [2, 3] (one length per sequence) and [[1, 3], [2, 4]]
 *         (one length per query), printed and drawn.
 * Part 3: a row with no valid key, four ways: d2l's -1e6 replacement,
 *         -inf, an additive -1e6, and this project's zeros.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "io/plot.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "softmax_mask";

/* Sizes are capped so that every matrix still fits a terminal heatmap. */
enum { MAX_SIZE = HEATMAP_TERMINAL_MAX, MAX_LENS = MAX_SIZE * MAX_SIZE };

typedef struct {
    uint64_t seed;
    int batch, num_queries, num_keys;
    bool sizes_given;
    const char *valid_lens_text;   /* NULL: d2l's two examples */
    const char *plot_dir;          /* NULL: no files */
} Options;

/* ---- Part 1 -------------------------------------------------------------- */

/* row (n,) -> row (n,): exp(x_j) / sum_k exp(x_k) exactly as written. */
static void naive_softmax_row(float *row, int n)
{
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        row[j] = expf(row[j]);
        sum += row[j];
    }
    for (int j = 0; j < n; j++)
        row[j] /= sum;
}

static void print_row(const char *name, const float *row, int n)
{
    Tensor *t = tensor_from(row, SHAPE(n));
    tensor_print_named(name, t);
    tensor_free(t);
}

/* Shift invariance: softmax(x + c) = softmax(x), since
 * exp(x_j + c) / sum exp(x_k + c) = exp(c) exp(x_j) / (exp(c) sum exp(x_k)). */
static void shift_invariance(Rng *rng)
{
    printf("\nAdding the same number c to every score changes nothing:\n");
    enum { N = 6 };
    float x[N], weights[N];
    for (int j = 0; j < N; j++)
        x[j] = 2.0f * rng_normal(rng);
    print_row("x", x, N);
    memcpy(weights, x, sizeof weights);
    softmax_row(weights, N);
    print_row("softmax(x)", weights, N);
    const float shifts[] = {-50.0f, 3.0f, 1000.0f};
    for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++) {
        float shifted[N];
        for (int j = 0; j < N; j++)
            shifted[j] = x[j] + shifts[s];
        softmax_row(shifted, N);
        float worst = 0.0f;
        for (int j = 0; j < N; j++)
            worst = fmaxf(worst, fabsf(shifted[j] - weights[j]));
        printf("  c = %6g: largest change %.1e\n", (double)shifts[s], (double)worst);
    }
    /* the gap from 1000 to the next float up: the rounding step of x + c */
    const float step_near_1000 = nextafterf(1000.0f, INFINITY) - 1000.0f;
    printf("What little changes is the rounding of x + c to a float (floats near 1000\n"
           "are %.2g apart), not softmax: subtracting the maximum cancels c.\n\n",
           (double)step_near_1000);
}

static void part1_stable_softmax(Rng *rng)
{
    printf("Part 1. Softmax on large scores\n\n");
    const float big[3] = {1000.0f, 1001.0f, 1002.0f};
    float exps[3], naive[3], stable[3];
    print_row("scores", big, 3);
    for (int j = 0; j < 3; j++) {
        exps[j] = expf(big[j]);
        naive[j] = big[j];
        stable[j] = big[j];
    }
    naive_softmax_row(naive, 3);
    softmax_row(stable, 3);
    printf("Naive exp(x) / sum(exp(x)): exp(1000) is above the largest float (3.4e38),\n"
           "so every exponential is inf and inf / inf is NaN.\n");
    print_row("  exp(scores)  ", exps, 3);
    print_row("  naive softmax", naive, 3);
    printf("Stable: subtract the maximum first, exp(x - 1002) = exp([-2, -1, 0]).\n");
    print_row("  softmax_row  ", stable, 3);
    const float small[3] = {1.0f, 2.0f, 3.0f};
    float small_weights[3] = {small[0], small[1], small[2]};
    softmax_row(small_weights, 3);
    print_row("  softmax([1, 2, 3])", small_weights, 3);
    const float negative[3] = {-1000.0f, -1001.0f, -1002.0f};
    float naive_negative[3] = {negative[0], negative[1], negative[2]};
    naive_softmax_row(naive_negative, 3);
    printf("Very negative scores fail the other way: exp(-1000) is 0, and 0 / 0 is NaN.\n");
    print_row("  naive softmax([-1000, -1001, -1002])", naive_negative, 3);
    float stable_negative[3] = {negative[0], negative[1], negative[2]};
    softmax_row(stable_negative, 3);
    print_row("  softmax_row  ([-1000, -1001, -1002])", stable_negative, 3);
    shift_invariance(rng);
}

/* ---- Part 2 -------------------------------------------------------------- */

/* One (T, K) matrix out of a (B, T, K) tensor, as a new tensor. */
static Tensor *matrix_of(const Tensor *x, int b)
{
    return tensor_from(&AT3(x, b, 0, 0), SHAPE(x->shape[1], x->shape[2]));
}

/* Print masked_softmax(x, valid_lens) and draw each sequence's weights. */
static Tensor *show_masked(const Tensor *x, const ValidLens *valid_lens)
{
    valid_lens_print_named("valid_lens", valid_lens);
    Tensor *weights = masked_softmax(x, valid_lens);
    tensor_print_named("masked_softmax(X, valid_lens)", weights);
    for (int b = 0; b < x->shape[0]; b++) {
        char title[64];
        if (valid_lens->ndim == 1)
            snprintf(title, sizeof title, "sequence %d: valid_len %d", b,
                     valid_len_at(valid_lens, b, 0));
        else if (x->shape[1] == 2)
            snprintf(title, sizeof title, "sequence %d: valid_lens [%d, %d], one per query", b,
                     valid_len_at(valid_lens, b, 0), valid_len_at(valid_lens, b, 1));
        else
            snprintf(title, sizeof title, "sequence %d: one valid_len per query (row)", b);
        Tensor *matrix = matrix_of(weights, b);
        heatmap_terminal(stdout, matrix, title);
        tensor_free(matrix);
    }
    printf("\n");
    return weights;
}

/* What --plot draws: (P, B, T, K) weights, one titled panel per (T, K). */
typedef struct {
    Tensor *weights;
    char text[2 * MAX_SIZE][64];
    const char *titles[2 * MAX_SIZE];
} Panels;

/* d2l's two examples on the same X (2, 2, 4): one length per sequence, then
 * one per query; a 2 x B grid of (T, K) panels. */
static void show_d2l_examples(const Tensor *x, Panels *panels)
{
    const int B = x->shape[0], T = x->shape[1], K = x->shape[2];
    ValidLens *per_sequence = valid_lens_1d((const int[]){2, 3}, 2);
    ValidLens *per_query = valid_lens_2d((const int[]){1, 3, 2, 4}, 2, 2);
    Tensor *w1 = show_masked(x, per_sequence);
    Tensor *w2 = show_masked(x, per_query);
    panels->weights = tensor_zeros(SHAPE(2, B, T, K));
    memcpy(panels->weights->data, w1->data, w1->size * sizeof(float));
    memcpy(panels->weights->data + w1->size, w2->data, w2->size * sizeof(float));
    for (int b = 0; b < B; b++) {
        snprintf(panels->text[b], 64, "valid_lens [2, 3], seq %d", b);
        snprintf(panels->text[B + b], 64, "valid_lens [[1,3],[2,4]], seq %d", b);
    }
    TENSOR_FREE(w1, w2);
    valid_lens_free(per_sequence);
    valid_lens_free(per_query);
}

/* Part 2: X (B, T, K) uniform in [0, 1), like d2l's torch.rand(2, 2, 4),
 * masked by d2l's examples, or by the given or random lengths when the
 * sizes or lengths come from the command line. */
static void part2_masked_softmax(const Tensor *x, ValidLens *valid_lens, Panels *panels)
{
    printf("Part 2. masked_softmax: keys past valid_len get weight exactly 0\n\n");
    tensor_print_named("X", x);
    printf("\n");
    if (valid_lens == NULL) {
        show_d2l_examples(x, panels);
    } else {
        panels->weights = show_masked(x, valid_lens);
        for (int b = 0; b < x->shape[0]; b++)
            snprintf(panels->text[b], 64, "sequence %d", b);
    }
    for (int p = 0; p < 2 * MAX_SIZE; p++)
        panels->titles[p] = panels->text[p];
}

/* ---- Part 3 -------------------------------------------------------------- */

/* scores (n_k,) of a query whose every key is masked: behaviour 3, an
 * additive mask, moves the whole row by the same amount, and softmax
 * ignores that. */
static void additive_mask_on_every_key(const float *scores, int num_keys)
{
    float *row = checked_malloc((size_t)num_keys, sizeof(float));
    float *unmasked = checked_malloc((size_t)num_keys, sizeof(float));
    for (int j = 0; j < num_keys; j++) {
        row[j] = scores[j] + -1e6f;   /* scores + (-1e6) where masked */
        unmasked[j] = scores[j];
    }
    softmax_row(row, num_keys);
    softmax_row(unmasked, num_keys);
    float worst = 0.0f;
    for (int j = 0; j < num_keys; j++)
        worst = fmaxf(worst, fabsf(row[j] - unmasked[j]));
    printf("\n3. Add -1e6 to masked scores (an additive mask): when every key is masked the\n"
           "   whole row moves by the same amount, and softmax ignores that. The mask\n"
           "   silently does nothing; the query attends to padding as if it were real.\n");
    print_row("   weights           ", row, num_keys);
    print_row("   softmax(unmasked) ", unmasked, num_keys);
    /* the scores sit near -1e6 once the mask is added; this is how finely
     * floats there can tell them apart */
    const float step_near_1e6 = nextafterf(1e6f, INFINITY) - 1e6f;
    printf("   largest difference %.4f: floats near 1e6 are %g apart, so the\n"
           "   scores are also rounded on the way.\n", (double)worst, (double)step_near_1e6);
    free(row);
    free(unmasked);
}

static void part3_query_without_keys(const Tensor *x)
{
    const int num_keys = x->shape[2];
    const float *scores = &AT3(x, 0, 0, 0);
    float *row = checked_malloc((size_t)num_keys, sizeof(float));

    printf("Part 3. A query with no valid key (valid_len = 0)\n\n");
    printf("Take the scores of query 0 of sequence 0 and mask every key:\n");
    print_row("scores", scores, num_keys);

    /* d2l: masked scores are replaced by -1e6, so all of them are equal */
    for (int j = 0; j < num_keys; j++)
        row[j] = -1e6f;
    softmax_row(row, num_keys);
    printf("\n1. Replace by -1e6 (d2l's masked_softmax): every score becomes -1e6, they are\n"
           "   all equal, and softmax spreads the weight evenly over the padding.\n");
    print_row("   weights", row, num_keys);

    /* replace by -inf: the NumPy seed's np.where(mask, scores, -inf), and
     * masked_fill(-inf) in PyTorch 1.x */
    for (int j = 0; j < num_keys; j++)
        row[j] = -INFINITY;
    softmax_row(row, num_keys);
    printf("\n2. Replace by -inf (masked_fill with -inf, as in PyTorch 1.x and NumPy code):\n"
           "   the maximum is -inf, -inf - (-inf) is NaN, and the NaN spreads into every\n"
           "   later layer that touches this row.\n");
    print_row("   weights", row, num_keys);

    additive_mask_on_every_key(scores, num_keys);

    /* this project: valid_len 0 is a loop bound of 0, the row stays 0 */
    for (int j = 0; j < num_keys; j++)
        row[j] = scores[j];
    masked_softmax_row(row, num_keys, 0);
    printf("\n4. This project (masked_softmax_row with valid_len 0): no key, no weight.\n");
    print_row("   weights", row, num_keys);
    printf("   The query's output is a zero vector: no NaN to poison later layers, and\n"
           "   no made-up attention to padding. PyTorch 2.5 and later do the same in\n"
           "   scaled_dot_product_attention. Rows with at least one valid key agree\n"
           "   with d2l exactly, since exp(-1e6 - max) is 0 in float.\n");
    free(row);
}

/* ---- options --------------------------------------------------------------- */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .batch = 2, .num_queries = 2, .num_keys = 4};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the random scores"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = MAX_SIZE, .metavar = "B",
         .help = "batch_size", .given = &opt.sizes_given},
        {"--queries", CLI_INT, &opt.num_queries, .min = 1, .max = MAX_SIZE, .metavar = "T",
         .help = "num_queries", .given = &opt.sizes_given},
        {"--keys", CLI_INT, &opt.num_keys, .min = 1, .max = MAX_SIZE, .metavar = "N",
         .help = "num_keys", .given = &opt.sizes_given},
        {"--valid-lens", CLI_STRING, &opt.valid_lens_text, .metavar = "LIST",
         .help = "comma-separated lengths from 0 to --keys: B of them for one\n"
                 "length per sequence, B*T for one per query",
         .default_text = "d2l's examples [2, 3]\n"
                         "and [[1, 3], [2, 4]]; random lengths when the sizes are changed"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the heatmaps as DIR/masked_softmax.{dat,gp}"},
    };
    *done = cli_parse(&(CliTable){PROG, "Stable softmax, and d2l's masked_softmax on scores of shape (B, T, n_k).",
                                  CLI_COUNT(options), options}, argc, argv);
    return opt;
}

/* The lengths given on the command line, checked against the sizes here,
 * before they reach the library: the library would stop on them too, but
 * with a message meant for a programmer and status 1, not 2. */
static ValidLens *valid_lens_from_text(const Options *opt)
{
    long lens[MAX_LENS];
    int lens_int[MAX_LENS];
    char err[CLI_ERR_LEN];
    const int count = cli_read_long_list("--valid-lens", opt->valid_lens_text, 0, opt->num_keys,
                                         lens, MAX_LENS, err, sizeof err);
    if (count < 0)
        cli_fail(PROG, "%s", err);
    for (int i = 0; i < count; i++)
        lens_int[i] = (int)lens[i];
    if (count == opt->batch)
        return valid_lens_1d(lens_int, opt->batch);
    if (count == opt->batch * opt->num_queries)
        return valid_lens_2d(lens_int, opt->batch, opt->num_queries);
    cli_fail(PROG, "--valid-lens: %d lengths fit neither (batch,) = (%d,) nor "
             "(batch, queries) = (%d, %d)", count, opt->batch, opt->batch, opt->num_queries);
}

/* Random lengths 0..K, one per query, for sizes chosen on the command line. */
static ValidLens *random_valid_lens(const Options *opt, Rng *rng)
{
    int lens[MAX_LENS];
    for (int i = 0; i < opt->batch * opt->num_queries; i++)
        lens[i] = (int)rng_below(rng, (uint32_t)opt->num_keys + 1u);
    return valid_lens_2d(lens, opt->batch, opt->num_queries);
}

/* --plot DIR: the heatmaps of part 2; 0, or the exit status when they
 * cannot be written. */
static int write_plot(const char *dir, const Panels *panels)
{
    const int status = plot_heatmaps_titled(dir, "masked_softmax", "masked_softmax: d2l's two "
                                            "kinds of valid_lens", panels->weights, "keys",
                                            "queries", panels->titles);
    if (status != 0)
        return status;
    printf("\nwrote %s/masked_softmax.dat and %s/masked_softmax.gp "
           "(render: gnuplot %s/masked_softmax.gp)\n", dir, dir, dir);
    return 0;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    /* NULL: d2l's two examples; otherwise the lengths given, or random ones
     * for sizes chosen on the command line */
    ValidLens *valid_lens = opt.valid_lens_text ? valid_lens_from_text(&opt) : NULL;

    part1_stable_softmax(&rng);

    Tensor *x = tensor_uniform(&rng, 0.0f, 1.0f, SHAPE(opt.batch, opt.num_queries, opt.num_keys));
    if (valid_lens == NULL && opt.sizes_given)
        valid_lens = random_valid_lens(&opt, &rng);
    Panels panels = {.weights = NULL};
    part2_masked_softmax(x, valid_lens, &panels);

    part3_query_without_keys(x);

    int status = opt.plot_dir ? write_plot(opt.plot_dir, &panels) : 0;
    TENSOR_FREE(panels.weights, x);
    valid_lens_free(valid_lens);
    return status;
}
