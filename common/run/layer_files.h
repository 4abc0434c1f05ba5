/*
 * layer_files.h - a multi-head attention layer as a directory of .npy files
 * (introduced in chapter 05).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value sizes.
 *
 * A directory such as the one a PyTorch script exports holds
 *
 *   queries.npy (B, T, Dq)   keys.npy (B, n_k, Dk)   values.npy (B, n_k, Dv)
 *   W_q.npy (D, Dq)  W_k.npy (D, Dk)  W_v.npy (D, Dv)  W_o.npy (D, D)
 *   optional: b_q.npy ... b_o.npy (D,), valid_lens.npy (B,) or (B, T) integers,
 *             grad_output.npy (B, T, D): the gradient of a loss with respect
 *             to the output, which asks for the backward (below),
 *             expected_NAME.npy for any result NAME, to compare with
 *
 * with the weights in PyTorch's (out_features, in_features) layout. Every
 * file is one row of a table (layer_files.c): its name, its shape in the
 * letters above and what the shape means. A size is fixed by the first file
 * that has it (B, T and Dq by queries.npy, D by W_q.npy) and checked in
 * every later one, so a file that does not fit is named in one line before
 * anything is computed. An optional input is one more row and one more field
 * of LayerFiles.
 *
 * Results go back as a set of named tensors (output, attention_weights,
 * and whatever a program adds), and a directory receives them as a set
 * (layer_files_save, below): a reader sees all of one run's files or all
 * of another's, never a mix, never a half-written or temporary file, and a
 * run that fails leaves the previous complete set in place.
 *
 * Errors are returned, never fatal, as in npy.h: every function takes a
 * buffer err of err_len bytes and fills it with one line naming the file
 * and the problem; the program prints it after its own name.
 */
#ifndef LAYER_FILES_H
#define LAYER_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "multihead.h"
#include "multihead_checked.h"
#include "tensor.h"
#include "valid_lens.h"

/* Room for any message these functions write (longer paths are cut). */
enum { LAYER_FILES_ERR_LEN = 1024 };

/* Everything a directory holds for one run of the layer. The tensors are
 * owned here; layer borrows the weights and biases below, so it is used as
 * &files.layer and never given to multihead_free. */
typedef struct {
    Tensor *queries, *keys, *values;      /* (B, T, Dq), (B, n_k, Dk), (B, n_k, Dv) */
    Tensor *W_q, *W_k, *W_v, *W_o;        /* (D, Dq), (D, Dk), (D, Dv), (D, D) */
    Tensor *b_q, *b_k, *b_v, *b_o;        /* (D,) each, or NULL: no such file */
    Tensor *grad_output;                  /* (B, T, D), or NULL: no backward */
    ValidLens *valid_lens;                /* (B,) or (B, T), or NULL: no mask */
    MultiHeadAttention layer;             /* sizes, num_heads, the tensors above */
} LayerFiles;

/* Load and check every file of dir for a layer of num_heads heads.
 * Returns 0, or -1 with one line in err; either way files holds what was
 * read and layer_files_free releases it. Besides each file's own checks
 * (npy.h) and its shape, the set must be whole: some of the four biases
 * but not all is an error naming the missing ones, and an optional file
 * that is a symbolic link leading nowhere is an error naming it (not "no
 * such file"). The files are read under a shared lock on dir when it has
 * the lock file (see layer_files_save), so a writer's renames never land
 * half way through. */
int layer_files_load(const char *dir, int num_heads, LayerFiles *files, char *err,
                     size_t err_len);
void layer_files_free(LayerFiles *files);

/* ---- a decoder layer, and heads already split ------------------------------
 * 05_multihead/decode --from DIR: tokens.npy (B, T, D), W_q and W_o (D, D),
 * W_k and W_v (G*d, D) for num_kv_heads G, optional b_q, b_o (D,) and b_k,
 * b_v (G*d,), all four biases or none. layer borrows params. */
typedef struct {
    Tensor *tokens;                        /* (B, T, D) */
    Tensor *params[8];                     /* W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o */
    MultiHeadAttention layer;              /* sizes, num_heads, num_kv_heads, params */
} DecoderFiles;

/* Load and check DIR for a layer of num_heads query heads and num_kv_heads
 * key-value heads: 0, or -1 with one line in err naming the file, both
 * shapes and what fixed them. Either way decoder_files_free releases it. */
int layer_files_load_decoder(const char *dir, int num_heads, int num_kv_heads,
                             DecoderFiles *files, char *err, size_t err_len);
void decoder_files_free(DecoderFiles *files);

/* 06_permutation_invariance/relative_positions --from DIR: queries, keys
 * and values.npy, heads already split, each (B, H, T, d), all one shape.
 * 0, or -1 with one line in err; qkv[i] NULL or owned by the caller. */
int layer_files_load_heads(const char *dir, Tensor *qkv[3], char *err, size_t err_len);

/* One file of a set to write. tensor is saved as float32 ('<f4'), lengths
 * as int32 ('<i4'); when both are NULL the file is not part of this run and
 * an old DIR/name.npy is removed, so that reading the directory back does
 * not pick up a bias or a mask of an earlier run. */
typedef struct {
    const char *name;           /* "output": the file DIR/output.npy */
    const Tensor *tensor;
    const ValidLens *lengths;
} NamedTensor;

/* The parameters of layer, named as the files are: W_q, W_k, W_v, W_o,
 * b_q, b_k, b_v, b_o (a NULL bias stays NULL). Returns the count, 8. */
enum { LAYER_FILES_PARAMETERS = 8 };
int layer_files_parameters(const MultiHeadAttention *layer,
                           NamedTensor out[LAYER_FILES_PARAMETERS]);

/* Write every tensor of the set into dir as NAME.npy, as one set
 * (fileset.h): after a failure or a kill, dir holds the previous run's set
 * or this one, never a mix; a name without a tensor is a file of a
 * previous run that this run does not write (its gradients), left out of
 * the new set. Files of dir that the set does not name (the inputs, when
 * --from and --to are one directory) stay. At most LAYER_FILES_MAX_SET
 * files. Returns 0, or -1 with one line in err. */
enum { LAYER_FILES_MAX_SET = 32 };
int layer_files_save(const char *dir, const NamedTensor *set, int count, char *err,
                     size_t err_len);

/* true when the two paths name one directory (--from DIR --to DIR). */
bool layer_files_same_dir(const char *a, const char *b);

/* A LayerFiles view of a layer and its inputs, owning nothing (never give
 * it to layer_files_free): what layer_files_save_run writes for a run that
 * did not come from files. */
LayerFiles layer_files_borrow(const MultiHeadAttention *layer, const Tensor *queries,
                              const Tensor *keys, const Tensor *values,
                              const ValidLens *valid_lens);

/* The gradients named as their files: grad_queries, grad_keys, grad_values,
 * grad_W_q ... grad_W_o, grad_b_q ... grad_b_o. Empty grads (no backward
 * this run) or a layer without biases gives entries without a tensor, so
 * layer_files_save removes such files left by an earlier run. Returns the
 * count, 11. */
enum { LAYER_FILES_GRADIENTS = LAYER_GRADIENTS };
int layer_files_gradients(const LayerGradients *grads, NamedTensor out[LAYER_FILES_GRADIENTS]);

/* ---- a run (multihead_checked.h) ----------------------------------------- */

/* The files of one run into dir as one set (layer_files_save): inputs
 * (queries ... values, W_q ... b_o, valid_lens, grad_output; NULL: dir is
 * the directory they were read from, and they stay as they are), then
 * output, attention_weights and grad_NAME for every gradient. A name the
 * run does not have (no biases, no mask, no backward) is removed from dir,
 * so that reading it back finds this run only. Then says so on stdout:
 *   wrote out/output.npy (2, 4, 100) and out/attention_weights.npy (2, 5, 4, 6)
 * and, with gradients, a second line naming out/grad_<name>.npy. */
int layer_files_save_run(const char *dir, const LayerFiles *inputs, const LayerResults *results,
                         char *err, size_t err_len);

/* ---- comparing with PyTorch ------------------------------------------------ */

/* A result against DIR/expected_NAME.npy. */
typedef struct {
    bool present;          /* false: no expected file, nothing compared */
    bool same_shape;       /* false: the shapes differ, max_diff is not set */
    int expected_ndim;     /* the expected file's shape, for the message */
    int expected_shape[TENSOR_MAX_DIMS];
    float max_diff;        /* largest |actual - expected| */
    bool close;            /* every element within atol + rtol * |expected| */
} Comparison;

/* Compare actual with DIR/expected_NAME.npy when that file exists.
 * Returns 0 (result in *out), or -1 with one line in err when the file
 * exists but cannot be read. */
int layer_files_compare(const char *dir, const char *name, const Tensor *actual, float atol,
                        float rtol, Comparison *out, char *err, size_t err_len);

/* Every result of the set that has a DIR/expected_NAME.npy, compared
 * within atol + rtol * |expected|, one line each on stdout:
 *   "output vs expected_output.npy: largest difference 2.98e-08, equal within 1e-5"
 * Returns 0 when all agree (or none is there to compare), 1 when one
 * differs, -1 with one line in err when an expected file cannot be read. */
int layer_files_check_expected(const char *dir, const NamedTensor *results, int count,
                                float atol, float rtol, char *err, size_t err_len);

/* layer_files_check_expected on a run's results: output,
 * attention_weights and every gradient there is. */
int layer_files_check_results(const char *dir, const LayerResults *results, float atol,
                              float rtol, char *err, size_t err_len);

/* What layer_files_load read, on stdout:
 *   Loaded DIR:
 *     queries (3, 2, 12), keys (3, 6, 5), values (3, 6, 7)
 *     W_q (12, 12), W_k (12, 5), W_v (12, 7), W_o (12, 12), with biases
 *     valid_lens = tensor([6, 2, 4])
 *   num_heads = 4, head size d = 3                                        */
void layer_files_print(const char *dir, const LayerFiles *files);

/* Per-head weights (B, H, T, n_k) as a grid of heatmaps under title, one row
 * of panels per sequence, each titled "sequence b, head h": DIR/NAME.dat and
 * DIR/NAME.gp (plot_heatmaps_titled). Returns 0, or the exit status (fail)
 * after its one line on stderr. */
int layer_files_plot_weights(const char *dir, const char *name, const char *title,
                             const Tensor *weights);
/* multihead's plot, as the story and its file tool write it: weights
 * (B, H, T, n_k) as DIR/multihead_weights.{dat,gp}, then one line on stdout
 * saying so. Returns 0, or the exit status (fail) after its one line on
 * stderr. */
int layer_files_plot_multihead(const char *dir, const Tensor *weights);

#endif
