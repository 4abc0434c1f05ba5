/*
 * position_model.h - one small self-attention model with five ways of
 * telling it where the tokens are (introduced in chapter 06's page
 * "Positions that keep a symmetry").
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, d = D / H, V = vocabulary, L = max_length.
 *
 *   tokens (B, T)
 *      | embed_tokens (V, D)
 *   x (B, T, D)
 *      | sinusoidal: + PE[S + t]      learned: + embed_positions[S + t]
 *   Q, K, V = x W_q^T, x W_k^T, x W_v^T, split into heads  (B*H, T, d)
 *      | attention per head (position_attention.h): RoPE turns Q and K,
 *      | ALiBi biases the scores; causal or not
 *   out = heads merged, W_o                                (B, T, D)
 *      | readout: linear D -> V
 *   logits (B, T, V)
 *
 * S is the first position (0 unless asked). The learned table has L rows:
 * nn.Embedding(L, D), drawn N(0, 1); a row gets a gradient only when a
 * training sequence reaches its position, so rows past the training
 * length keep their first draw. Without positions (and without the causal
 * mask) the model is permutation equivariant (chapter 06).
 */
#ifndef POSITION_MODEL_H
#define POSITION_MODEL_H

#include <stdbool.h>

#include "learn/optim.h"
#include "multihead.h"
#include "position_attention.h"
#include "random.h"
#include "tensor.h"

typedef enum {
    POSITIONS_NONE,
    POSITIONS_SINUSOIDAL,
    POSITIONS_LEARNED,
    POSITIONS_ROPE,
    POSITIONS_ALIBI,
    POSITION_SCHEMES
} PositionScheme;

/* "none", "sinusoidal", "learned", "RoPE", "ALiBi" */
extern const char *const position_scheme_names[POSITION_SCHEMES];

enum { POSITION_MODEL_MAX_PARAMS = 8 };

typedef struct {
    int vocab, num_hiddens, num_heads, max_length;   /* V, D, H, L */
    PositionScheme scheme;
    bool causal;
    Tensor *embed_tokens;            /* (V, D) */
    Tensor *embed_positions;         /* (L, D), learned positions only, else NULL */
    MultiHeadAttention *attention;   /* W_q, W_k, W_v, W_o (D, D), no biases */
    Tensor *readout_weight;          /* (V, D) */
    Tensor *readout_bias;            /* (V,) */

    Tensor *grad_embed_tokens, *grad_embed_positions;
    MultiHeadGrads *grad_attention;
    Tensor *grad_readout_weight, *grad_readout_bias;
    Parameter params[POSITION_MODEL_MAX_PARAMS];
    int num_params;
} PositionModel;

/* Parameters drawn in a fixed order from rng; D must divide by H, and
 * RoPE needs an even head size. */
PositionModel *position_model_new(int vocab, int num_hiddens, int num_heads,
                                  PositionScheme scheme, int max_length, bool causal, Rng *rng);
void position_model_free(PositionModel *model);   /* NULL is fine */

/* What the forward keeps for the backward. */
typedef struct {
    const int *tokens;                   /* (B, T), borrowed */
    int batch_size, length, first_position;
    Tensor *x;                           /* (B, T, D), positions added */
    Tensor *V;                           /* (B*H, T, d), the attention borrows it */
    PositionAttentionCache attention;    /* rotated Q, K; weights */
    Tensor *concat;                      /* (B, T, D), W_o's input */
    Tensor *out;                         /* (B, T, D), the readout's input */
} PositionModelCache;

/* tokens (B, T) at positions S ... S+T-1 -> logits (B, T, V), new.
 * attention_weights, when not NULL, receives (B, H, T, T); cache, when not
 * NULL, is filled for the backward. */
Tensor *position_model_forward(const PositionModel *model, const int *tokens, int batch_size,
                               int length, int first_position, Tensor **attention_weights,
                               PositionModelCache *cache);
/* grad_logits (B, T, V) -> every parameter's gradient added in. */
void position_model_backward(PositionModel *model, const PositionModelCache *cache,
                             const Tensor *grad_logits);
void position_model_cache_free(PositionModelCache *cache);

/* Answers (B, T) count from position first_scored on (the earlier ones
 * have none). Zero the gradients, forward, the mean cross-entropy over
 * the scored positions, backward, adam_step; returns the loss. */
double position_model_train_step(PositionModel *model, Adam *adam, const int *tokens,
                                 const int *answers, int batch_size, int length,
                                 int first_scored);
/* The share of the scored positions whose largest logit is the answer. */
double position_model_accuracy(const PositionModel *model, const int *tokens,
                               const int *answers, int batch_size, int length,
                               int first_scored);

#endif
