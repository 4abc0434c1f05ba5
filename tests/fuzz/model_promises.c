/*
 * model_promises.c - what the model-directory loader (common/io/model.c
 * under common/learn/lookup_model.c) promises for any directory, checked on one
 * input. See promises.h for the input's format.
 *
 * The input becomes the files of a small lookup model with its training
 * state in a scratch directory, and is then loaded three ways:
 *   1. as `train --from DIR` does: lookup_load_new reads the sizes from the
 *      files, checks them and builds the model, lookup_load_training_new
 *      reads Adam's state and what draws the batches;
 *   2. into a model of fixed sizes (2 countries, num_hiddens 2, 2 heads,
 *      the seeds' sizes) with lookup_load, then lookup_load_training.
 * The promises:
 *   - a refusal is one line that names a file under the directory, or the
 *     directory, and says why;
 *   - a refused load changes nothing: the model's tensors, Adam's moments,
 *     its step and learning rate are as they were (compared with a copy);
 *   - an accepted model has the sizes train can run (2 to 40 countries,
 *     num_hiddens up to 512 divided by 1 to 16 heads), every tensor the
 *     shape those sizes give, and only finite numbers; an accepted training
 *     state has a step count of at least 0, a learning rate above 0, a
 *     batch and pairs train can use, finite moments, and squared-gradient
 *     averages (v) of 0 or more, whose square root the next step takes;
 *   - loading never blocks (a named pipe) and never leaks (LeakSanitizer).
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/internal.h"
#include "run/internal.h"
#include "run/saved_models.h"
#include "learn/lookup_model.h"
#include "promises.h"

/* The files lookup_save_training writes, in the order a seed lists them. */
const char *const model_fuzz_file_names[] = {
    "embed_keys.weight", "embed_values.weight", "attention.in_proj_weight",
    "attention.in_proj_bias", "attention.out_proj.weight", "attention.out_proj.bias",
    "readout.weight", "readout.bias", "num_heads",
    "optimizer.exp_avg.embed_keys.weight", "optimizer.exp_avg_sq.embed_keys.weight",
    "optimizer.exp_avg.embed_values.weight", "optimizer.exp_avg_sq.embed_values.weight",
    "optimizer.exp_avg.attention.in_proj_weight", "optimizer.exp_avg_sq.attention.in_proj_weight",
    "optimizer.exp_avg.attention.in_proj_bias", "optimizer.exp_avg_sq.attention.in_proj_bias",
    "optimizer.exp_avg.attention.out_proj.weight",
    "optimizer.exp_avg_sq.attention.out_proj.weight",
    "optimizer.exp_avg.attention.out_proj.bias", "optimizer.exp_avg_sq.attention.out_proj.bias",
    "optimizer.exp_avg.readout.weight", "optimizer.exp_avg_sq.readout.weight",
    "optimizer.exp_avg.readout.bias", "optimizer.exp_avg_sq.readout.bias",
    "optimizer.step", "optimizer.lr", "training",
};
const int model_fuzz_num_files = LOOKUP_NUM_SAVED_FILES;
_Static_assert(sizeof model_fuzz_file_names / sizeof model_fuzz_file_names[0] ==
               LOOKUP_NUM_SAVED_FILES, "one name for each saved file");

/* train's limits when it evaluates a model: --pairs 2 and its options' ranges */
static const LookupLimits LIMITS = {.min_vocab = 2, .max_vocab = 40, .max_hiddens = 512,
                                    .max_heads = 16, .max_batch = 4096, .max_pairs = 16};
enum { FIXED_VOCAB = 2, FIXED_HIDDENS = 2, FIXED_HEADS = 2 };

/* ---- the scratch directory ------------------------------------------------------ */

static char scratch[64];
/* the model of fixed sizes and its optimiser, made on the first input */
static LookupModel *fixed;
static Adam *fixed_adam;

static void remove_entries(void)
{
    char path[256];
    for (int i = 0; i < model_fuzz_num_files; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", scratch, model_fuzz_file_names[i]);
        if (unlink(path) != 0 && (errno == EISDIR || errno == EPERM))
            rmdir(path);
    }
}

void model_promises_cleanup(void)
{
    if (scratch[0] == '\0')
        return;
    remove_entries();
    rmdir(scratch);
    scratch[0] = '\0';
    adam_free(fixed_adam);
    lookup_free(fixed);
    fixed_adam = NULL;
    fixed = NULL;
}

/* One directory per process, made on the first input, emptied before each. */
static bool prepare_scratch(void)
{
    if (scratch[0] == '\0') {
        snprintf(scratch, sizeof scratch, "/tmp/model_fuzz_XXXXXX");
        if (mkdtemp(scratch) == NULL) {
            scratch[0] = '\0';
            return false;
        }
    }
    remove_entries();
    return true;
}

/* Chunk i of the input as file i: absent when empty, or a broken link, a
 * directory or a named pipe for the one-byte chunks 'L', 'D' and 'P'. */
static bool write_entry(const char *name, const uint8_t *bytes, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.npy", scratch, name);
    if (len == 0)
        return true;
    if (len == 1 && bytes[0] == 'L')
        return symlink("nowhere.npy", path) == 0;
    if (len == 1 && bytes[0] == 'D')
        return mkdir(path, 0700) == 0;
    if (len == 1 && bytes[0] == 'P')
        return mkfifo(path, 0600) == 0;
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return false;
    bool ok = fwrite(bytes, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static bool write_directory(const uint8_t *data, size_t size)
{
    const size_t sep_len = strlen(MODEL_FUZZ_SEPARATOR);
    size_t start = 0;
    for (int i = 0; i < model_fuzz_num_files && start <= size; i++) {
        const uint8_t *sep = NULL;
        for (size_t at = start; at + sep_len <= size && sep == NULL; at++)
            if (memcmp(data + at, MODEL_FUZZ_SEPARATOR, sep_len) == 0)
                sep = data + at;
        size_t len = sep ? (size_t)(sep - (data + start)) : size - start;
        if (!write_entry(model_fuzz_file_names[i], data + start, len))
            return false;
        start += len + sep_len;
    }
    return true;
}

/* ---- what a load may change, copied ------------------------------------------------ */

typedef struct {
    float *numbers;   /* every parameter, then every moment m, then v */
    size_t count;
    long step;
    float lr;
    int saved_num_heads;
} State;

static State state_take(const LookupModel *m, const Adam *adam)
{
    State s = {.count = parameters_count(m->params, m->num_params) * (adam ? 3 : 1),
               .step = adam ? adam->step : 0, .lr = adam ? adam->lr : 0,
               .saved_num_heads = m->saved_num_heads};
    s.numbers = malloc(s.count * sizeof(float));
    float *at = s.numbers;
    for (int copy = 0; copy < (adam ? 3 : 1); copy++)
        for (int i = 0; i < m->num_params; i++) {
            const Tensor *t = copy == 0 ? m->params[i].value : copy == 1 ? adam->m[i] : adam->v[i];
            memcpy(at, t->data, t->size * sizeof(float));
            at += t->size;
        }
    return s;
}

static bool state_same(const State *a, const State *b)
{
    return a->count == b->count && a->step == b->step && a->lr == b->lr &&
           a->saved_num_heads == b->saved_num_heads &&
           memcmp(a->numbers, b->numbers, a->count * sizeof(float)) == 0;
}

/* ---- the promises ------------------------------------------------------------------ */

static bool names_the_directory(const char *err)
{
    const size_t n = strlen(scratch);
    if (strncmp(err, scratch, n) != 0 || strchr(err, '\n') != NULL)
        return false;
    if (strncmp(err + n, " does not hold a model", 22) == 0)
        return true;
    for (int i = 0; i < model_fuzz_num_files; i++) {
        const char *name = model_fuzz_file_names[i];
        const size_t len = strlen(name);
        if (err[n] == '/' && strncmp(err + n + 1, name, len) == 0 &&
            strncmp(err + n + 1 + len, ".npy: ", 6) == 0 && strlen(err) > n + len + 8)
            return true;
    }
    return false;
}

static bool has_shape(const Tensor *t, int rows, int cols)
{
    return cols == 0 ? t->ndim == 1 && t->shape[0] == rows
                     : t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
}

static const char *check_model(const LookupModel *m)
{
    const int V = m->key_vocab, D = m->num_hiddens, H = m->num_heads;
    if (m->value_vocab != V || V < LIMITS.min_vocab || V > LIMITS.max_vocab || D < 1 ||
        D > LIMITS.max_hiddens || H < 1 || H > LIMITS.max_heads || D % H != 0 ||
        m->saved_num_heads != H)
        return "an accepted model has sizes train can run";
    const MultiHeadAttention *a = m->attention;
    if (!has_shape(m->embed_keys, V, D) || !has_shape(m->embed_values, V, D) ||
        !has_shape(a->W_q, D, D) || !has_shape(a->W_k, D, D) || !has_shape(a->W_v, D, D) ||
        !has_shape(a->W_o, D, D) || !has_shape(a->b_q, D, 0) || !has_shape(a->b_k, D, 0) ||
        !has_shape(a->b_v, D, 0) || !has_shape(a->b_o, D, 0) ||
        !has_shape(m->readout_weight, V, D) || !has_shape(m->readout_bias, V, 0))
        return "an accepted model's tensors have the shapes its sizes give";
    if (!parameters_finite(m->params, m->num_params))
        return "an accepted model holds only finite numbers";
    return NULL;
}

static const char *check_training(const LookupModel *m, const Adam *adam,
                                  const LookupTraining *training)
{
    if (adam->step < 0 || !(adam->lr > 0.0f) || !isfinite(adam->lr))
        return "an accepted training state has a step of at least 0 and a learning rate above 0";
    if (training->batch_size < 1 || training->batch_size > LIMITS.max_batch ||
        training->num_pairs < 2 || training->num_pairs > LIMITS.max_pairs ||
        training->num_pairs > m->key_vocab)
        return "an accepted training state has a batch and pairs train can use";
    for (int i = 0; i < adam->count; i++)
        for (size_t j = 0; j < adam->m[i]->size; j++)
            if (!isfinite(adam->m[i]->data[j]) || !isfinite(adam->v[i]->data[j]))
                return "accepted moments are finite";
            else if (adam->v[i]->data[j] < 0.0f)
                return "accepted squared-gradient averages are not negative";
    return NULL;
}

/* 1. As train --from DIR loads it. */
static const char *load_as_train_does(ModelOutcome *outcome)
{
    char *err = outcome->message;
    const size_t err_len = sizeof outcome->message;
    LookupModel *m = lookup_load_new(scratch, &LIMITS, err, err_len);
    if (m == NULL) {
        outcome->verdict = MODEL_REFUSED;
        return names_the_directory(err) ? NULL : "a refusal is one line naming a file and why";
    }
    outcome->key_vocab = m->key_vocab;
    outcome->num_hiddens = m->num_hiddens;
    outcome->num_heads = m->num_heads;
    const char *broken = check_model(m);
    State before = state_take(m, NULL);
    LookupTraining training;
    Adam *adam = broken ? NULL : lookup_load_training_new(m, scratch, &LIMITS, &training, err,
                                                          err_len);
    State after = state_take(m, NULL);
    if (broken == NULL && adam == NULL) {
        outcome->verdict = MODEL_TRAINING_REFUSED;
        if (!names_the_directory(err))
            broken = "a refusal is one line naming a file and why";
        else if (!state_same(&before, &after))
            broken = "a refused training state leaves the model as it was";
    } else if (broken == NULL) {
        outcome->verdict = MODEL_ACCEPTED;
        broken = check_training(m, adam, &training);
        if (broken == NULL && !state_same(&before, &after))
            broken = "the training state holds the model the model files hold";
    }
    free(before.numbers);
    free(after.numbers);
    adam_free(adam);
    lookup_free(m);
    return broken;
}

/* 2. Into a model of fixed sizes: a refusal changes nothing. */
static const char *load_into_fixed(void)
{
    if (fixed == NULL) {
        Rng rng = rng_new(1);
        fixed = lookup_new(FIXED_VOCAB, FIXED_VOCAB, FIXED_HIDDENS, FIXED_HEADS, &rng);
        fixed_adam = adam_new(fixed->params, fixed->num_params, 1e-3f);
    }
    Adam *adam = fixed_adam;
    char err[MODEL_ERR_LEN];
    const char *broken = NULL;
    State before = state_take(fixed, adam);
    if (lookup_load(fixed, scratch, err, sizeof err) != 0) {
        State after = state_take(fixed, adam);
        if (!names_the_directory(err))
            broken = "a refusal is one line naming a file and why";
        else if (!state_same(&before, &after))
            broken = "a refused model load changes no tensor";
        free(after.numbers);
    } else if ((broken = check_model(fixed)) == NULL) {
        LookupTraining training;
        State loaded = state_take(fixed, adam);
        if (lookup_load_training(fixed, adam, &training, NULL, scratch, err, sizeof err) != 0) {
            State after = state_take(fixed, adam);
            if (!names_the_directory(err))
                broken = "a refusal is one line naming a file and why";
            else if (!state_same(&loaded, &after))
                broken = "a refused training load changes no tensor, step or learning rate";
            free(after.numbers);
        }
        free(loaded.numbers);
    }
    free(before.numbers);
    return broken;
}

const char *model_promises(const uint8_t *data, size_t size, ModelOutcome *outcome)
{
    memset(outcome, 0, sizeof *outcome);
    if (!prepare_scratch() || !write_directory(data, size))
        return NULL;   /* the disk, not the loader: nothing to check */
    const char *broken = load_as_train_does(outcome);
    if (broken == NULL)
        broken = load_into_fixed();
    remove_entries();
    return broken;
}
