/*
 * saved_models.c - the small models as directories of .npy files (introduced
 * in chapter 05's optional section "Attention that learns"). See
 * saved_models.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "run/saved_models.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "heads.h"
#include "run/internal.h"
#include "io/npy.h"

/* The number of heads first: no shape would catch a model saved with
 * another one, and nothing must change when it differs. */
static int check_heads(int num_heads, const char *dir, char *err, size_t err_len)
{
    int saved_heads;
    if (model_read_ints(dir, "num_heads", &saved_heads, 1, err, err_len) != 0)
        return -1;
    if (saved_heads != num_heads)
        return error_format(err, err_len, NULL, "%s/num_heads.npy: the model has %d heads, the file says %d",
                    dir, num_heads, saved_heads);
    return 0;
}

/* ---- the dictionary model --------------------------------------------------------- */

int lookup_load(LookupModel *m, const char *dir, char *err, size_t err_len)
{
    if (check_heads(m->num_heads, dir, err, err_len) != 0)
        return -1;
    return model_load(dir, m->files, LOOKUP_NUM_FILES, err, err_len);
}

/* ---- the training state ------------------------------------------------------- */

enum {
    FLOAT_FILES = LOOKUP_NUM_FILES - 1,             /* the model's files but num_heads */
    TRAINING_INTS = 6,
    ALL_FILES = LOOKUP_NUM_SAVED_FILES,
};

/* Every file of a model with its training state, pointing at the model's
 * tensors, Adam's moments and the small buffers here. */
typedef struct {
    ModelFile files[ALL_FILES];
    char names[2 * FLOAT_FILES][96];
    int step;
    int training[TRAINING_INTS];
    Tensor *lr;                                     /* (1,) */
} TrainingFiles;

/* The moment (m or v) of the parameter whose value is part. */
static Tensor *moment_of(const LookupModel *m, Tensor *const *moments, const Tensor *part)
{
    for (int i = 0; i < m->num_params; i++)
        if (m->params[i].value == part)
            return moments[i];
    die("saved_models", "a saved tensor is not a parameter");
}

/* file (of the model) -> the file of its moments, stacked the same way */
static ModelFile moment_file(const LookupModel *m, const ModelFile *file, Tensor *const *moments,
                             char *name, size_t name_len, const char *prefix)
{
    ModelFile moment = {.name = name};
    snprintf(name, name_len, "%s.%s", prefix, file->name);
    for (int i = 0; i < MODEL_MAX_PARTS && file->parts[i]; i++)
        moment.parts[i] = moment_of(m, moments, file->parts[i]);
    return moment;
}

static void training_files(TrainingFiles *t, const LookupModel *m, const Adam *adam)
{
    if (adam->params != m->params || adam->count != m->num_params)
        die("saved_models", "the optimiser does not hold this model's parameters");
    int n = 0;
    for (int i = 0; i < LOOKUP_NUM_FILES; i++)
        t->files[n++] = m->files[i];
    for (int i = 0; i < FLOAT_FILES; i++) {
        t->files[n++] = moment_file(m, &m->files[i], adam->m, t->names[2 * i],
                                    sizeof t->names[0], "optimizer.exp_avg");
        t->files[n++] = moment_file(m, &m->files[i], adam->v, t->names[2 * i + 1],
                                    sizeof t->names[0], "optimizer.exp_avg_sq");
        t->files[n - 1].nonnegative = true;
    }
    t->lr = tensor_zeros(SHAPE(1));
    t->files[n++] = (ModelFile){.name = "optimizer.step", .ints = &t->step, .num_ints = 1};
    t->files[n++] = (ModelFile){.name = "optimizer.lr", .parts = {t->lr}};
    t->files[n++] = (ModelFile){.name = "training", .ints = t->training,
                                .num_ints = TRAINING_INTS};
}

int lookup_save_training(const LookupModel *m, const Adam *adam, const LookupTraining *training,
                         const char *dir, char *err, size_t err_len)
{
    TrainingFiles t;
    training_files(&t, m, adam);
    t.step = (int)adam->step;
    t.lr->data[0] = adam->lr;
    t.training[0] = training->batch_size;
    t.training[1] = training->num_pairs;
    for (int i = 0; i < 4; i++)
        t.training[2 + i] = (int)((training->seed >> (16 * i)) & 0xffff);
    const int status = model_save(dir, t.files, ALL_FILES, err, err_len);
    tensor_free(t.lr);
    return status;
}

/* The three small files of the training state (step, learning rate, what
 * draws the batches) read into t and checked, before any tensor changes.
 * When limits is not NULL the batch size and pairs are checked too. */
static int read_training(TrainingFiles *t, const LookupModel *m, const LookupLimits *limits,
                         const char *dir, char *err, size_t err_len)
{
    if (model_load(dir, &t->files[ALL_FILES - 3], 3, err, err_len) != 0)
        return -1;
    bool pieces_fit = true;
    for (int i = 0; i < 4; i++)
        pieces_fit = pieces_fit && t->training[2 + i] >= 0 && t->training[2 + i] <= 0xffff;
    if (t->step < 0 || !pieces_fit || !(t->lr->data[0] > 0.0f))
        return error_format(err, err_len, NULL, "%s/%s: %s", dir,
                            t->step < 0 ? "optimizer.step.npy" : !pieces_fit ? "training.npy"
                                                                             : "optimizer.lr.npy",
                            t->step < 0 ? "the step count is negative"
                            : !pieces_fit ? "the seed's pieces must be from 0 to 65535"
                                          : "the learning rate must be above 0");
    const int batch_size = t->training[0], num_pairs = t->training[1];
    if (limits != NULL && (batch_size < 1 || batch_size > limits->max_batch || num_pairs < 2 ||
                           num_pairs > limits->max_pairs || num_pairs > m->key_vocab))
        return error_format(err, err_len, NULL, "%s/training.npy: expected a batch of 1 to %d "
                            "examples and 2 to %d pairs (at most the model's %d countries), got "
                            "%d and %d", dir, limits->max_batch, limits->max_pairs, m->key_vocab,
                            batch_size, num_pairs);
    return 0;
}

int lookup_load_training(LookupModel *m, Adam *adam, LookupTraining *training,
                         const LookupLimits *limits, const char *dir, char *err, size_t err_len)
{
    if (check_heads(m->num_heads, dir, err, err_len) != 0)
        return -1;
    TrainingFiles t;
    training_files(&t, m, adam);
    int status = read_training(&t, m, limits, dir, err, err_len);
    if (status == 0)
        status = model_load(dir, t.files, ALL_FILES, err, err_len);
    if (status == 0) {
        adam->step = t.step;
        adam->lr = t.lr->data[0];
        training->batch_size = t.training[0];
        training->num_pairs = t.training[1];
        training->seed = 0;
        for (int i = 0; i < 4; i++)
            training->seed |= (uint64_t)(t.training[2 + i] & 0xffff) << (16 * i);
    }
    tensor_free(t.lr);
    return status;
}

/* ---- a model of the sizes its files give ------------------------------------- */

LookupModel *lookup_load_new(const char *dir, const LookupLimits *limits, char *err,
                             size_t err_len)
{
    // step 1: the sizes, from embed_keys.weight (Vk, D) and num_heads
    char *path = npy_path(dir, "embed_keys.weight");
    Tensor *embed = npy_load(path, err, err_len);
    free(path);
    int heads = 0;
    if (embed == NULL || model_read_ints(dir, "num_heads", &heads, 1, err, err_len) != 0) {
        tensor_free(embed);
        return NULL;
    }
    const int vocab = embed->ndim == 2 ? embed->shape[0] : 0;
    const int hiddens = embed->ndim == 2 ? embed->shape[1] : 0;
    tensor_free(embed);
    // step 2: sizes the program can run; D divides by H
    if (vocab < limits->min_vocab || vocab > limits->max_vocab || hiddens < 1 ||
        hiddens > limits->max_hiddens || heads < 1 || heads > limits->max_heads ||
        !heads_split(hiddens, heads, NULL, NULL, NULL, 0)) {
        error_format(err, err_len, NULL, "%s does not hold a model this program can run (%d "
                     "countries, num_hiddens %d, %d heads, for %d pairs)", dir, vocab, hiddens,
                     heads, limits->min_vocab);
        return NULL;
    }
    // step 3: build it (every parameter is then replaced) and read every file
    Rng rng = rng_new(0);
    LookupModel *m = lookup_new(vocab, vocab, hiddens, heads, &rng);
    if (lookup_load(m, dir, err, err_len) != 0) {
        lookup_free(m);
        return NULL;
    }
    return m;
}

Adam *lookup_load_training_new(LookupModel *m, const char *dir, const LookupLimits *limits,
                               LookupTraining *training, char *err, size_t err_len)
{
    /* the learning rate is the saved one once the load succeeds */
    Adam *adam = adam_new(m->params, m->num_params, 1e-3f);
    if (lookup_load_training(m, adam, training, limits, dir, err, err_len) != 0) {
        adam_free(adam);
        return NULL;
    }
    return adam;
}

/* ---- the two-key model ---------------------------------------------------------- */

int two_key_save(TwoKeyModel *model, const char *dir, char *err, size_t err_len)
{
    model->saved_num_heads = model->num_heads;
    return model_save(dir, model->files, model->num_files, err, err_len);
}

int two_key_load(TwoKeyModel *model, const char *dir, char *err, size_t err_len)
{
    if (check_heads(model->num_heads, dir, err, err_len) != 0)
        return -1;
    return model_load(dir, model->files, model->num_files, err, err_len);
}

/* The shape (rows, columns) of DIR/NAME.npy, a 2-D table. */
static int read_table_shape(const char *dir, const char *name, int *rows, int *cols,
                            char *err, size_t err_len)
{
    char *path = npy_path(dir, name);
    Tensor *table = npy_load(path, err, err_len);
    int status = 0;
    if (table == NULL) {
        status = -1;
    } else if (table->ndim != 2) {
        status = error_format(err, err_len, NULL, "%s: expected a table (rows, num_hiddens), got %d "
                      "dimensions", path, table->ndim);
    } else {
        *rows = table->shape[0];
        *cols = table->shape[1];
    }
    tensor_free(table);
    free(path);
    return status;
}

TwoKeyModel *two_key_from_dir(const char *dir, char *err, size_t err_len)
{
    int num_heads = 0, key_vocab = 0, value_vocab = 0, D = 0, D_values = 0;
    if (model_read_ints(dir, "num_heads", &num_heads, 1, err, err_len) != 0 ||
        read_table_shape(dir, "embed_keys.weight", &key_vocab, &D, err, err_len) != 0 ||
        read_table_shape(dir, "embed_values.weight", &value_vocab, &D_values, err,
                         err_len) != 0)
        return NULL;
    if (D_values != D) {
        error_format(err, err_len, NULL, "%s: embed_keys.weight has %d columns and embed_values.weight "
             "%d: both are num_hiddens", dir, D, D_values);
        return NULL;
    }
    char why[160];
    if (!heads_split(D, num_heads, "num_hiddens", "num_heads", why, sizeof why)) {
        error_format(err, err_len, NULL, "%s/num_heads.npy: %s", dir, why);
        return NULL;
    }
    /* a model saved with the MLP has its files, mlp.0.weight (N, D) first */
    int mlp_hiddens = 0, mlp_cols = 0;
    char *mlp_path = npy_path(dir, "mlp.0.weight");
    const bool has_mlp = access(mlp_path, F_OK) == 0;
    free(mlp_path);
    if (has_mlp) {
        if (read_table_shape(dir, "mlp.0.weight", &mlp_hiddens, &mlp_cols, err, err_len) != 0)
            return NULL;
        if (mlp_cols != D || mlp_hiddens < 1) {
            error_format(err, err_len, NULL, "%s: mlp.0.weight has shape (%d, %d), expected (N, %d)", dir,
                 mlp_hiddens, mlp_cols, D);
            return NULL;
        }
    }
    /* every parameter is overwritten by the load: the draws do not matter */
    Rng rng = rng_new(0);
    TwoKeyModel *model = two_key_new_mlp(key_vocab, value_vocab, D, num_heads, mlp_hiddens,
                                         &rng);
    if (two_key_load(model, dir, err, err_len) != 0) {
        two_key_free(model);
        return NULL;
    }
    return model;
}

/* The length of DIR/NAME.npy, a vector. */
static int read_vector_length(const char *dir, const char *name, int *length, char *err,
                              size_t err_len)
{
    char *path = npy_path(dir, name);
    Tensor *vector = npy_load(path, err, err_len);
    int status = vector == NULL ? -1 : 0;
    if (vector != NULL && vector->ndim != 1)
        status = error_format(err, err_len, NULL, "%s: expected a vector (num_hiddens,), got %d "
                              "dimensions", path, vector->ndim);
    else if (vector != NULL)
        *length = vector->shape[0];
    tensor_free(vector);
    free(path);
    return status;
}

/* The sizes a language model's files give, checked against limits before
 * it is built. num_hiddens is what two of wte.weight, wpe.weight and
 * ln_f.weight agree on, so that the load blames the third (model_load
 * names a file whose shape does not fit). */
static int language_sizes(const char *dir, const LanguageLimits *limits, int *V, int *C, int *D,
                          int *H, int *N, int *bytes, char *err, size_t err_len)
{
    int D_tokens = 0, D_positions = 0, D_norm = 0;
    if (read_table_shape(dir, "wte.weight", V, &D_tokens, err, err_len) != 0 ||
        read_table_shape(dir, "wpe.weight", C, &D_positions, err, err_len) != 0 ||
        read_vector_length(dir, "ln_f.weight", &D_norm, err, err_len) != 0 ||
        model_read_ints(dir, "num_heads", H, 1, err, err_len) != 0 ||
        model_read_ints(dir, "num_layers", N, 1, err, err_len) != 0)
        return -1;
    if (D_tokens != D_positions && D_tokens != D_norm && D_positions != D_norm)
        return error_format(err, err_len, NULL, "%s: wte.weight, wpe.weight and ln_f.weight "
                            "give num_hiddens %d, %d and %d: no two agree", dir, D_tokens,
                            D_positions, D_norm);
    *D = D_tokens == D_positions || D_tokens == D_norm ? D_tokens : D_positions;
    if (*V < 2 || *V > LM_MAX_VOCAB)
        return error_format(err, err_len, NULL, "%s/wte.weight.npy: %d tokens, expected 2 to %d",
                            dir, *V, LM_MAX_VOCAB);
    if (*D < limits->min_hiddens || *D > limits->max_hiddens)
        return error_format(err, err_len, NULL, "%s/wte.weight.npy: num_hiddens %d, expected "
                            "%d to %d", dir, *D, limits->min_hiddens, limits->max_hiddens);
    if (*C < limits->min_context || *C > limits->max_context)
        return error_format(err, err_len, NULL, "%s/wpe.weight.npy: a context of %d %s, "
                            "expected %d to %d", dir, *C, *C == 1 ? "position" : "positions",
                            limits->min_context, limits->max_context);
    if (*N < 1 || *N > LM_MAX_LAYERS)
        return error_format(err, err_len, NULL, "%s/num_layers.npy: %d, expected 1 to %d", dir,
                            *N, LM_MAX_LAYERS);
    if (*H < 1 || *H > LM_MAX_HEADS)
        return error_format(err, err_len, NULL, "%s/num_heads.npy: %d, expected 1 to %d", dir,
                            *H, LM_MAX_HEADS);
    char why[160];
    if (!heads_split(*D, *H, "num_hiddens", "num_heads", why, sizeof why))
        return error_format(err, err_len, NULL, "%s/num_heads.npy: %s", dir, why);
    if (model_read_ints(dir, "vocab", bytes, *V, err, err_len) != 0)
        return -1;
    for (int i = 0; i < *V; i++)
        if (bytes[i] < 0 || bytes[i] > 255 || (i > 0 && bytes[i] <= bytes[i - 1]))
            return error_format(err, err_len, NULL, "%s/vocab.npy: entry %d is %d, expected "
                                "bytes from 0 to 255 in increasing order", dir, i, bytes[i]);
    return 0;
}

LanguageModel *language_model_load_new(const char *dir, const LanguageLimits *limits, char *err,
                                       size_t err_len)
{
    int V = 0, C = 0, D = 0, H = 0, N = 0, bytes[LM_MAX_VOCAB];
    if (language_sizes(dir, limits, &V, &C, &D, &H, &N, bytes, err, err_len) != 0)
        return NULL;
    /* every parameter is overwritten by the load: the draws do not matter */
    Rng rng = rng_new(0);
    LanguageModel *model = language_model_new(bytes, V, C, D, H, N, &rng);
    if (model_load(dir, model->files, model->num_files, err, err_len) != 0) {
        language_model_free(model);
        return NULL;
    }
    return model;
}
