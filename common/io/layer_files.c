/* layer_files.c - a multi-head layer's .npy files: load, save, compare. See layer_files.h. */
#define _POSIX_C_SOURCE 200809L
#include "io/layer_files.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/npy.h"
#include "io/plot.h"

/* ---- the table of input files ---------------------------------------------- */

/* The sizes a file's shape is written in. */
typedef enum { DIM_B, DIM_T, DIM_K, DIM_DQ, DIM_DK, DIM_DV, DIM_D, DIM_COUNT } LayerDim;

typedef struct {
    const char *name;        /* DIR/name.npy */
    bool optional;           /* absent: the field stays NULL */
    int ndim;
    LayerDim dims[3];
    const char *meaning;     /* printed after a shape that does not fit */
    size_t field;            /* offsetof(LayerFiles, ...) */
} InputFile;

/* In the order they are read: each size is fixed by the first file that
 * has it, so a later file's message can say where its sizes came from. */
static const InputFile INPUT_FILES[] = {
    {"queries", .ndim = 3, .dims = {DIM_B, DIM_T, DIM_DQ},
     .meaning = "(batch_size, num_queries, query_size)",
     .field = offsetof(LayerFiles, queries)},
    {"keys", .ndim = 3, .dims = {DIM_B, DIM_K, DIM_DK},
     .meaning = "(batch_size, num_keys, key_size), batch_size from queries.npy",
     .field = offsetof(LayerFiles, keys)},
    {"values", .ndim = 3, .dims = {DIM_B, DIM_K, DIM_DV},
     .meaning = "(batch_size, num_keys, value_size), one value per key of keys.npy",
     .field = offsetof(LayerFiles, values)},
    /* the weights, in PyTorch's (out_features, in_features) layout */
    {"W_q", .ndim = 2, .dims = {DIM_D, DIM_DQ},
     .meaning = "(num_hiddens, query_size), PyTorch's (out, in) layout",
     .field = offsetof(LayerFiles, W_q)},
    {"W_k", .ndim = 2, .dims = {DIM_D, DIM_DK},
     .meaning = "(num_hiddens, key_size), num_hiddens from W_q.npy and key_size from keys.npy",
     .field = offsetof(LayerFiles, W_k)},
    {"W_v", .ndim = 2, .dims = {DIM_D, DIM_DV},
     .meaning = "(num_hiddens, value_size), num_hiddens from W_q.npy and value_size from "
                "values.npy",
     .field = offsetof(LayerFiles, W_v)},
    {"W_o", .ndim = 2, .dims = {DIM_D, DIM_D},
     .meaning = "(num_hiddens, num_hiddens), num_hiddens from W_q.npy",
     .field = offsetof(LayerFiles, W_o)},
    {"b_q", .optional = true, .ndim = 1, .dims = {DIM_D},
     .meaning = "(num_hiddens,), num_hiddens from W_q.npy", .field = offsetof(LayerFiles, b_q)},
    {"b_k", .optional = true, .ndim = 1, .dims = {DIM_D},
     .meaning = "(num_hiddens,), num_hiddens from W_q.npy", .field = offsetof(LayerFiles, b_k)},
    {"b_v", .optional = true, .ndim = 1, .dims = {DIM_D},
     .meaning = "(num_hiddens,), num_hiddens from W_q.npy", .field = offsetof(LayerFiles, b_v)},
    {"b_o", .optional = true, .ndim = 1, .dims = {DIM_D},
     .meaning = "(num_hiddens,), num_hiddens from W_q.npy", .field = offsetof(LayerFiles, b_o)},
    /* the gradient of a loss with respect to the output: the output's shape */
    {"grad_output", .optional = true, .ndim = 3, .dims = {DIM_B, DIM_T, DIM_D},
     .meaning = "(batch_size, num_queries, num_hiddens), the output's shape, from queries.npy "
                "and W_q.npy",
     .field = offsetof(LayerFiles, grad_output)},
};
enum { NUM_INPUT_FILES = sizeof INPUT_FILES / sizeof INPUT_FILES[0] };

/* ---- small pieces ------------------------------------------------------------ */

static void set_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(char *err, size_t err_len, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    if (err != NULL && err_len > 0)
        vsnprintf(err, err_len, fmt, args);
    else
        vfprintf(stderr, fmt, args);
    va_end(args);
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void file_path(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s.npy", dir, name);
}

/* DIR/NAME.npy as float32 into *out: 0 (NULL when optional and absent), or
 * -1 with npy's message. */
static int load_tensor(const char *dir, const char *name, bool optional, Tensor **out,
                       char *err, size_t err_len)
{
    char path[4096], npy_err[NPY_ERR_LEN];
    file_path(path, sizeof path, dir, name);
    *out = NULL;
    if (optional && !file_exists(path))
        return 0;
    *out = npy_load(path, npy_err, sizeof npy_err);
    if (*out == NULL) {
        set_error(err, err_len, "%s", npy_err);
        return -1;
    }
    return 0;
}

/* x against the file's row, sizes not yet fixed matching anything; then
 * the sizes x fixes. 0, or -1 with "DIR/NAME.npy has shape ..., expected
 * ... = meaning". */
static int check_and_fix_sizes(const char *dir, const InputFile *file, const Tensor *x,
                               int sizes[DIM_COUNT], char *err, size_t err_len)
{
    int want[3];
    for (int i = 0; i < file->ndim; i++)
        want[i] = sizes[file->dims[i]];   /* -1 when not fixed yet */
    if (!tensor_has_shape(x, file->ndim, want)) {
        char have[80], expected[80];
        set_error(err, err_len, "%s/%s.npy has shape %s, expected %s = %s", dir, file->name,
                  shape_str(have, sizeof have, x->ndim, x->shape),
                  shape_str(expected, sizeof expected, file->ndim, want), file->meaning);
        return -1;
    }
    for (int i = 0; i < file->ndim; i++)
        sizes[file->dims[i]] = x->shape[i];
    return 0;
}

/* valid_lens.npy: (B,) or (B, T) integers from 0 to K, or no file. */
static int load_valid_lens(const char *dir, const int sizes[DIM_COUNT], ValidLens **out,
                           char *err, size_t err_len)
{
    const int B = sizes[DIM_B], T = sizes[DIM_T], K = sizes[DIM_K];
    char path[4096], npy_err[NPY_ERR_LEN];
    file_path(path, sizeof path, dir, "valid_lens");
    *out = NULL;
    if (!file_exists(path))
        return 0;
    NpyInts ints;
    if (npy_load_ints(path, &ints, npy_err, sizeof npy_err) != 0) {
        set_error(err, err_len, "%s", npy_err);
        return -1;
    }
    int status = 0;
    char have[80];
    if (!(ints.ndim == 1 && ints.shape[0] == B) &&
        !(ints.ndim == 2 && ints.shape[0] == B && ints.shape[1] == T)) {
        set_error(err, err_len, "%s has shape %s, expected (%d,) or (%d, %d): one length per "
                  "sequence of queries.npy, or one per query", path,
                  shape_str(have, sizeof have, ints.ndim, ints.shape), B, B, T);
        status = -1;
    }
    for (size_t i = 0; status == 0 && i < ints.size; i++)
        if (ints.data[i] < 0 || ints.data[i] > K) {
            set_error(err, err_len, "%s: element %zu is %d; a length must be from 0 to the "
                      "number of keys in keys.npy, %d", path, i, ints.data[i], K);
            status = -1;
        }
    if (status == 0)
        *out = ints.ndim == 1 ? valid_lens_1d(ints.data, B) : valid_lens_2d(ints.data, B, T);
    npy_ints_free(&ints);
    return status;
}

/* ---- loading ------------------------------------------------------------------ */

static Tensor **field_of(LayerFiles *files, const InputFile *file)
{
    return (Tensor **)((char *)files + file->field);
}

int layer_files_load(const char *dir, int num_heads, LayerFiles *files, char *err,
                     size_t err_len)
{
    memset(files, 0, sizeof *files);
    int sizes[DIM_COUNT];
    for (int i = 0; i < DIM_COUNT; i++)
        sizes[i] = -1;

    // pass 1: every tensor of the table, each checked against the sizes so far
    for (int i = 0; i < NUM_INPUT_FILES; i++) {
        const InputFile *file = &INPUT_FILES[i];
        Tensor **slot = field_of(files, file);
        if (load_tensor(dir, file->name, file->optional, slot, err, err_len) != 0)
            return -1;
        if (*slot != NULL && check_and_fix_sizes(dir, file, *slot, sizes, err, err_len) != 0)
            return -1;
    }

    // pass 2: the heads must split num_hiddens evenly
    const int D = sizes[DIM_D];
    if (num_heads < 1 || D % num_heads != 0) {
        set_error(err, err_len, "--heads %d does not divide num_hiddens %d (from %s/W_q.npy): "
                  "every head needs the same size", num_heads, D, dir);
        return -1;
    }
    MultiHeadAttention *layer = &files->layer;
    *layer = (MultiHeadAttention){
        .query_size = sizes[DIM_DQ], .key_size = sizes[DIM_DK], .value_size = sizes[DIM_DV],
        .num_hiddens = D, .num_heads = num_heads, .dropout = 0.0f,
        .bias = files->b_q || files->b_k || files->b_v || files->b_o,
        .W_q = files->W_q, .W_k = files->W_k, .W_v = files->W_v, .W_o = files->W_o,
        .b_q = files->b_q, .b_k = files->b_k, .b_v = files->b_v, .b_o = files->b_o,
    };

    // pass 3: the optional mask, whose lengths count the keys of keys.npy
    return load_valid_lens(dir, sizes, &files->valid_lens, err, err_len);
}

void layer_files_free(LayerFiles *files)
{
    for (int i = 0; i < NUM_INPUT_FILES; i++) {
        Tensor **slot = field_of(files, &INPUT_FILES[i]);
        tensor_free(*slot);
        *slot = NULL;
    }
    valid_lens_free(files->valid_lens);
    files->valid_lens = NULL;
    memset(&files->layer, 0, sizeof files->layer);
}

/* ---- saving ---------------------------------------------------------------------- */

int layer_files_parameters(const MultiHeadAttention *layer,
                           NamedTensor out[LAYER_FILES_PARAMETERS])
{
    const NamedTensor parameters[LAYER_FILES_PARAMETERS] = {
        {"W_q", layer->W_q, NULL}, {"W_k", layer->W_k, NULL},
        {"W_v", layer->W_v, NULL}, {"W_o", layer->W_o, NULL},
        {"b_q", layer->b_q, NULL}, {"b_k", layer->b_k, NULL},
        {"b_v", layer->b_v, NULL}, {"b_o", layer->b_o, NULL},
    };
    memcpy(out, parameters, sizeof parameters);
    return LAYER_FILES_PARAMETERS;
}

static void remove_file(const char *dir, const char *name)
{
    char path[4096];
    file_path(path, sizeof path, dir, name);
    remove(path);
}

static int save_one(const char *dir, const NamedTensor *item, char *err, size_t err_len)
{
    char path[4096], npy_err[NPY_ERR_LEN];
    file_path(path, sizeof path, dir, item->name);
    int status = 0;
    if (item->tensor != NULL)
        status = npy_save(path, item->tensor, npy_err, sizeof npy_err);
    else if (item->lengths != NULL)
        status = npy_save_ints(path, item->lengths->data, item->lengths->ndim,
                               item->lengths->shape, npy_err, sizeof npy_err);
    else
        remove(path);   /* not part of this run: an old file would be read back */
    if (status != 0)
        set_error(err, err_len, "%s", npy_err);
    return status;
}

int layer_files_save(const char *dir, const NamedTensor *set, int count, char *err,
                     size_t err_len)
{
    for (int i = 0; i < count; i++)
        if (save_one(dir, &set[i], err, err_len) != 0) {
            /* the files written so far belong with the one that failed */
            for (int j = 0; j < i; j++)
                remove_file(dir, set[j].name);
            return -1;
        }
    return 0;
}

/* ---- the backward ---------------------------------------------------------------- */

void layer_files_backward(const LayerFiles *files, LayerGradients *grads)
{
    MultiHeadSaved saved;
    Tensor *output = multihead_forward_save(&files->layer, files->queries, files->keys,
                                            files->values, files->valid_lens, false, NULL,
                                            &saved);
    /* fresh gradients: "added into" starts from zero */
    grads->params = multihead_grads_new(&files->layer);
    multihead_backward(&files->layer, &saved, files->grad_output, grads->params,
                       &grads->queries, &grads->keys, &grads->values, NULL);
    multihead_saved_free(&saved);
    tensor_free(output);
}

void layer_gradients_free(LayerGradients *grads)
{
    tensor_free(grads->queries);
    tensor_free(grads->keys);
    tensor_free(grads->values);
    multihead_grads_free(grads->params);
    memset(grads, 0, sizeof *grads);
}

void layer_gradients_print(const LayerGradients *g)
{
    const MultiHeadGrads *p = g->params;
    printf("gradients of sum(output * grad_output), largest |entry|:\n");
    printf("  queries %.4g, keys %.4g, values %.4g\n", (double)tensor_max_abs(g->queries),
           (double)tensor_max_abs(g->keys), (double)tensor_max_abs(g->values));
    printf("  W_q %.4g, W_k %.4g, W_v %.4g, W_o %.4g\n", (double)tensor_max_abs(p->W_q),
           (double)tensor_max_abs(p->W_k), (double)tensor_max_abs(p->W_v),
           (double)tensor_max_abs(p->W_o));
    if (p->b_k != NULL)
        printf("  b_k %.1e (0 up to rounding: softmax ignores a shift shared by all keys)\n",
               (double)tensor_max_abs(p->b_k));
    printf("\n");
}

int layer_files_gradients(const LayerGradients *grads, NamedTensor out[LAYER_FILES_GRADIENTS])
{
    const LayerGradients none = {0};
    const MultiHeadGrads no_params = {0};
    const LayerGradients *g = grads != NULL ? grads : &none;
    const MultiHeadGrads *p = g->params != NULL ? g->params : &no_params;
    const NamedTensor gradients[LAYER_FILES_GRADIENTS] = {
        {"grad_queries", g->queries, NULL}, {"grad_keys", g->keys, NULL},
        {"grad_values", g->values, NULL},
        {"grad_W_q", p->W_q, NULL}, {"grad_W_k", p->W_k, NULL},
        {"grad_W_v", p->W_v, NULL}, {"grad_W_o", p->W_o, NULL},
        {"grad_b_q", p->b_q, NULL}, {"grad_b_k", p->b_k, NULL},
        {"grad_b_v", p->b_v, NULL}, {"grad_b_o", p->b_o, NULL},
    };
    memcpy(out, gradients, sizeof gradients);
    return LAYER_FILES_GRADIENTS;
}

/* ---- comparing ------------------------------------------------------------------- */

int layer_files_compare(const char *dir, const char *name, const Tensor *actual, float atol,
                        float rtol, Comparison *out, char *err, size_t err_len)
{
    char file[256];
    snprintf(file, sizeof file, "expected_%s", name);
    memset(out, 0, sizeof *out);
    Tensor *expected = NULL;
    if (load_tensor(dir, file, true, &expected, err, err_len) != 0)
        return -1;
    if (expected == NULL)
        return 0;
    out->present = true;
    out->expected_ndim = expected->ndim;
    memcpy(out->expected_shape, expected->shape, sizeof out->expected_shape);
    out->same_shape = tensor_has_shape(expected, actual->ndim, actual->shape);
    if (out->same_shape) {
        out->max_diff = tensor_max_abs_diff(actual, expected);
        out->close = tensor_allclose(actual, expected, atol, rtol, NULL);
    }
    tensor_free(expected);
    return 0;
}

/* "1e-5", as a person writes it ("%.0e" gives "1e-05"); with two
 * different tolerances "1e-6 + 1e-4 |expected|". */
static void power_text(char *buf, size_t len, float x)
{
    char raw[32], *e;
    snprintf(raw, sizeof raw, "%.0e", (double)x);
    if ((e = strstr(raw, "e-0")) != NULL || (e = strstr(raw, "e+0")) != NULL)
        memmove(e + 2, e + 3, strlen(e + 3) + 1);
    snprintf(buf, len, "%s", raw);
}

static void tolerance_text(char *buf, size_t len, float atol, float rtol)
{
    char a[32], r[32];
    power_text(a, sizeof a, atol);
    power_text(r, sizeof r, rtol);
    if (atol == rtol)
        snprintf(buf, len, "%s", a);
    else
        snprintf(buf, len, "%s + %s |expected|", a, r);
}

int layer_files_check_expected(const char *dir, const NamedTensor *results, int count,
                               float atol, float rtol, char *err, size_t err_len)
{
    char tolerance[96];
    tolerance_text(tolerance, sizeof tolerance, atol, rtol);
    int verdict = 0;
    for (int i = 0; i < count; i++) {
        const char *name = results[i].name;
        const Tensor *actual = results[i].tensor;
        Comparison c;
        char have[80], want[80];
        if (actual == NULL)
            continue;
        if (layer_files_compare(dir, name, actual, atol, rtol, &c, err, err_len) != 0)
            return -1;
        if (!c.present)
            continue;
        if (!c.same_shape)
            printf("expected_%s.npy has shape %s, but %s has %s: DIFFERENT\n", name,
                   shape_str(have, sizeof have, c.expected_ndim, c.expected_shape), name,
                   shape_str(want, sizeof want, actual->ndim, actual->shape));
        else if (c.close)
            printf("%s vs expected_%s.npy: largest difference %.3g, equal within %s\n", name,
                   name, (double)c.max_diff, tolerance);
        else
            printf("%s vs expected_%s.npy: largest difference %.3g, DIFFERENT (beyond %s)\n",
                   name, name, (double)c.max_diff, tolerance);
        if (!c.same_shape || !c.close)
            verdict = 1;
    }
    return verdict;
}

/* ---- describing ------------------------------------------------------------------ */

void layer_files_print(const char *dir, const LayerFiles *files)
{
    const MultiHeadAttention *layer = &files->layer;
    const Tensor *inputs[] = {files->queries, files->keys, files->values};
    const Tensor *weights[] = {layer->W_q, layer->W_k, layer->W_v, layer->W_o};
    static const char *const input_names[] = {"queries", "keys", "values"};
    static const char *const weight_names[] = {"W_q", "W_k", "W_v", "W_o"};
    char shape[64];
    printf("Loaded %s:\n ", dir);
    for (int i = 0; i < 3; i++)
        printf("%s %s %s", i ? "," : "", input_names[i],
               shape_str(shape, sizeof shape, inputs[i]->ndim, inputs[i]->shape));
    printf("\n ");
    for (int i = 0; i < 4; i++)
        printf("%s %s %s", i ? "," : "", weight_names[i],
               shape_str(shape, sizeof shape, weights[i]->ndim, weights[i]->shape));
    printf(", %s\n", layer->bias ? "with biases" : "no biases");
    if (files->valid_lens)
        valid_lens_print_named("  valid_lens", files->valid_lens);
    else
        printf("  no valid_lens.npy: no mask\n");
    if (files->grad_output)
        printf("  grad_output %s: the backward runs too\n",
               shape_str(shape, sizeof shape, files->grad_output->ndim,
                         files->grad_output->shape));
}

int layer_files_plot_weights(const char *dir, const char *name, const char *title,
                             const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    char (*titles)[48] = checked_malloc(__func__, (size_t)B * H, sizeof *titles);
    const char **title_ptrs = checked_malloc(__func__, (size_t)B * H, sizeof *title_ptrs);
    for (int i = 0; i < B * H; i++) {
        snprintf(titles[i], sizeof titles[0], "sequence %d, head %d", i / H, i % H);
        title_ptrs[i] = titles[i];
    }
    int status = plot_heatmaps_titled(dir, name, title, weights, "keys", "queries", title_ptrs);
    free(titles);
    free(title_ptrs);
    return status;
}
