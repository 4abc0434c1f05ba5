/*
 * lookup_model.h - the model that learns to look words up (introduced in
 * chapter 05's optional section "Attention that learns").
 *
 * Legend: B = batch_size, P = entries of an example (num_keys of the
 * attention), Q = query words of an example (num_queries), H = num_heads,
 * D = num_hiddens, Vk = key vocabulary, Vv = value vocabulary.
 *
 *   queries (B, Q)  keys (B, P)  values (B, P)          word ids (tasks.h)
 *      | embed_keys   | embed_keys  | embed_values      (Vk, D), (Vv, D)
 *   q (B, Q, D)     k (B, P, D)  v (B, P, D)
 *      \______________|_____________/
 *        attention: multi-head, H heads              W_q, W_k, W_v, W_o + biases
 *                     |
 *              out (B, Q, D)
 *                     | readout: linear D -> Vv
 *              logits (B, Q, Vv)  -> cross-entropy against answers (B, Q)
 *
 * The query word and the entries' keys share one embedding: a country is
 * one vector wherever it appears, so "this query names that key" is a
 * comparison of the same vector through W_q and W_k. The values have their
 * own table, and the readout turns the attention's output into a score per
 * value word. Answer i is read from query word i, so a task used with this
 * model has as many answer words as query words (A = Q).
 *
 * The attention is the layer of chapter 05, called as it is: the model
 * holds it as a pair of functions (attention_layer.h), its forward
 * with a cache and its backward, and runs it on the embedded words.
 *
 * As PyTorch (tests/fixtures/make_train_fixtures.py writes it):
 *     class LookupModel(nn.Module):
 *         embed_keys = nn.Embedding(Vk, D); embed_values = nn.Embedding(Vv, D)
 *         attention = nn.MultiheadAttention(D, H, batch_first=True)
 *         readout = nn.Linear(D, Vv)
 * and described under those parameter names (state_dict.h):
 *     embed_keys.weight (Vk, D)             embed_values.weight (Vv, D)
 *     attention.in_proj_weight (3D, D)      = W_q, W_k, W_v stacked
 *     attention.in_proj_bias (3D,)          = b_q, b_k, b_v stacked
 *     attention.out_proj.weight (D, D)      attention.out_proj.bias (D,)
 *     readout.weight (Vv, D)                readout.bias (Vv,)
 *     num_heads (1,)                        the one size no shape says
 * and, to go on training, Adam's state beside them (run/saved_models.h).
 */
#ifndef LOOKUP_MODEL_H
#define LOOKUP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "attention_layer.h"
#include "learn/optim.h"
#include "state_dict.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

/* the optimiser's tensors; the files of its state_dict (state_dict.h) */
enum { LOOKUP_NUM_PARAMS = 12, LOOKUP_NUM_FILES = 9 };

typedef struct {
    int key_vocab, value_vocab;       /* Vk, Vv */
    int num_hiddens, num_heads;       /* D, H */
    int num_kv_heads;                 /* G, dividing H: H unless made by lookup_new_grouped */
    Tensor *embed_keys;               /* (Vk, D) */
    Tensor *embed_values;             /* (Vv, D) */
    MultiHeadAttention *attention;    /* D -> D, H heads, with biases */
    AttentionLayer attend;            /* how it runs: CLEAR_ATTENTION unless a program says */
    Tensor *readout_weight;           /* (Vv, D) */
    Tensor *readout_bias;             /* (Vv,) */

    /* gradients, same shapes, added into by lookup_backward */
    Tensor *grad_embed_keys, *grad_embed_values;
    MultiHeadGrads *grad_attention;
    Tensor *grad_readout_weight, *grad_readout_bias;

    /* both filled from one listing (learn/parameter_table.h): every
     * trainable tensor with its gradient, for the optimiser and the
     * gradient checks (W_q, W_k, W_v as separate tensors: Adam works
     * element by element, so this equals PyTorch's stacked
     * in_proj_weight); and the model's state_dict, PyTorch's names */
    Parameter params[LOOKUP_NUM_PARAMS];
    int num_params;
    ModelFile files[LOOKUP_NUM_FILES];
    int saved_num_heads;              /* what the num_heads file holds */
} LookupModel;

/* Parameters drawn as PyTorch initialises the modules above:
 * embeddings N(0, 1); in_proj_weight Xavier-uniform over (3D, D), in_proj
 * and out_proj biases 0, out_proj.weight and the readout nn.Linear's
 * default (uniform, bound 1/sqrt(D)). num_hiddens must divide by num_heads. */
LookupModel *lookup_new(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                        Rng *rng);
/* The same model with grouped-query attention (05_multihead/decoding.md):
 * G = num_kv_heads key-value heads, so W_k and W_v are (G*d, D). Trained
 * and evaluated like any other; saving one is not supported (the files
 * name num_heads only). */
LookupModel *lookup_new_grouped(int key_vocab, int value_vocab, int num_hiddens,
                                int num_heads, int num_kv_heads, Rng *rng);
void lookup_free(LookupModel *model);   /* NULL is fine */

/* What the forward keeps for the backward. */
typedef struct {
    const TaskBatch *batch;           /* borrowed: the ids */
    Tensor *q, *k, *v;                /* embeddings (B, Q, D), (B, P, D), (B, P, D) */
    LayerCache attention;             /* the layer's (the clear one's: weights (B*H, Q, P), ...) */
    Tensor *out;                      /* (B, Q, D): the layer's output, the readout's input */
} LookupCache;

/* batch -> logits (B, Q, Vv) (new). When attention_weights is not NULL it
 * receives the per-head weights (B, H, Q, P). When cache is not NULL it is
 * filled for lookup_backward (free it with lookup_cache_free). */
Tensor *lookup_forward(const LookupModel *model, const TaskBatch *batch,
                       Tensor **attention_weights, LookupCache *cache);

/* grad_logits (B, Q, Vv) -> every parameter's gradient added into the
 * model's grad tensors (zero them first: parameters_zero_grad). When
 * grad_concat is not NULL it receives (new) the gradient of the merged
 * heads (B, Q, D), W_o's input, as multihead_backward gives it: a gate on
 * head h has the gradient sum over its d columns of concat * grad_concat. */
void lookup_backward(LookupModel *model, const LookupCache *cache, const Tensor *grad_logits,
                     Tensor **grad_concat);
void lookup_cache_free(LookupCache *cache);

/* One training step on one batch: zero the gradients, forward,
 * cross-entropy against batch->answers, backward, adam_step. Returns the
 * loss before the step; *correct (when not NULL) receives how many answers
 * were right before the step. */
double lookup_train_step(LookupModel *model, Adam *adam, const TaskBatch *batch, int *correct);

/* Mean loss and number of right answers over a batch, without gradients. */
double lookup_evaluate(const LookupModel *model, const TaskBatch *batch, int *correct);

/* The model and its optimiser as the training loop runs them
 * (learn/training.h): lookup_train_step, lookup_evaluate. */
Trainee lookup_trainee(LookupModel *model, Adam *adam);

/* Bytes a run's tensors need at their peak: training on batches of batch
 * examples, then one forward over examples held-out ones, with num_pairs
 * entries and one query word per example. Per example and entry, the
 * forward holds the keys' and values' embeddings, their projections and
 * their split heads: 6 (P, D) blocks; a training step also keeps them for
 * the backward beside their gradients: 12. Per query word come its few
 * D-vectors, its H x P weights and its Vv logits, which outweigh the
 * blocks when D is small. Measured resident peaks of train, against
 * this: P = 16, D = H = 16, Vv = 40: 685 MB for 100000 held-out examples
 * (1.02 GB); P = 16, D = 512, H = 16: 2.93 GB for 20000 held-out examples
 * (4.35 GB; 14.4 GB for 100000, 21.7 GB) and 0.96 GB for a batch of 4096
 * (1.79 GB); P = 2, D = 1, Vv = 40: 28 MB for 100000 held-out examples
 * (45 MB). memory_check adds what the program itself holds. */
double lookup_bytes_needed(int vocab, int num_pairs, int num_hiddens, int num_heads, int batch,
                           int examples);

#endif
