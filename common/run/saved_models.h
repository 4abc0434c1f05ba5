/*
 * saved_models.h - the small models of common/learn/ as directories of .npy
 * files, and the dictionary model with its training state (introduced in
 * chapter 05's optional section "Attention that learns").
 *
 * A model lists its own parameters under PyTorch's names
 * (state_dict.h); io/model.h writes and reads any such list. What is
 * here is what a list alone does not say: the number of heads checked
 * before anything is read, a model built from the sizes its files give,
 * and Adam's state beside the model, under torch.optim.Adam's names:
 *     optimizer.exp_avg.<file>.npy          m, stacked as <file> is
 *     optimizer.exp_avg_sq.<file>.npy       v, the same way
 *     optimizer.step.npy (1,)               steps taken
 *     optimizer.lr.npy (1,)                 the learning rate
 *     training.npy (6,)                     batch size, pairs, and the seed
 *                                           as four 16-bit pieces, lowest first
 */
#ifndef SAVED_MODELS_H
#define SAVED_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "io/model.h"
#include "learn/language_model.h"
#include "learn/lookup_model.h"
#include "learn/optim.h"
#include "learn/two_key_model.h"

/* the dictionary model's files with its training state */
enum { LOOKUP_NUM_SAVED_FILES = LOOKUP_NUM_FILES + 2 * (LOOKUP_NUM_FILES - 1) + 3 };

/* ---- the dictionary model (05_multihead/train) --------------------------------
 * Load DIR/<name>.npy files into a model of the same sizes (io/model.h: one
 * error line naming the file). Returns 0 or -1. model_save(dir,
 * model->files, LOOKUP_NUM_FILES, ...) writes them. */
int lookup_load(LookupModel *model, const char *dir, char *err, size_t err_len);

/* What draws the batches: train.c draws the batch of step s from (seed, s)
 * alone, so with Adam's step count this is all a run needs to go on where
 * another stopped. */
typedef struct {
    int batch_size, num_pairs;
    uint64_t seed;
} LookupTraining;

/* The model, Adam's state (whose parameters must be the model's) and the
 * training as one set of files (above); loading reads and checks them all
 * (a negative step count, a seed piece outside 16 bits and a learning rate
 * not above 0 are refused) before it changes anything. Returns 0 or -1,
 * err filled (err must not be NULL). */
int lookup_save_training(const LookupModel *model, const Adam *adam,
                         const LookupTraining *training, const char *dir, char *err,
                         size_t err_len);

/* ---- a saved model, sizes and all (train --from DIR) ------------------------
 * What a program can run: the ends of its options' ranges. */
typedef struct {
    int min_vocab, max_vocab;     /* countries: at least a dictionary's pairs */
    int max_hiddens, max_heads;   /* D and H */
    int max_batch, max_pairs;     /* the training state's batch size and pairs */
} LookupLimits;

/* A new model of the sizes DIR's files give (Vk = Vv and D from
 * embed_keys.weight (Vk, D), H from num_heads), checked against limits and
 * D % H == 0, then loaded. NULL with err filled (not NULL): one line naming
 * the file, or the directory when the sizes do not fit. */
LookupModel *lookup_load_new(const char *dir, const LookupLimits *limits, char *err,
                             size_t err_len);
/* A new Adam over model's parameters with DIR's training state, as
 * lookup_save_training wrote it, the batch size (1 to max_batch) and the pairs
 * (2 to max_pairs, at most Vk) checked too. NULL with err filled and the
 * model unchanged. */
Adam *lookup_load_training_new(LookupModel *model, const char *dir, const LookupLimits *limits,
                               LookupTraining *training, char *err, size_t err_len);

/* ---- the two-key model (05_multihead/head_importance) ------------------------
 * Save as DIR/<name>.npy files, or load them into a model of the same
 * sizes (io/model.h). Returns 0, or -1 with one line in err. */
int two_key_save(TwoKeyModel *model, const char *dir, char *err, size_t err_len);
int two_key_load(TwoKeyModel *model, const char *dir, char *err, size_t err_len);
/* A new model with the sizes a saved directory holds (read from its
 * num_heads file and its embeddings' shapes), loaded from it; NULL, with
 * one line in err, when the directory does not hold a two-key model. */
TwoKeyModel *two_key_from_dir(const char *dir, char *err, size_t err_len);

/* ---- the language model (06_permutation_invariance/language_model.md) ----
 * A model saved with model_save(dir, model->files, model->num_files):
 * its sizes read from the files (wte.weight (V, D), wpe.weight (C, D),
 * ln_f.weight (D,), num_heads, num_layers, vocab (V,)) and checked against
 * the ranges a program's options have (limits; 2 to LM_MAX_VOCAB tokens, 1
 * to LM_MAX_LAYERS layers, 1 to LM_MAX_HEADS heads that split D, the vocabulary's bytes increasing
 * within [0, 255]), then loaded. NULL with one line in err naming the file
 * when anything does not fit; of three files that give D, the one that
 * differs from the other two. */
typedef struct {
    int min_context, max_context;    /* C */
    int min_hiddens, max_hiddens;    /* D */
} LanguageLimits;

LanguageModel *language_model_load_new(const char *dir, const LanguageLimits *limits, char *err,
                                       size_t err_len);

#endif
