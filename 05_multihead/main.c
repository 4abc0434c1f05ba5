/*
 * 05_multihead - the multi-head attention layer, d2l's toy check, and the
 * same layer run on weights and inputs from .npy files.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (key-value pairs),
 * H = num_heads, D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and
 * value sizes.
 *
 * Without --from, the program runs d2l's check: num_hiddens 100, 5 heads,
 * 2 sequences of 4 queries and 6 key-value pairs, valid_lens [3, 2], first
 * on d2l's all-ones inputs (which hide almost everything) and then on
 * random ones. With --from DIR it loads queries, keys, values, W_q, W_k,
 * W_v, W_o, the optional biases and valid_lens from .npy files in DIR, checks that
 * every shape fits, runs the layer and, with --to, writes output.npy and
 * attention_weights.npy for comparison with PyTorch.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/cli.h"
#include "multihead.h"
#include "io/npy.h"
#include "io/plot.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "multihead";

enum { MAX_BATCH = 64 };

typedef struct {
    int batch, queries, keys, hiddens, heads;
    int valid_lens[MAX_BATCH];
    bool no_mask, bias, train;
    float dropout;
    uint64_t seed;
    const char *from_dir, *to_dir, *plot_dir;
} Options;

static void usage(void)
{
    printf("usage: %s [options]\n"
           "\n"
           "Runs d2l's multi-head attention check (num_hiddens 100, 5 heads, batch 2,\n"
           "4 queries, 6 key-value pairs, valid_lens [3, 2]) on all-ones inputs and then\n"
           "on random inputs; or, with --from, a layer whose inputs and weights are .npy files.\n"
           "\n"
           "options for the built-in example:\n"
           "  --batch B          sequences, 1 to %d (default 2)\n"
           "  --queries T        queries per sequence, 1 to 256 (default 4)\n"
           "  --keys K           key-value pairs per sequence, 1 to 256 (default 6)\n"
           "  --hiddens D        num_hiddens, 1 to 1024 (default 100)\n"
           "  --heads H          num_heads, must divide D (default 5)\n"
           "  --valid-lens L     B comma-separated lengths from 0 to K, or 'none'\n"
           "                     (default 3,2; for other batch sizes K for every sequence)\n"
           "  --bias             give the four projections biases (d2l's default is none)\n"
           "  --dropout P        dropout on the attention weights, 0 to 0.99 (default 0.5)\n"
           "  --train            training mode: dropout acts (evaluation is the default)\n"
           "  --seed N           seed for the parameters and inputs (default 0)\n"
           "\n"
           "running from files:\n"
           "  --from DIR         read DIR/queries.npy (B,T,Dq), keys.npy (B,K,Dk),\n"
           "                     values.npy (B,K,Dv), W_q.npy (D,Dq), W_k.npy (D,Dk),\n"
           "                     W_v.npy (D,Dv), W_o.npy (D,D); optional b_q.npy, b_k.npy,\n"
           "                     b_v.npy, b_o.npy (D,) and valid_lens.npy (B,) or (B,T),\n"
           "                     int32 or int64. Weights in PyTorch's (out, in) layout.\n"
           "                     If DIR holds expected_output.npy and\n"
           "                     expected_attention_weights.npy, they are compared too.\n"
           "  --heads H          with --from: the number of heads (required)\n"
           "  --to DIR           write DIR/output.npy (B,T,D) and DIR/attention_weights.npy\n"
           "                     (B,H,T,K) as float32; for the built-in example also its\n"
           "                     inputs and parameters, so that DIR works with --from\n"
           "  --plot DIR         write the per-head weights as a grid of heatmaps,\n"
           "                     DIR/multihead_weights.dat and .gp (gnuplot makes the .png)\n"
           "  --help             this text\n", PROG, MAX_BATCH);
}

/* ---- printing helpers ------------------------------------------------------ */

/* x[..., :n] of a 3-D tensor, a new tensor */
static Tensor *first_columns(const Tensor *x, int n)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    if (n > D)
        n = D;
    Tensor *out = tensor_zeros(SHAPE(B, T, n));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < n; j++)
                AT3(out, b, t, j) = AT3(x, b, t, j);
    return out;
}

/* Largest difference between two rows of x (B, T, D): between rows of the
 * same sequence when across is false, between sequences when it is true.
 * Every row is compared with the first row of its sequence (or of the
 * batch), so the result is zero exactly when those rows are all equal. */
static float largest_row_difference(const Tensor *x, bool across)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    float worst = 0.0f;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) {
                float ref = across ? AT3(x, 0, 0, j) : AT3(x, b, 0, j);
                float diff = fabsf(AT3(x, b, t, j) - ref);
                if (diff > worst)
                    worst = diff;
            }
    return worst;
}

/* weights (B, H, T, K) -> (H, T, K) of sequence b */
static Tensor *sequence_heads(const Tensor *weights, int b)
{
    const int H = weights->shape[1], T = weights->shape[2], K = weights->shape[3];
    return tensor_from(weights->data + (size_t)b * H * T * K, SHAPE(H, T, K));
}

/* Sum of the weights that sit on masked keys: exactly 0 when the mask holds. */
static double weight_on_masked_keys(const Tensor *weights, const ValidLens *valid_lens)
{
    if (valid_lens == NULL)
        return 0.0;
    const int B = weights->shape[0], H = weights->shape[1];
    const int T = weights->shape[2], K = weights->shape[3];
    double total = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int j = valid_len_at(valid_lens, b, t); j < K; j++)
                    total += AT4(weights, b, h, t, j);
    return total;
}

static int write_plot(const char *dir, const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    char (*titles)[48] = checked_malloc(PROG, (size_t)B * H, sizeof *titles);
    const char **title_ptrs = checked_malloc(PROG, (size_t)B * H, sizeof *title_ptrs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            snprintf(titles[b * H + h], sizeof titles[0], "sequence %d, head %d", b, h);
            title_ptrs[b * H + h] = titles[b * H + h];
        }
    int status = plot_heatmaps(dir, "multihead_weights", weights, "keys", "queries",
                               title_ptrs);
    if (status == 0)
        printf("wrote %s/multihead_weights.dat and .gp: %d x %d panels "
               "(run gnuplot %s/multihead_weights.gp for the .png)\n", dir, B, H, dir);
    free(titles);
    free(title_ptrs);
    return status;
}

/* Part 1's verdict, from the rows themselves. output (B, T, D) is the layer
 * on all-ones X (B, T, D) and Y (B, K, D). A row whose query has keys to
 * attend to averages identical value vectors, so in evaluation mode all
 * those rows are one vector; in training mode dropout zeroes a different
 * set of weights in each row. A row with valid_len 0 has all-zero weights,
 * so its attention output is zero and the row is W_o 0 + b_o = b_o. */
static void explain_all_ones(const MultiHeadAttention *layer, const Tensor *X, const Tensor *Y,
                             const ValidLens *valid_lens, bool train, const Tensor *output)
{
    const int B = output->shape[0], T = output->shape[1], D = output->shape[2];
    const float tolerance = 1e-6f * (1.0f + tensor_max_abs(output));
    /* the first row that has keys is what every other such row is compared to */
    const float *first_keyed = NULL;
    int keyed_rows = 0, empty_rows = 0;
    float keyed_spread = 0.0f, empty_from_bias = 0.0f;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = output->data + ((size_t)b * T + t) * D;
            bool empty = valid_lens != NULL && valid_len_at(valid_lens, b, t) == 0;
            for (int j = 0; j < D; j++) {
                if (empty) {
                    float bias = layer->b_o ? layer->b_o->data[j] : 0.0f;
                    empty_from_bias = fmaxf(empty_from_bias, fabsf(row[j] - bias));
                } else if (first_keyed != NULL) {
                    keyed_spread = fmaxf(keyed_spread, fabsf(row[j] - first_keyed[j]));
                }
            }
            if (empty)
                empty_rows++;
            else if (keyed_rows++ == 0)
                first_keyed = row;
        }

    if (keyed_rows > 0 && keyed_spread <= tolerance && empty_rows == 0) {
        printf("Every output row is equal (across sequences up to float rounding: averages of\n"
               "different numbers of copies of one vector round differently). With all-ones inputs\n"
               "every query, key and value is the same vector, so each head averages identical\n"
               "values: the weights, the mask, the heads and the batch cannot change a thing.\n"
               "The shape check passes, and so would a layer with a masking or head-order bug.\n");
    } else if (keyed_rows > 0 && keyed_spread <= tolerance) {
        printf("Every row whose query has keys is equal (up to float rounding): with all-ones\n"
               "inputs each head averages identical values, so the weights, the mask, the heads\n"
               "and the batch cannot change those rows.\n");
    } else if (keyed_rows > 0) {
        /* the same layer and inputs without dropout: what the rows would be */
        Tensor *eval_output = multihead_forward(layer, X, Y, Y, valid_lens, false, NULL, NULL);
        float eval_spread = 0.0f;
        const float *eval_first = NULL;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                if (valid_lens != NULL && valid_len_at(valid_lens, b, t) == 0)
                    continue;
                const float *row = eval_output->data + ((size_t)b * T + t) * D;
                if (eval_first == NULL)
                    eval_first = row;
                for (int j = 0; j < D; j++)
                    eval_spread = fmaxf(eval_spread, fabsf(row[j] - eval_first[j]));
            }
        tensor_free(eval_output);
        printf("The rows whose query has keys differ from the first of them by up to %.3g;\n"
               "in evaluation mode (same layer, same inputs) by %.3g.\n", (double)keyed_spread,
               (double)eval_spread);
        if (train && layer->dropout > 0.0f)
            printf("The difference is dropout in training mode: each row loses its own random\n"
                   "set of weights and the rest are scaled by 1 / (1 - p).\n");
    }
    if (empty_rows > 0) {
        printf("%d of the %d rows have valid_len 0: no key takes part, so their weights and their\n"
               "attention output are zero, and each such row is\n%s: %g).\n", empty_rows, B * T,
               layer->b_o ? "W_o 0 + b_o = b_o (largest difference from b_o"
                          : "W_o 0 = 0, the layer having no biases (largest |entry|",
               (double)empty_from_bias);
    }
}

/* ---- the built-in example ---------------------------------------------------- */

/* Save one tensor into dir; prints the error line and returns -1 on failure. */
static int save_tensor(const char *dir, const char *name, const Tensor *x)
{
    char path[4096], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (npy_save(path, x, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return -1;
    }
    return 0;
}

/* Remove DIR/NAME.npy for each name. A failed --to calls it on what the
 * run wrote, so no file is left without the others it belongs with. */
static void remove_saved(const char *dir, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", dir, names[i]);
        remove(path);
    }
}

static int save_results(const char *dir, const Tensor *output, const Tensor *weights)
{
    if (save_tensor(dir, "output", output) != 0)
        return -1;
    if (save_tensor(dir, "attention_weights", weights) != 0) {
        remove_saved(dir, (const char *const[]){"output"}, 1);
        return -1;
    }
    char s1[64], s2[64];
    printf("wrote %s/output.npy %s and %s/attention_weights.npy %s\n", dir,
           shape_str(s1, sizeof s1, output->ndim, output->shape), dir,
           shape_str(s2, sizeof s2, weights->ndim, weights->shape));
    return 0;
}

/* Everything --from needs, so that the directory --to writes can be run again. */
static int save_example(const char *dir, const MultiHeadAttention *layer, const Tensor *queries,
                        const Tensor *keys, const Tensor *values, const ValidLens *valid_lens)
{
    const Tensor *tensors[] = {queries, keys, values, layer->W_q, layer->W_k, layer->W_v,
                               layer->W_o, layer->b_q, layer->b_k, layer->b_v, layer->b_o};
    static const char *const names[] = {"queries", "keys", "values", "W_q", "W_k", "W_v",
                                        "W_o", "b_q", "b_k", "b_v", "b_o"};
    const size_t count = sizeof tensors / sizeof tensors[0];
    for (size_t i = 0; i < count; i++) {
        if (tensors[i] == NULL) {
            /* a b_q.npy left from an earlier run with --bias would give this
             * layer biases it does not have */
            remove_saved(dir, &names[i], 1);
        } else if (save_tensor(dir, names[i], tensors[i]) != 0) {
            remove_saved(dir, names, i);
            return -1;
        }
    }
    if (valid_lens != NULL) {
        char path[4096], err[NPY_ERR_LEN];
        snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
        if (npy_save_ints(path, valid_lens->data, valid_lens->ndim, valid_lens->shape, err,
                          sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", PROG, err);
            remove_saved(dir, names, count);
            return -1;
        }
    } else {
        /* a valid_lens.npy left from an earlier run would mask this one */
        remove_saved(dir, (const char *const[]){"valid_lens"}, 1);
    }
    return 0;
}

static int run_example(const Options *opt)
{
    const int B = opt->batch, T = opt->queries, K = opt->keys, D = opt->hiddens, H = opt->heads;
    Rng rng = rng_new(opt->seed);
    MultiHeadAttention *layer = multihead_new(D, D, D, D, H, opt->dropout, opt->bias, &rng);
    ValidLens *valid_lens = opt->no_mask ? NULL : valid_lens_1d(opt->valid_lens, B);
    char shape[64];
    int status = 0;

    printf("Multi-head attention: num_hiddens = %d, num_heads = %d, so each head has\n"
           "d = num_hiddens / num_heads = %d hiddens and scores are divided by sqrt(%d) = %.4f.\n",
           D, H, D / H, D / H, sqrt((double)(D / H)));
    printf("batch_size = %d, num_queries = %d, num_kvpairs = %d, dropout = %g (%s).\n", B, T, K,
           (double)opt->dropout, opt->train ? "training mode: it acts on the weights"
                                            : "evaluation mode: off");
    if (valid_lens)
        valid_lens_print_named("valid_lens", valid_lens);
    else
        printf("valid_lens = None (no mask)\n");
    printf("W_q, W_k, W_v, W_o: (%d, %d) each, drawn as nn.Linear does (seed %llu); %s.\n", D, D,
           (unsigned long long)opt->seed,
           opt->bias ? "with biases" : "no biases (d2l's bias=False)");

    // part 1: d2l's own check, all-ones inputs
    printf("\n---- 1. d2l's check: X = ones(%d, %d, %d), Y = ones(%d, %d, %d) ----\n\n",
           B, T, D, B, K, D);
    Tensor *X = tensor_ones(SHAPE(B, T, D));
    Tensor *Y = tensor_ones(SHAPE(B, K, D));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, X, Y, Y, valid_lens, opt->train, &rng, &weights);
    printf("output = attention(X, Y, Y, valid_lens) has shape %s, as d2l's check_shape expects\n",
           shape_str(shape, sizeof shape, output->ndim, output->shape));
    Tensor *head = first_columns(output, 6);
    tensor_print_named("output[:, :, :6]", head);
    tensor_free(head);
    float within = largest_row_difference(output, false);
    float across = largest_row_difference(output, true);
    printf("largest difference between two output rows: %g within a sequence, %.3g across "
           "sequences\n", (double)within, (double)across);
    explain_all_ones(layer, X, Y, valid_lens, opt->train, output);
    if (valid_lens) {
        Tensor *seq0 = sequence_heads(weights, 0);
        printf(opt->train ? "The weights after dropout (sequence 0, every head):\n"
                          : "The weights only show the mask (sequence 0, every head):\n");
        tensor_print_named("attention_weights[0]", seq0);
        tensor_free(seq0);
    }
    tensor_free(X);
    tensor_free(Y);
    tensor_free(output);
    tensor_free(weights);

    // part 2: random inputs, where rows and heads differ
    printf("\n---- 2. random inputs: X (%d, %d, %d), Y (%d, %d, %d) ~ normal(0, 1) ----\n\n",
           B, T, D, B, K, D);
    X = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, D));
    Y = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, D));
    output = multihead_forward(layer, X, Y, Y, valid_lens, opt->train, &rng, &weights);
    head = first_columns(output, 6);
    tensor_print_named("output[:, :, :6]", head);
    tensor_free(head);
    printf("largest difference between two output rows: %.4f within a sequence, %.4f across "
           "sequences\n",
           (double)largest_row_difference(output, false),
           (double)largest_row_difference(output, true));
    Tensor *seq0 = sequence_heads(weights, 0);
    printf("per-head attention weights of sequence 0, (H, T, K) = %s:\n",
           shape_str(shape, sizeof shape, seq0->ndim, seq0->shape));
    tensor_print_named("attention_weights[0]", seq0);
    tensor_free(seq0);
    printf("weight on masked keys, all sequences and heads: %.4f\n",
           weight_on_masked_keys(weights, valid_lens));

    /* Each head has its own projections, so each looks at the keys its own
     * way: the key it weighs most differs from head to head. */
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
    printf("(./05_multihead/head_grid draws every head as a heatmap, in the terminal and with --plot.)\n");
    if (opt->plot_dir && write_plot(opt->plot_dir, weights) != 0)
        status = 1;
    if (status == 0 && opt->to_dir) {
        if (save_example(opt->to_dir, layer, X, Y, Y, valid_lens) != 0) {
            status = 1;
        } else if (save_results(opt->to_dir, output, weights) != 0) {
            static const char *const example[] = {"queries", "keys", "values", "W_q", "W_k",
                                                  "W_v", "W_o", "b_q", "b_k", "b_v", "b_o",
                                                  "valid_lens"};
            remove_saved(opt->to_dir, example, sizeof example / sizeof example[0]);
            status = 1;
        } else {
            printf("%s also holds the inputs and parameters: run it again with\n"
                   "  %s --from %s --heads %d\n", opt->to_dir, PROG, opt->to_dir, H);
        }
    }
    tensor_free(X);
    tensor_free(Y);
    tensor_free(output);
    tensor_free(weights);
    valid_lens_free(valid_lens);
    multihead_free(layer);
    return status;
}

/* ---- running from files ------------------------------------------------------- */

typedef struct {
    Tensor *queries, *keys, *values;
    MultiHeadAttention *layer;
    ValidLens *valid_lens;
    int valid_lens_itemsize;
} Loaded;

static void loaded_free(Loaded *in)
{
    tensor_free(in->queries);
    tensor_free(in->keys);
    tensor_free(in->values);
    multihead_free(in->layer);
    valid_lens_free(in->valid_lens);
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* DIR/NAME.npy as float32; NULL after printing the error line. Optional
 * files that do not exist give NULL and no message. */
static Tensor *load(const char *dir, const char *name, bool optional, bool *failed)
{
    char path[4096], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (optional && !file_exists(path))
        return NULL;
    Tensor *x = npy_load(path, err, sizeof err);
    if (x == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        *failed = true;
    }
    return x;
}

/* Print "multihead: DIR/NAME.npy has shape (...), expected ...: why" and
 * return false unless x has the shape (-1 matches any size). */
static bool check_file_shape(const char *dir, const char *name, const Tensor *x, int ndim,
                             const int *shape, const char *why)
{
    if (tensor_has_shape(x, ndim, shape))
        return true;
    char have[80], want[80];
    fprintf(stderr, "%s: %s/%s.npy has shape %s, expected %s = %s\n", PROG, dir, name,
            shape_str(have, sizeof have, x->ndim, x->shape),
            shape_str(want, sizeof want, ndim, shape), why);
    return false;
}

/* valid_lens.npy: (B,) or (B, T) integers from 0 to K. */
static int load_valid_lens(const char *dir, int B, int T, int K, ValidLens **out)
{
    char path[4096], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
    *out = NULL;
    if (!file_exists(path))
        return 0;
    NpyInts ints;
    if (npy_load_ints(path, &ints, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return -1;
    }
    char have[80];
    shape_str(have, sizeof have, ints.ndim, ints.shape);
    if (!(ints.ndim == 1 && ints.shape[0] == B) &&
        !(ints.ndim == 2 && ints.shape[0] == B && ints.shape[1] == T)) {
        fprintf(stderr, "%s: %s has shape %s, expected (%d,) or (%d, %d): one length per "
                "sequence of queries.npy, or one per query\n", PROG, path, have, B, B, T);
        npy_ints_free(&ints);
        return -1;
    }
    for (size_t i = 0; i < ints.size; i++)
        if (ints.data[i] < 0 || ints.data[i] > K) {
            fprintf(stderr, "%s: %s: element %zu is %d; a length must be from 0 to the "
                    "number of keys in keys.npy, %d\n", PROG, path, i, ints.data[i], K);
            npy_ints_free(&ints);
            return -1;
        }
    *out = ints.ndim == 1 ? valid_lens_1d(ints.data, B) : valid_lens_2d(ints.data, B, T);
    npy_ints_free(&ints);
    return 0;
}

/* Load and check everything in dir; 0, or -1 after one error line. */
static int load_dir(const char *dir, int H, Loaded *in)
{
    bool failed = false;
    memset(in, 0, sizeof *in);
    in->queries = load(dir, "queries", false, &failed);
    if (!failed)
        in->keys = load(dir, "keys", false, &failed);
    if (!failed)
        in->values = load(dir, "values", false, &failed);
    if (failed)
        return -1;

    // pass 1: the inputs fix B, T, K and the three input sizes
    const Tensor *q = in->queries, *k = in->keys, *v = in->values;
    if (!check_file_shape(dir, "queries", q, SHAPE(-1, -1, -1),
                          "(batch_size, num_queries, query_size)"))
        return -1;
    const int B = q->shape[0], T = q->shape[1], Dq = q->shape[2];
    if (!check_file_shape(dir, "keys", k, SHAPE(B, -1, -1),
                          "(batch_size, num_keys, key_size), batch_size from queries.npy"))
        return -1;
    const int K = k->shape[1], Dk = k->shape[2];
    if (!check_file_shape(dir, "values", v, SHAPE(B, K, -1),
                          "(batch_size, num_keys, value_size), one value per key of keys.npy"))
        return -1;
    const int Dv = v->shape[2];

    // pass 2: the weights, in PyTorch's (out_features, in_features) layout
    MultiHeadAttention *layer = checked_calloc(PROG, 1, sizeof *layer);
    in->layer = layer;
    layer->W_q = load(dir, "W_q", false, &failed);
    if (failed)
        return -1;
    if (!check_file_shape(dir, "W_q", layer->W_q, SHAPE(-1, Dq),
                          "(num_hiddens, query_size), PyTorch's (out, in) layout"))
        return -1;
    const int D = layer->W_q->shape[0];
    static const char *const names[] = {"W_k", "W_v", "W_o"};
    Tensor **slots[] = {&layer->W_k, &layer->W_v, &layer->W_o};
    const int ins[] = {Dk, Dv, D};
    static const char *const whys[] = {
        "(num_hiddens, key_size), num_hiddens from W_q.npy and key_size from keys.npy",
        "(num_hiddens, value_size), num_hiddens from W_q.npy and value_size from values.npy",
        "(num_hiddens, num_hiddens), num_hiddens from W_q.npy",
    };
    for (int i = 0; i < 3; i++) {
        *slots[i] = load(dir, names[i], false, &failed);
        if (failed || !check_file_shape(dir, names[i], *slots[i], SHAPE(D, ins[i]), whys[i]))
            return -1;
    }
    static const char *const bias_names[] = {"b_q", "b_k", "b_v", "b_o"};
    Tensor **bias_slots[] = {&layer->b_q, &layer->b_k, &layer->b_v, &layer->b_o};
    for (int i = 0; i < 4; i++) {
        *bias_slots[i] = load(dir, bias_names[i], true, &failed);
        if (failed)
            return -1;
        if (*bias_slots[i] && !check_file_shape(dir, bias_names[i], *bias_slots[i], SHAPE(D),
                                                "(num_hiddens,), num_hiddens from W_q.npy"))
            return -1;
        layer->bias = layer->bias || *bias_slots[i] != NULL;
    }
    if (D % H != 0) {
        fprintf(stderr, "%s: --heads %d does not divide num_hiddens %d (from %s/W_q.npy): "
                "every head needs the same size\n", PROG, H, D, dir);
        return -1;
    }
    layer->query_size = Dq;
    layer->key_size = Dk;
    layer->value_size = Dv;
    layer->num_hiddens = D;
    layer->num_heads = H;
    layer->dropout = 0.0f;

    // pass 3: the optional mask
    return load_valid_lens(dir, B, T, K, &in->valid_lens);
}

/* Compare with DIR/expected_NAME.npy when it exists: 0 agree or absent,
 * 1 differ, -1 unreadable. */
static int compare_expected(const char *dir, const char *name, const Tensor *actual)
{
    char file[64];
    snprintf(file, sizeof file, "expected_%s", name);
    bool failed = false;
    Tensor *expected = load(dir, file, true, &failed);
    if (failed)
        return -1;
    if (expected == NULL)
        return 0;
    int status = 0;
    if (!tensor_has_shape(expected, actual->ndim, actual->shape)) {
        char have[80], want[80];
        printf("%s.npy has shape %s, but %s has %s: DIFFERENT\n", file,
               shape_str(have, sizeof have, expected->ndim, expected->shape), name,
               shape_str(want, sizeof want, actual->ndim, actual->shape));
        status = 1;
    } else {
        /* float32 sums taken in another order agree to about 1e-6 here */
        bool close = tensor_allclose(actual, expected, 1e-5f, 1e-5f, NULL);
        printf("%s vs %s.npy: largest difference %.3g, %s\n", name, file,
               (double)tensor_max_abs_diff(actual, expected),
               close ? "equal within 1e-5" : "DIFFERENT (beyond 1e-5)");
        status = close ? 0 : 1;
    }
    tensor_free(expected);
    return status;
}

static int run_from(const Options *opt)
{
    Loaded in;
    if (load_dir(opt->from_dir, opt->heads, &in) != 0) {
        loaded_free(&in);
        return 1;
    }
    const MultiHeadAttention *layer = in.layer;
    char s[4][64];
    printf("Loaded %s:\n  queries %s, keys %s, values %s\n", opt->from_dir,
           shape_str(s[0], sizeof s[0], in.queries->ndim, in.queries->shape),
           shape_str(s[1], sizeof s[1], in.keys->ndim, in.keys->shape),
           shape_str(s[2], sizeof s[2], in.values->ndim, in.values->shape));
    printf("  W_q %s, W_k %s, W_v %s, W_o %s, %s\n",
           shape_str(s[0], sizeof s[0], layer->W_q->ndim, layer->W_q->shape),
           shape_str(s[1], sizeof s[1], layer->W_k->ndim, layer->W_k->shape),
           shape_str(s[2], sizeof s[2], layer->W_v->ndim, layer->W_v->shape),
           shape_str(s[3], sizeof s[3], layer->W_o->ndim, layer->W_o->shape),
           layer->bias ? "with biases" : "no biases");
    if (in.valid_lens)
        valid_lens_print_named("  valid_lens", in.valid_lens);
    else
        printf("  no valid_lens.npy: no mask\n");
    printf("num_heads = %d, head size d = %d\n\n", layer->num_heads,
           layer->num_hiddens / layer->num_heads);

    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, in.queries, in.keys, in.values, in.valid_lens,
                                       false, NULL, &weights);
    tensor_print_named("output", output);
    tensor_print_named("attention_weights", weights);
    printf("\n");
    int status = 0;
    int c1 = compare_expected(opt->from_dir, "output", output);
    int c2 = compare_expected(opt->from_dir, "attention_weights", weights);
    if (c1 < 0 || c2 < 0)
        status = 1;
    if (opt->plot_dir && write_plot(opt->plot_dir, weights) != 0)
        status = 1;
    if (status == 0 && opt->to_dir && save_results(opt->to_dir, output, weights) != 0)
        status = 1;
    if (status == 0 && (c1 > 0 || c2 > 0)) {
        fprintf(stderr, "%s: the results differ from the expected_*.npy files in %s\n", PROG,
                opt->from_dir);
        status = 1;
    }
    tensor_free(output);
    tensor_free(weights);
    loaded_free(&in);
    return status;
}

/* ---- options ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    Options opt = {.batch = 2, .queries = 4, .keys = 6, .hiddens = 100, .heads = 5,
                   .dropout = 0.5f, .seed = 0};
    const char *lens_text = NULL;
    bool heads_given = false;
    bool example_flags = false;   /* flags that only the built-in example uses */

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is(arg, "--batch")) {
            opt.batch = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, MAX_BATCH);
            example_flags = true;
        } else if (cli_is(arg, "--queries")) {
            opt.queries = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 256);
            example_flags = true;
        } else if (cli_is(arg, "--keys")) {
            opt.keys = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 256);
            example_flags = true;
        } else if (cli_is(arg, "--hiddens")) {
            opt.hiddens = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 1024);
            example_flags = true;
        } else if (cli_is(arg, "--heads")) {
            opt.heads = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 1024);
            heads_given = true;
        } else if (cli_is(arg, "--valid-lens")) {
            lens_text = cli_value(PROG, argc, argv, &i);
            example_flags = true;
        } else if (cli_is(arg, "--bias")) {
            opt.bias = true;
            example_flags = true;
        } else if (cli_is(arg, "--dropout")) {
            opt.dropout = (float)cli_double(PROG, arg, cli_value(PROG, argc, argv, &i), 0.0, 0.99);
            example_flags = true;
        } else if (cli_is(arg, "--train")) {
            opt.train = true;
            example_flags = true;
        } else if (cli_is(arg, "--seed")) {
            opt.seed = cli_u64(PROG, arg, cli_value(PROG, argc, argv, &i));
        } else if (cli_is(arg, "--from")) {
            opt.from_dir = cli_value(PROG, argc, argv, &i);
        } else if (cli_is(arg, "--to")) {
            opt.to_dir = cli_value(PROG, argc, argv, &i);
        } else if (cli_is(arg, "--plot")) {
            opt.plot_dir = cli_value(PROG, argc, argv, &i);
        } else if (cli_is(arg, "--help")) {
            usage();
            return 0;
        } else {
            cli_unknown(PROG, arg);
        }
    }
    if (opt.to_dir)
        cli_check_dir(PROG, "--to", opt.to_dir);
    if (opt.plot_dir)
        cli_check_dir(PROG, "--plot", opt.plot_dir);

    if (opt.from_dir) {
        struct stat st;
        if (stat(opt.from_dir, &st) != 0 || !S_ISDIR(st.st_mode))
            cli_fail(PROG, "--from: '%s' is not a directory", opt.from_dir);
        if (!heads_given)
            cli_fail(PROG, "--from needs --heads H: the number of heads the weights were made for");
        if (example_flags)
            cli_fail(PROG, "--from takes its sizes, biases and mask from the files; drop "
                     "--batch, --queries, --keys, --hiddens, --valid-lens, --bias, --dropout "
                     "and --train");
        return run_from(&opt);
    }

    if (opt.hiddens % opt.heads != 0)
        cli_fail(PROG, "--hiddens %d does not divide by --heads %d: every head needs the "
                 "same size", opt.hiddens, opt.heads);
    if (lens_text && strcmp(lens_text, "none") == 0) {
        opt.no_mask = true;
    } else if (lens_text) {
        long lens[MAX_BATCH];
        int n = cli_long_list(PROG, "--valid-lens", lens_text, 0, opt.keys, lens, MAX_BATCH);
        if (n != opt.batch)
            cli_fail(PROG, "--valid-lens needs %d lengths (one per sequence), got %d",
                     opt.batch, n);
        for (int b = 0; b < n; b++)
            opt.valid_lens[b] = (int)lens[b];
    } else {
        /* d2l's [3, 2] when it fits, otherwise every key of every sequence */
        for (int b = 0; b < opt.batch; b++)
            opt.valid_lens[b] = opt.batch == 2 && opt.keys >= 3 ? 3 - b : opt.keys;
    }
    return run_example(&opt);
}
