/* layer_files.c - a multi-head layer's .npy files: load, save, compare. See layer_files.h. */
#define _POSIX_C_SOURCE 200809L
#include "run/layer_files.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/cli.h"
#include "heads.h"
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

/* Is the optional file at path there? 1 or 0; -1 with one line in err for
 * a symbolic link that leads nowhere: taking it for "no file" would run
 * without a mask or a bias that the directory meant to give. */
static int optional_file_present(const char *path, char *err, size_t err_len)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return 1;
    if (lstat(path, &st) != 0)
        return 0;
    const int saved = errno;
    char *target = checked_calloc((size_t)st.st_size + 1, 1);
    const ssize_t len = readlink(path, target, (size_t)st.st_size);
    target[len > 0 ? len : 0] = '\0';
    error_format(err, err_len, NULL, "%s is a symbolic link to '%s', which cannot be opened (%s): "
              "remove the link or make it lead to a file", path, target, strerror(saved));
    free(target);
    return -1;
}

/* DIR/NAME.npy as float32 into *out: 0 (NULL when optional and absent), or
 * -1 with npy's message. */
static int load_tensor(const char *dir, const char *name, bool optional, Tensor **out,
                       char *err, size_t err_len)
{
    char *path = npy_path(dir, name);
    *out = NULL;
    const int present = optional ? optional_file_present(path, err, err_len) : 1;
    if (present > 0)
        *out = npy_load(path, err, err_len);
    free(path);
    return present <= 0 ? present : *out != NULL ? 0 : -1;
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
        error_format(err, err_len, NULL, "%s/%s.npy has shape %s, expected %s = %s", dir, file->name,
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
    char *path = npy_path(dir, "valid_lens");
    *out = NULL;
    NpyInts ints = {0};
    int status = optional_file_present(path, err, err_len);
    if (status <= 0) {   /* no file (0), or a link that leads nowhere (-1) */
        free(path);
        return status;
    }
    status = npy_load_ints(path, &ints, err, err_len);
    char have[80];
    if (status == 0 && !(ints.ndim == 1 && ints.shape[0] == B) &&
        !(ints.ndim == 2 && ints.shape[0] == B && ints.shape[1] == T)) {
        error_format(err, err_len, NULL, "%s has shape %s, expected (%d,) or (%d, %d): one length per "
                  "sequence of queries.npy, or one per query", path,
                  shape_str(have, sizeof have, ints.ndim, ints.shape), B, B, T);
        status = -1;
    }
    for (size_t i = 0; status == 0 && i < ints.size; i++)
        if (ints.data[i] < 0 || ints.data[i] > K) {
            error_format(err, err_len, NULL, "%s: element %zu is %d; a length must be from 0 to the "
                      "number of keys in keys.npy, %d", path, i, ints.data[i], K);
            status = -1;
        }
    if (status == 0)
        *out = ints.ndim == 1 ? valid_lens_1d(ints.data, B) : valid_lens_2d(ints.data, B, T);
    free(path);
    npy_ints_free(&ints);
    return status;
}

/* ---- loading ------------------------------------------------------------------ */

static Tensor **field_of(LayerFiles *files, const InputFile *file)
{
    return (Tensor **)((char *)files + file->field);
}

/* Some of the four biases but not all: one line naming the missing ones.
 * A missing bias taken as zero would run a layer the directory does not
 * describe (PyTorch's bias=True gives all four). */
static int check_bias_set(const char *dir, Tensor *const biases[4], char *err, size_t err_len)
{
    static const char *const names[] = {"b_q", "b_k", "b_v", "b_o"};
    char missing[4200] = "";
    int count = 0, present = 0;
    for (int i = 0; i < 4; i++) {
        present += biases[i] != NULL;
        if (biases[i] == NULL) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s%s/%s.npy", count ? ", " : "",
                     dir, names[i]);
            count++;
        }
    }
    if (present == 0 || present == 4)
        return 0;
    error_format(err, err_len, NULL, "%s %s missing: the layer has %d of the four biases b_q, b_k, b_v "
              "and b_o, and needs all four or none", missing, count == 1 ? "is" : "are",
              present);
    return -1;
}

/* layer_files_load, with the directory already locked. */
static int load_locked(const char *dir, int num_heads, LayerFiles *files, char *err,
                       size_t err_len)
{
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
    if (check_bias_set(dir, (Tensor *[]){files->b_q, files->b_k, files->b_v, files->b_o}, err,
                       err_len) != 0)
        return -1;

    // pass 2: the heads must split num_hiddens evenly; then the layer around the weights
    char why[160];
    if (!heads_split(sizes[DIM_D], num_heads, "num_hiddens", "--heads", why, sizeof why))
        return error_format(err, err_len, NULL, "%s/W_q.npy: %s", dir, why);
    files->layer = multihead_from_weights(num_heads, num_heads, (Tensor *[]){
        files->W_q, files->W_k, files->W_v, files->W_o, files->b_q, files->b_k, files->b_v,
        files->b_o});

    // pass 3: the optional mask, whose lengths count the keys of keys.npy
    return load_valid_lens(dir, sizes, &files->valid_lens, err, err_len);
}

int layer_files_load(const char *dir, int num_heads, LayerFiles *files, char *err,
                     size_t err_len)
{
    memset(files, 0, sizeof *files);
    const int lock = fileset_read_lock(dir);   /* one set, not half of the next */
    const int status = load_locked(dir, num_heads, files, err, err_len);
    fileset_read_unlock(lock);
    return status;
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

/* ---- a decoder layer, and heads already split ---------------------------------- */

/* x (NULL: an absent bias) must have shape, or one line naming the file,
 * both shapes and why. */
static int expect_shape(const char *dir, const char *name, const Tensor *x, int ndim,
                        const int *shape, const char *why, char *err, size_t err_len)
{
    if (x == NULL || tensor_has_shape(x, ndim, shape))
        return 0;
    char have[80], want[80];
    return error_format(err, err_len, NULL, "%s/%s.npy has shape %s, but %s needs %s", dir, name,
                     shape_str(have, sizeof have, x->ndim, x->shape), why,
                     shape_str(want, sizeof want, ndim, shape));
}

/* layer_files_load_decoder, with the directory already locked. */
static int load_decoder_locked(const char *dir, int H, int G, DecoderFiles *files, char *err,
                               size_t err_len)
{
    static const char *const names[LAYER_FILES_PARAMETERS] = {
        "W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o"};
    if (load_tensor(dir, "tokens", false, &files->tokens, err, err_len) != 0)
        return -1;
    for (int i = 0; i < LAYER_FILES_PARAMETERS; i++)
        if (load_tensor(dir, names[i], i >= 4, &files->params[i], err, err_len) != 0)
            return -1;

    // the sizes: D from tokens.npy, d = D / H, then every file against them
    const Tensor *tokens = files->tokens;
    char have[80], why[160];
    if (tokens->ndim != 3)
        return error_format(err, err_len, NULL, "%s/tokens.npy has shape %s, but the tokens are "
                         "(B, T, D)", dir, shape_str(have, sizeof have, tokens->ndim,
                                                     tokens->shape));
    const int D = tokens->shape[2];
    if (!heads_split(D, H, "num_hiddens", "--heads", why, sizeof why))
        return error_format(err, err_len, NULL, "%s/tokens.npy: %s", dir, why);
    const int d = D / H;
    snprintf(why, sizeof why, "--kv-heads %d with head size %d = %d / --heads %d", G, d, D, H);
    const char *from_tokens = "num_hiddens from tokens.npy";
    Tensor **p = files->params;
    if (expect_shape(dir, "W_q", p[0], SHAPE(D, D), from_tokens, err, err_len) ||
        expect_shape(dir, "W_k", p[1], SHAPE(G * d, D), why, err, err_len) ||
        expect_shape(dir, "W_v", p[2], SHAPE(G * d, D), why, err, err_len) ||
        expect_shape(dir, "W_o", p[3], SHAPE(D, D), from_tokens, err, err_len) ||
        expect_shape(dir, "b_q", p[4], SHAPE(D), from_tokens, err, err_len) ||
        expect_shape(dir, "b_k", p[5], SHAPE(G * d), why, err, err_len) ||
        expect_shape(dir, "b_v", p[6], SHAPE(G * d), why, err, err_len) ||
        expect_shape(dir, "b_o", p[7], SHAPE(D), from_tokens, err, err_len))
        return -1;
    if (check_bias_set(dir, p + 4, err, err_len) != 0)
        return -1;
    files->layer = multihead_from_weights(H, G, p);
    return 0;
}

int layer_files_load_decoder(const char *dir, int num_heads, int num_kv_heads,
                             DecoderFiles *files, char *err, size_t err_len)
{
    memset(files, 0, sizeof *files);
    const int lock = fileset_read_lock(dir);
    const int status = load_decoder_locked(dir, num_heads, num_kv_heads, files, err, err_len);
    fileset_read_unlock(lock);
    return status;
}

void decoder_files_free(DecoderFiles *files)
{
    tensor_free(files->tokens);
    for (int i = 0; i < LAYER_FILES_PARAMETERS; i++)
        tensor_free(files->params[i]);
    memset(files, 0, sizeof *files);
}

/* layer_files_load_heads, with the directory already locked. */
static int load_heads_locked(const char *dir, Tensor *qkv[3], char *err, size_t err_len)
{
    static const char *const names[3] = {"queries", "keys", "values"};
    char a[64], b[64];
    for (int i = 0; i < 3; i++) {
        if (load_tensor(dir, names[i], false, &qkv[i], err, err_len) != 0)
            return -1;
        if (qkv[i]->ndim != 4)
            return error_format(err, err_len, NULL, "%s/%s.npy: expected 4 dimensions (batch_size, "
                             "num_heads, num_tokens, head_size), got %d", dir, names[i],
                             qkv[i]->ndim);
        if (i > 0 && !tensor_has_shape(qkv[i], 4, qkv[0]->shape))
            return error_format(err, err_len, NULL, "%s/%s.npy: shape %s differs from queries.npy's %s",
                             dir, names[i], shape_str(a, sizeof a, 4, qkv[i]->shape),
                             shape_str(b, sizeof b, 4, qkv[0]->shape));
    }
    return 0;
}

int layer_files_load_heads(const char *dir, Tensor *qkv[3], char *err, size_t err_len)
{
    qkv[0] = qkv[1] = qkv[2] = NULL;
    const int lock = fileset_read_lock(dir);
    const int status = load_heads_locked(dir, qkv, err, err_len);
    fileset_read_unlock(lock);
    return status;
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

/* One file of the set; a name the run does not have is dropped, so that
 * no file of a previous run stays beside this run's. */
static int save_one(FileSet *set, const char *dir, const NamedTensor *item, char *err,
                    size_t err_len)
{
    if (item->tensor != NULL)
        return npy_save_into(set, dir, item->name, item->tensor, err, err_len);
    if (item->lengths != NULL)
        return npy_save_ints_into(set, dir, item->name, item->lengths->data,
                                  item->lengths->ndim, item->lengths->shape, err, err_len);
    char *file = npy_path("", item->name);
    fileset_drop(set, file);
    free(file);
    return 0;
}

int layer_files_save(const char *dir, const NamedTensor *set, int count, char *err,
                     size_t err_len)
{
    FileSet *files = fileset_begin(dir, err, err_len);
    if (files == NULL)
        return -1;
    int status = 0;
    for (int i = 0; i < count && status == 0; i++)
        status = save_one(files, dir, &set[i], err, err_len);
    return fileset_end(files, status, err, err_len);
}

int layer_files_save_run(const char *dir, const LayerFiles *inputs, const LayerResults *results,
                         char *err, size_t err_len)
{
    NamedTensor set[LAYER_FILES_MAX_SET];
    int count = 0;
    if (inputs != NULL) {
        set[count++] = (NamedTensor){"queries", inputs->queries, NULL};
        set[count++] = (NamedTensor){"keys", inputs->keys, NULL};
        set[count++] = (NamedTensor){"values", inputs->values, NULL};
        count += layer_files_parameters(&inputs->layer, set + count);
        set[count++] = (NamedTensor){"valid_lens", NULL, inputs->valid_lens};
        set[count++] = (NamedTensor){"grad_output", inputs->grad_output, NULL};
    }
    const Tensor *output = results->output, *weights = results->attention_weights;
    set[count++] = (NamedTensor){"output", output, NULL};
    set[count++] = (NamedTensor){"attention_weights", weights, NULL};
    count += layer_files_gradients(&results->grads, set + count);
    if (layer_files_save(dir, set, count, err, err_len) != 0)
        return -1;
    char s1[64], s2[64];
    printf("wrote %s/output.npy %s and %s/attention_weights.npy %s\n", dir,
           shape_str(s1, sizeof s1, output->ndim, output->shape), dir,
           shape_str(s2, sizeof s2, weights->ndim, weights->shape));
    if (results->grads.params != NULL)
        printf("wrote the gradients of sum(output * grad_output) as %s/grad_<name>.npy\n", dir);
    return 0;
}

LayerFiles layer_files_borrow(const MultiHeadAttention *layer, const Tensor *queries,
                              const Tensor *keys, const Tensor *values,
                              const ValidLens *valid_lens)
{
    /* const is cast away for the struct's sake only: nothing here is freed
     * or written through a borrowed LayerFiles */
    return (LayerFiles){
        .queries = (Tensor *)queries, .keys = (Tensor *)keys, .values = (Tensor *)values,
        .W_q = layer->W_q, .W_k = layer->W_k, .W_v = layer->W_v, .W_o = layer->W_o,
        .b_q = layer->b_q, .b_k = layer->b_k, .b_v = layer->b_v, .b_o = layer->b_o,
        .valid_lens = (ValidLens *)valid_lens, .layer = *layer,
    };
}

bool layer_files_same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int layer_files_gradients(const LayerGradients *grads, NamedTensor out[LAYER_FILES_GRADIENTS])
{
    const char *names[LAYER_GRADIENTS];
    const Tensor *tensors[LAYER_GRADIENTS];
    const int count = layer_gradients_list(grads, names, tensors);
    for (int i = 0; i < count; i++)
        out[i] = (NamedTensor){names[i], tensors[i], NULL};
    return count;
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

int layer_files_check_results(const char *dir, const LayerResults *results, float atol,
                              float rtol, char *err, size_t err_len)
{
    NamedTensor compared[2 + LAYER_FILES_GRADIENTS] = {
        {"output", results->output, NULL},
        {"attention_weights", results->attention_weights, NULL}};
    const int count = 2 + layer_files_gradients(&results->grads, compared + 2);
    return layer_files_check_expected(dir, compared, count, atol, rtol, err, err_len);
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
    printf("num_heads = %d, head size d = %d\n\n", layer->num_heads,
           layer->num_hiddens / layer->num_heads);
}

int layer_files_plot_weights(const char *dir, const char *name, const char *title,
                             const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    char (*titles)[48] = checked_malloc((size_t)B * H, sizeof *titles);
    const char **title_ptrs = checked_malloc((size_t)B * H, sizeof *title_ptrs);
    for (int i = 0; i < B * H; i++) {
        snprintf(titles[i], sizeof titles[0], "sequence %d, head %d", i / H, i % H);
        title_ptrs[i] = titles[i];
    }
    int status = plot_heatmaps_titled(dir, name, title, weights, "keys", "queries", title_ptrs);
    free(titles);
    free(title_ptrs);
    return status;
}

int layer_files_plot_multihead(const char *dir, const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    const int status = layer_files_plot_weights(dir, "multihead_weights", "multihead: the "
                                                "attention weights of every head", weights);
    if (status != 0)
        return status;
    printf("wrote %s/multihead_weights.dat and .gp: %d %s x %d %s (run gnuplot "
           "%s/multihead_weights.gp for the .png)\n", dir, B, plural(B, "sequence", "sequences"),
           H, plural(H, "head", "heads"), dir);
    return 0;
}
