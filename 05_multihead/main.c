/*
 * 05_multihead - the multi-head attention layer and d2l's toy check.
 *
 * Part 1: the layer: num_hiddens split into num_heads heads of size d, its
 *         four projections drawn as nn.Linear draws them.
 * Part 2: d2l's check, num_hiddens 100, 5 heads, 2 sequences of 4 queries
 *         and 6 key-value pairs, valid_lens [3, 2], on d2l's all-ones
 *         inputs, and what they hide.
 * Part 3: the same layer on random inputs, where rows and heads differ.
 *
 * The layer on weights and inputs from .npy files (section 4 of the README),
 * --from and --to, is a mode of this program that is also a tool of its
 * own: layer_files.c, linked in.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (key-value pairs),
 * H = num_heads, D = num_hiddens, d = D / H.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "io/cli.h"
#include "memory.h"
#include "run/layer_files.h"
#include "multihead.h"
#include "multihead_example.h"
#include "random.h"
#include "tensor.h"
#include "valid_lens.h"

static const char PROG[] = "multihead";

/* The file modes, --from and --to: layer_files.c, linked into this program */
int layer_files_main(int argc, char **argv);

typedef struct {
    /* the layer and inputs; the sizes of the inputs stay d2l's (layer_files
     * --to writes the example at other sizes) */
    MultiheadExampleSizes example;
    bool train;
    const char *valid_lens_text;             /* NULL: d2l's [3, 2] */
    const char *plot_dir;
} Options;

/* The built-in example of Parts 1 to 3: the layer and Part 3's inputs
 * (multihead_example.h), its mask, and the generator of Part 2's dropout. */
typedef struct {
    const Options *opt;
    MultiheadExample example;
    MultiHeadAttention *layer;   /* example.layer */
    ValidLens *valid_lens;       /* NULL: --valid-lens none */
    Rng part2_dropout;
} Example;

/* ---- measuring rows and weights ----------------------------------------------- */

/* The rows of output (B, T, D) whose query has keys (every row without
 * valid_lens), compared pair by pair: the largest |entry difference| over
 * the pairs of rows of one sequence (within) and over the pairs of rows of
 * two sequences (across); both are 0 exactly when those rows are equal.
 * Each row with no key is compared with b_o, or 0 without biases
 * (off_bias): what such a row should equal. */
typedef struct { int keyed, empty; float within, across, off_bias; } RowCheck;

static RowCheck check_rows(const Tensor *output, const ValidLens *valid_lens, const Tensor *b_o)
{
    const int B = output->shape[0], T = output->shape[1], D = output->shape[2];
    RowCheck c = {0};
    /* Over every pair of rows, the largest difference in column j is the
     * column's largest entry minus its smallest: one pass finds them per
     * sequence, hi and lo (B, D), instead of one pass per pair of rows. */
    float *hi = checked_malloc((size_t)B * D, sizeof(float));
    float *lo = checked_malloc((size_t)B * D, sizeof(float));
    bool *has_rows = checked_calloc((size_t)B, sizeof(bool));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = &AT3(output, b, t, 0);
            const bool empty = valid_lens != NULL && valid_len_at(valid_lens, b, t) == 0;
            c.empty += empty;
            c.keyed += !empty;
            for (int j = 0; j < D && empty; j++)
                c.off_bias = fmaxf(c.off_bias, fabsf(row[j] - (b_o ? b_o->data[j] : 0.0f)));
            for (int j = 0; j < D && !empty; j++) {
                hi[b * D + j] = has_rows[b] ? fmaxf(hi[b * D + j], row[j]) : row[j];
                lo[b * D + j] = has_rows[b] ? fminf(lo[b * D + j], row[j]) : row[j];
            }
            has_rows[b] = has_rows[b] || !empty;
        }
    for (int b1 = 0; b1 < B; b1++)
        for (int b2 = 0; b2 < B; b2++)
            for (int j = 0; j < D && has_rows[b1] && has_rows[b2]; j++) {
                const float gap = hi[b1 * D + j] - lo[b2 * D + j];
                if (b1 == b2)
                    c.within = fmaxf(c.within, gap);
                else
                    c.across = fmaxf(c.across, gap);
            }
    free(hi);
    free(lo);
    free(has_rows);
    return c;
}

/* Sum of the weights (B, H, T, K) on masked keys: exactly 0 when the mask holds. */
static double weight_on_masked_keys(const Tensor *weights, const ValidLens *valid_lens)
{
    const int B = weights->shape[0], H = weights->shape[1];
    const int T = weights->shape[2], K = weights->shape[3];
    double total = 0.0;
    for (int b = 0; b < B && valid_lens != NULL; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int j = valid_len_at(valid_lens, b, t); j < K; j++)
                    total += AT4(weights, b, h, t, j);
    return total;
}

/* ---- Parts 1 to 3: the built-in example -------------------------------------------- */

static void part1_the_layer(const Example *ex)
{
    const MultiheadExampleSizes *s = &ex->opt->example;
    const int D = s->hiddens, H = s->heads, d = D / H;
    printf("Part 1. The layer\n\n");
    printf("Multi-head attention: num_hiddens = %d, num_heads = %d, so each head has\n"
           "d = num_hiddens / num_heads = %d %s and scores are divided by sqrt(%d) = %.4f.\n",
           D, H, d, plural(d, "hidden", "hiddens"), d, sqrt((double)d));
    printf("batch_size = %d, num_queries = %d, num_keys = %d, dropout = %g (%s).\n",
           s->batch, s->queries, s->keys, (double)s->dropout,
           ex->opt->train ? "training mode: it acts on the weights" : "evaluation mode: off");
    if (ex->valid_lens)
        valid_lens_print_named("valid_lens", ex->valid_lens);
    else
        printf("valid_lens = None (no mask)\n");
    printf("W_q, W_k, W_v, W_o: (%d, %d) each, drawn as nn.Linear does (seed %llu); %s.\n", D, D,
           (unsigned long long)s->seed,
           s->bias ? "with biases" : "no biases (d2l's bias=False)");
}

/* Part 2's verdict, from the rows themselves (README section 2 says why).
 * output (B, T, D) is the layer on all-ones X and Y: every row whose query
 * has keys averages identical values, unless dropout (training mode) zeroes
 * a different set of weights in each row; a row with valid_len 0 has
 * all-zero weights, so it is W_o 0 + b_o = b_o. */
static void explain_all_ones(Example *ex, const Tensor *X, const Tensor *Y, const Tensor *output)
{
    const float tolerance = 1e-6f * (1.0f + tensor_max_abs(output));
    const RowCheck c = check_rows(output, ex->valid_lens, ex->layer->b_o);
    const float spread = fmaxf(c.within, c.across);
    if (c.keyed > 0 && spread <= tolerance) {
        printf("Every %s is equal, up to float rounding: all-ones inputs hide\n"
               "the weights, the mask, the heads and the batch.\n",
               c.empty ? "row whose query has keys" : "output row");
    } else if (c.keyed > 0) {
        /* the same layer and inputs without dropout: what the rows would be */
        Tensor *eval = multihead_forward(ex->layer, X, Y, Y, ex->valid_lens, false, NULL, NULL);
        const RowCheck e = check_rows(eval, ex->valid_lens, NULL);
        printf("The rows whose query has keys differ by up to %.4g; in evaluation mode (same\n"
               "layer, same inputs) by %.4g%s.\n", (double)spread,
               (double)fmaxf(e.within, e.across),
               ex->opt->train && ex->layer->dropout > 0.0f ? ": the difference is dropout" : "");
        tensor_free(eval);
    }
    char who[64] = "The only row has";
    if (c.keyed + c.empty > 1)
        snprintf(who, sizeof who, "%d of the %d rows have", c.empty, c.keyed + c.empty);
    if (c.empty > 0)
        printf("%s valid_len 0: all-zero weights, so such a row is %s\n(%s: %g).\n", who,
               ex->layer->b_o ? "W_o 0 + b_o = b_o" : "W_o 0 = 0 (no biases)",
               ex->layer->b_o ? "largest difference from b_o" : "largest |entry|",
               (double)c.off_bias);
}

/* output (B, T, D): its first six columns and how far its rows differ */
static void print_rows(const Tensor *output)
{
    Tensor *head = tensor_slice(output, 2, 0, output->shape[2] < 6 ? output->shape[2] : 6);
    tensor_print_named("output[:, :, :6]", head);
    tensor_free(head);
    const RowCheck c = check_rows(output, NULL, NULL);
    printf("largest difference between two output rows: %.4g within a sequence, %.4g across "
           "sequences\n", (double)c.within, (double)c.across);
}

static void part2_d2l_check_all_ones(Example *ex)
{
    const Options *opt = ex->opt;
    const MultiheadExampleSizes *s = &opt->example;
    const int B = s->batch, T = s->queries, K = s->keys, D = s->hiddens;
    printf("\nPart 2. d2l's check: X = ones(%d, %d, %d), Y = ones(%d, %d, %d)\n\n",
           B, T, D, B, K, D);
    Tensor *X = tensor_ones(SHAPE(B, T, D));
    Tensor *Y = tensor_ones(SHAPE(B, K, D));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(ex->layer, X, Y, Y, ex->valid_lens, opt->train,
                                       &ex->part2_dropout, &weights);
    char shape[64];
    printf("output = attention(X, Y, Y, valid_lens) has shape %s, as d2l's check_shape expects\n",
           shape_str(shape, sizeof shape, output->ndim, output->shape));
    print_rows(output);
    explain_all_ones(ex, X, Y, output);
    if (ex->valid_lens) {
        Tensor *seq0 = tensor_select(weights, 0, 0);   /* (H, T, K) of sequence 0 */
        printf(opt->train ? "The weights after dropout (sequence 0, every head):\n"
                          : "The weights only show the mask (sequence 0, every head):\n");
        tensor_print_named("attention_weights[0]", seq0);
        tensor_free(seq0);
    }
    TENSOR_FREE(X, Y, output, weights);
}

/* Each head has its own projections, so each looks at the keys its own
 * way: the key it weighs most differs from head to head. */
static void print_favourite_keys(const Tensor *weights)
{
    const int H = weights->shape[1], T = weights->shape[2], K = weights->shape[3];
    printf("key that each head of sequence 0 weighs most, per query:\n");
    for (int h = 0; h < H; h++) {
        printf("  head %d:", h);
        for (int t = 0; t < T; t++) {
            int best = 0;
            for (int j = 1; j < K; j++)
                if (AT4(weights, 0, h, t, j) > AT4(weights, 0, h, t, best))
                    best = j;
            printf(" %d", best);
        }
        printf("\n");
    }
}

static int part3_random_inputs(Example *ex)
{
    const Options *opt = ex->opt;
    const MultiheadExampleSizes *s = &opt->example;
    const int B = s->batch, T = s->queries, K = s->keys, D = s->hiddens;
    printf("\nPart 3. Random inputs: X (%d, %d, %d), Y (%d, %d, %d) ~ normal(0, 1)\n\n",
           B, T, D, B, K, D);
    MultiheadExample *e = &ex->example;
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(e->layer, e->X, e->Y, e->Y, ex->valid_lens, opt->train,
                                       &e->rng, &weights);
    print_rows(output);
    Tensor *seq0 = tensor_select(weights, 0, 0);   /* (H, T, K) of sequence 0 */
    char shape[64];
    printf("per-head attention weights of sequence 0, (H, T, n_k) = %s:\n",
           shape_str(shape, sizeof shape, seq0->ndim, seq0->shape));
    tensor_print_named("attention_weights[0]", seq0);
    tensor_free(seq0);
    printf("weight on masked keys, all sequences and heads: %.4f\n",
           weight_on_masked_keys(weights, ex->valid_lens));
    print_favourite_keys(weights);
    printf("(./05_multihead/head_grid draws every head as a heatmap, in the terminal and "
           "with --plot.)\n");
    const int status = opt->plot_dir ? layer_files_plot_multihead(opt->plot_dir, weights) : 0;
    TENSOR_FREE(output, weights);
    return status;
}

/* ---- the command line --------------------------------------------------------------- */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.example = MULTIHEAD_EXAMPLE_D2L};
    MultiheadExampleSizes *s = &opt.example;
    const CliOption options[] = {
        {"--hiddens", CLI_INT, &s->hiddens, .min = 1, .max = 1024, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &s->heads, .min = 1, .max = 1024, .metavar = "H",
         .help = "num_heads, must divide D", .splits = &s->hiddens},
        {"--valid-lens", CLI_STRING, &opt.valid_lens_text, .metavar = "L",
         .help = "2 comma-separated lengths from 0 to 6, or 'none'", .default_text = "3,2"},
        {"--bias", CLI_FLAG, &s->bias, .help = "give the four projections biases"},
        {"--dropout", CLI_FLOAT, &s->dropout, CLI_DROPOUT_RANGE,
         .help = "dropout on the attention weights"},
        {"--train", CLI_FLAG, &opt.train, .help = "training mode: dropout acts"},
        {"--seed", CLI_U64, &s->seed, .metavar = "N",
         .help = "seed for the parameters and inputs"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the per-head weights as DIR/multihead_weights.{dat,gp}"},
        /* the layer on .npy files, and Part 3's layer written as them */
        {"--from", CLI_MODE, .tool = "layer_files", .mode = layer_files_main,
         .help = "a layer from .npy files, or Part 3's layer written as them"},
        {"--to", CLI_MODE, .tool = "layer_files", .mode = layer_files_main},
        {"--batch", CLI_MODE, .tool = "layer_files", .mode = layer_files_main},
        {"--queries", CLI_MODE, .tool = "layer_files", .mode = layer_files_main},
        {"--keys", CLI_MODE, .tool = "layer_files", .mode = layer_files_main},
    };
    static const char summary[] =
        "Multi-head attention: d2l's check (num_hiddens 100, 5 heads, batch 2, 4 queries,\n"
        "6 key-value pairs, valid_lens [3, 2]) on all-ones and then random inputs.";
    *done = cli_parse(&(CliTable){PROG, summary, CLI_COUNT(options), options}, argc, argv);
    return opt;
}

/* The mask of the example: d2l's [3, 2], --valid-lens (one length for
 * each of d2l's 2 sequences), or 'none' (NULL). */
static ValidLens *read_valid_lens(const Options *opt)
{
    const int B = opt->example.batch, K = opt->example.keys;   /* d2l's 2 and 6 */
    if (opt->valid_lens_text == NULL)
        return valid_lens_1d((const int[2]){3, 2}, 2);
    if (strcmp(opt->valid_lens_text, "none") == 0)
        return NULL;
    long given[2];
    char err[CLI_ERR_LEN];
    const int n = cli_read_long_list("--valid-lens", opt->valid_lens_text, 0, K, given, 2, err,
                                     sizeof err);
    if (n < 0)
        cli_fail(PROG, "%s", err);
    if (n != B)
        cli_fail(PROG, "--valid-lens needs %d lengths (one per sequence), got %d", B, n);
    return valid_lens_1d((const int[2]){(int)given[0], (int)given[1]}, n);
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    const MultiheadExampleSizes *s = &opt.example;
    /* Part 2's dropout draws from a stream of its own, so Part 3's example
     * is the one layer_files --to writes, in training mode too */
    Example ex = {.opt = &opt, .valid_lens = read_valid_lens(&opt),
                  .example = multihead_example_new(s),
                  .part2_dropout = rng_use(s->seed, RNG_ORDERS)};
    ex.layer = ex.example.layer;
    char err[LAYER_FILES_ERR_LEN];
    int status = multihead_check_memory(ex.layer, s->batch, s->queries, s->keys, false, err,
                                        sizeof err) != 0 ? fail("%s", err) : 0;
    if (status == 0) {
        part1_the_layer(&ex);
        part2_d2l_check_all_ones(&ex);
        status = part3_random_inputs(&ex);
    }
    valid_lens_free(ex.valid_lens);
    multihead_example_free(&ex.example);
    return status;
}
