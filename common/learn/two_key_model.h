/*
 * two_key_model.h - the model of chapter 05's heads experiment: one query
 * vector names two keys, one multi-head layer reads the entries, and the
 * readout gives both answers (introduced in chapter 05's optional section
 * "Why several heads").
 *
 * Legend: B = batch_size, P = entries of an example (num_keys of the
 * attention), H = num_heads, D = num_hiddens, d = D / H, Vk = key
 * vocabulary, Vv = value vocabulary.
 *
 *   queries (B, 2)        keys (B, P)        values (B, P)      word ids (tasks.h)
 *      | embed_keys          | embed_keys       | embed_values     (Vk, D), (Vv, D)
 *   (B, 2, D), read as      k (B, P, D)        v (B, P, D)
 *   q (B, 1, 2D): the two keys side by side, ONE query vector
 *      \_____________________|__________________/
 *        attention: H heads, query size 2D, no biases       W_q (D, 2D), W_k, W_v, W_o (D, D)
 *                            |
 *                      out (B, 1, D)
 *                            | readout: linear D -> 2 Vv
 *                  logits (B, 2, Vv): the first answer, then the second
 *
 * With one head, each example gets one softmax over its P entries: to
 * fetch two capitals it must share its weight between two entries, and
 * the blend it returns does not say which capital belonged to which key.
 * With H heads of size D / H (the same D, the same number of parameters),
 * each head has a softmax of its own.
 *
 * The layer is d2l's MultiHeadAttention with its older signature, whose
 * query size may differ from num_hiddens, and no biases (d2l's default);
 * nn.MultiheadAttention cannot take a query of another size than its
 * embed_dim, so its state_dict uses d2l's names (state_dict.h):
 *     embed_keys.weight (Vk, D)          embed_values.weight (Vv, D)
 *     attention.W_q.weight (D, 2D)       attention.W_k.weight (D, D)
 *     attention.W_v.weight (D, D)        attention.W_o.weight (D, D)
 *     readout.weight (2 Vv, D)           readout.bias (2 Vv,)
 *     num_heads (1,)                     the one size no shape says
 */
#ifndef TWO_KEY_MODEL_H
#define TWO_KEY_MODEL_H

#include "attention_layer.h"
#include "learn/optim.h"
#include "state_dict.h"
#include "learn/tasks.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

/* 8 parameters without the MLP, 12 with it; the files add num_heads */
enum { TWO_KEY_NUM_PARAMS = 8, TWO_KEY_MAX_PARAMS = 12, TWO_KEY_MAX_FILES = 13 };

typedef struct {
    int key_vocab, value_vocab;       /* Vk, Vv */
    int num_hiddens, num_heads;       /* D, H */
    Tensor *embed_keys;               /* (Vk, D) */
    Tensor *embed_values;             /* (Vv, D) */
    MultiHeadAttention *attention;    /* query 2D, keys and values D -> D, no biases */
    AttentionLayer attend;            /* how it runs: CLEAR_ATTENTION unless a program says */
    int mlp_hiddens;                  /* N: 0, no MLP; else out + W2 relu(W1 out + b1) + b2 */
    Tensor *mlp_weight1, *mlp_bias1;  /* (N, D), (N,): mlp.0 */
    Tensor *mlp_weight2, *mlp_bias2;  /* (D, N), (D,): mlp.2 */
    Tensor *readout_weight;           /* (2 Vv, D) */
    Tensor *readout_bias;             /* (2 Vv,) */

    /* gradients, same shapes, added into by two_key_backward */
    Tensor *grad_embed_keys, *grad_embed_values;
    MultiHeadGrads *grad_attention;
    Tensor *grad_mlp_weight1, *grad_mlp_bias1, *grad_mlp_weight2, *grad_mlp_bias2;
    Tensor *grad_readout_weight, *grad_readout_bias;

    int num_params, num_files;
    Parameter params[TWO_KEY_MAX_PARAMS];   /* for the optimiser, PyTorch's names */
    ModelFile files[TWO_KEY_MAX_FILES];     /* its state_dict, for the file code */
    int saved_num_heads;                    /* what the num_heads file holds */
} TwoKeyModel;

/* Parameters drawn as d2l's modules initialise them: embeddings N(0, 1)
 * (nn.Embedding), every linear layer nn.Linear's default (uniform, bound
 * 1/sqrt(fan_in)). num_hiddens must divide by num_heads. */
TwoKeyModel *two_key_new(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                         Rng *rng);
/* The same with a residual MLP of mlp_hiddens ReLU units between the
 * attention and the readout, as a Transformer block has one after its
 * attention (0: none, two_key_new's model; drawn after the rest, so a seed
 * gives both models the same other parameters):
 *     out (B, 1, D) -> out + W2 relu(W1 out + b1) + b2 -> readout
 * saved as mlp.0.weight (N, D), mlp.0.bias (N,), mlp.2.weight (D, N),
 * mlp.2.bias (D,), the names of nn.Sequential(Linear, ReLU, Linear). */
TwoKeyModel *two_key_new_mlp(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                             int mlp_hiddens, Rng *rng);

/* One head set by hand to show what one softmax row can do on this task
 * with the linear readout: equal weight on the two entries the query
 * names, the blend of their capitals read out as both answers, and the tie
 * between the two broken by a fixed order of capitals (the one earlier in
 * the vocabulary first). Right about half the time: when the query's order
 * is that order. Needs num_heads 1, no MLP and num_hiddens at least both
 * vocabularies; every parameter is overwritten. */
void two_key_set_by_hand(TwoKeyModel *model);
void two_key_free(TwoKeyModel *model);   /* NULL is fine */

/* What the forward keeps for the backward. */
typedef struct {
    const TaskBatch *batch;           /* borrowed: the ids */
    Tensor *q, *k, *v;                /* embeddings (B, 1, 2D), (B, P, D), (B, P, D) */
    LayerCache attention;
    Tensor *out;                      /* (B, 1, D): attention output */
    Tensor *hidden;                   /* (B, 1, N): the MLP's ReLU units (NULL: no MLP) */
    Tensor *block_out;                /* (B, 1, D): the readout's input */
} TwoKeyCache;

/* batch (Q = 2 query words) -> logits (B, 2, Vv) (new). gates (H,) or NULL
 * (all 1) multiply each head's output (head_gates.h): 0 masks a head.
 * attention_weights, when not NULL, receives the per-head weights
 * (B, H, 1, P). cache, when not NULL, is filled for the backward; it needs
 * gates NULL, the model as it trains. */
Tensor *two_key_forward(const TwoKeyModel *model, const TaskBatch *batch, const float *gates,
                        Tensor **attention_weights, TwoKeyCache *cache);

/* grad_logits (B, 2, Vv) -> every parameter's gradient added into the
 * model's grad tensors (zero them first). grad_concat, when not NULL,
 * receives (B, 1, D), the gradient of the heads side by side before W_o
 * (head_gate_grads turns it into gate gradients). */
void two_key_backward(TwoKeyModel *model, const TwoKeyCache *cache, const Tensor *grad_logits,
                      Tensor **grad_concat);
void two_key_cache_free(TwoKeyCache *cache);

/* One training step: zero the gradients, forward, cross-entropy against
 * the two answers, backward, adam_step. Returns the loss before the step. */
double two_key_train_step(TwoKeyModel *model, Adam *adam, const TaskBatch *batch);

/* What training a model from a seed takes: its sizes, and Adam's. */
typedef struct {
    int key_vocab, value_vocab, num_hiddens, num_heads;   /* Vk, Vv, D, H */
    int mlp_hiddens;                                      /* N, 0: no MLP */
    int steps, batch_size;
    float lr;
} TwoKeyTraining;

/* The model of seed: its parameters drawn from seed's RNG_PARAMETERS
 * stream, then how->steps Adam steps on batches of task's training split
 * drawn from seed's RNG_BATCHES stream (the same batches whatever the
 * sizes). NULL, with *bad_step the step, when the loss stops being a
 * number. */
TwoKeyModel *two_key_train(const Task *task, const TwoKeyTraining *how, uint64_t seed,
                           int *bad_step);
/* The models of seeds S to S + n - 1, each from two_key_train, trained
 * num_threads at a time (seeds.h): the numbers do not depend on the
 * threads. models (n,) and bad_steps (n,) receive each seed's model and 0,
 * or NULL and the step whose loss was not a number. */
void two_key_train_seeds(const Task *task, const TwoKeyTraining *how, uint64_t first_seed,
                         int num_seeds, int num_threads, TwoKeyModel **models, int *bad_steps);

/* How many examples of a batch have each answer right, and both. */
typedef struct {
    int first, second;   /* the first capital right; the second */
    int pairs;           /* both right: the task's accuracy counts these */
} TwoKeyCorrect;

/* With the heads gated by gates (NULL: all 1): the mean loss, and the
 * counts of right answers when correct is not NULL. */
double two_key_evaluate(const TwoKeyModel *model, const TaskBatch *batch, const float *gates,
                        TwoKeyCorrect *correct);

/* The same in two halves, for many gate settings on one batch: the heads'
 * outputs do not depend on the gates, so two_key_heads computes them once,
 * concat (B, 1, D) (new), and two_key_evaluate_heads runs only what comes
 * after them, W_o with the gates and the readout. */
Tensor *two_key_heads(const TwoKeyModel *model, const TaskBatch *batch);
double two_key_evaluate_heads(const TwoKeyModel *model, const TaskBatch *batch,
                              const Tensor *concat, const float *gates, TwoKeyCorrect *correct);

/* Michel, Levy and Neubig's importance of every head on a batch:
 * importance[h] = mean over the B examples of |dL_b / dxi_h| at xi = 1,
 * L_b being example b's own loss (the mean of its two cross-entropies).
 * One forward and one backward for the whole batch; the model's gradients
 * are left zero. */
void two_key_head_importance(TwoKeyModel *model, const TaskBatch *batch, double *importance);
/* The same slope for one head by a central difference of the batch's mean
 * loss, the gate at 1 + eps and 1 - eps (float) and the others at 1: what
 * checks the dot product of two_key_head_importance. */
double two_key_gate_slope(const TwoKeyModel *model, const TaskBatch *batch, int head, float eps);

/* Bytes one model's run holds at its largest, about: a training step on
 * batch examples or one forward over examples held-out ones, whichever is
 * larger, and the parameters with their gradients and Adam's two moments.
 * Per example the forward holds six (P, D) blocks (the keys' and values'
 * embeddings, projections and split heads), a few D-vectors, the (H, P)
 * scores and weights, the MLP's N units and the 2 Vv logits; a step keeps
 * them beside their gradients. memory_check (error.h) adds what the
 * program itself holds. */
double two_key_bytes_needed(int key_vocab, int value_vocab, int num_pairs, int num_hiddens,
                            int num_heads, int mlp_hiddens, int batch, int examples);

#endif
