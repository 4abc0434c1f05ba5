/*
 * reversal_model.h - a small self-attention model that learns to reverse a
 * sequence, with or without positions (introduced in chapter 06's optional
 * section "Positions, learned").
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, d = D / H, V = vocabulary.
 *
 *   tokens (B, T)                                      word ids (tasks.h)
 *      | embed_tokens                                  (V, D)
 *   x (B, T, D)
 *      | + PE[:T], the sinusoidal positional encoding  only when positions is on
 *   x (B, T, D)
 *      | self-attention: queries = keys = values = x   H heads, no biases
 *   out (B, T, D)
 *      | readout: linear D -> V
 *   logits (B, T, V)  -> cross-entropy against the tokens reversed
 *
 * Without the positional encoding, the model is permutation equivariant
 * (chapter 06): permuting a sequence only permutes the logits. Position t
 * then sees its own token and the set of the others, never which one sits
 * at T-1-t, and no training can change that. With it, token t's query can
 * ask for the key at position T-1-t.
 *
 * As PyTorch (tests/fixtures/make_reversal_fixtures.py):
 *     embed_tokens = nn.Embedding(V, D)
 *     attention = nn.MultiheadAttention(D, H, bias=False, batch_first=True)
 *     readout = nn.Linear(D, V)
 * and described under those parameter names (state_dict.h):
 *     embed_tokens.weight (V, D)          attention.in_proj_weight (3D, D)
 *     attention.out_proj.weight (D, D)    readout.weight (V, D)    readout.bias (V,)
 *     num_heads (1,)
 */
#ifndef REVERSAL_MODEL_H
#define REVERSAL_MODEL_H

#include <stdbool.h>

#include "attention_layer.h"
#include "learn/optim.h"
#include "state_dict.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

enum { REVERSAL_NUM_PARAMS = 7, REVERSAL_NUM_FILES = 6 };

typedef struct {
    int vocab, num_hiddens, num_heads;   /* V, D, H */
    bool positions;                      /* add the positional encoding */
    Tensor *embed_tokens;                /* (V, D) */
    MultiHeadAttention *attention;       /* D -> D, H heads, no biases */
    AttentionLayer attend;               /* how it runs: CLEAR_ATTENTION unless a program says */
    Tensor *readout_weight;              /* (V, D) */
    Tensor *readout_bias;                /* (V,) */

    Tensor *grad_embed_tokens;
    MultiHeadGrads *grad_attention;
    Tensor *grad_readout_weight, *grad_readout_bias;

    Parameter params[REVERSAL_NUM_PARAMS];
    ModelFile files[REVERSAL_NUM_FILES];
    int saved_num_heads;
} ReversalModel;

/* Parameters drawn as PyTorch initialises the modules above: the
 * embedding N(0, 1); in_proj_weight Xavier-uniform over (3D, D);
 * out_proj.weight and the readout nn.Linear's default (uniform, bound
 * 1/sqrt(D)). num_hiddens must divide by num_heads. */
ReversalModel *reversal_new(int vocab, int num_hiddens, int num_heads, bool positions,
                            Rng *rng);
void reversal_free(ReversalModel *model);   /* NULL is fine */

typedef struct {
    const TaskBatch *batch;     /* borrowed: the tokens are batch->keys (B, T) */
    Tensor *x;                  /* (B, T, D): the attention's input */
    LayerCache attention;
    Tensor *out;                /* (B, T, D): readout input */
} ReversalCache;

/* batch (the reversal task: keys = the sequence) -> logits (B, T, V) (new).
 * attention_weights, when not NULL, receives (B, H, T, T); cache, when not
 * NULL, is filled for the backward. */
Tensor *reversal_forward(const ReversalModel *model, const TaskBatch *batch,
                         Tensor **attention_weights, ReversalCache *cache);
/* grad_logits (B, T, V) -> every parameter's gradient added in. */
void reversal_backward(ReversalModel *model, const ReversalCache *cache,
                       const Tensor *grad_logits);
void reversal_cache_free(ReversalCache *cache);

/* Zero the gradients, forward, cross-entropy against batch->answers (the
 * sequence reversed), backward, adam_step; returns the loss before it. */
double reversal_train_step(ReversalModel *model, Adam *adam, const TaskBatch *batch);
/* The mean loss, and how many of the B*T tokens are predicted right. */
double reversal_evaluate(const ReversalModel *model, const TaskBatch *batch,
                         int *tokens_correct);

/* The model and its optimiser as the training loop runs them
 * (learn/training.h): reversal_train_step, reversal_evaluate. */
Trainee reversal_trainee(ReversalModel *model, Adam *adam);

/* Bytes a run holds at its largest, about, for sequences of T tokens: a
 * training step on batch sequences or one forward over examples held-out
 * sequences, whichever is larger, and the parameters with their gradients
 * and Adam's two moments. Per sequence the forward holds ten (T, D) blocks
 * (x, the projections and their split heads, the heads' output merged,
 * out), the (H, T, T) scores and weights and the (T, V) logits; a step
 * keeps them beside their gradients. memory_check (memory.h) adds what the
 * program itself holds. */
double reversal_bytes_needed(int vocab, int length, int num_hiddens, int num_heads, int batch,
                             int examples);

#endif
