/*
 * induction_model.h - an attention-only transformer of one or more layers
 * that predicts the next token, and its task, sequences that repeat
 * (introduced in chapter 06's page "Induction heads").
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads of a
 * layer (each layer has its own), D = num_hiddens, d = D / H,
 * V = vocabulary, N = num_layers.
 *
 *   tokens (B, T)
 *      | embed_tokens (V, D) + embed_positions (T, D)
 *   x_0 (B, T, D)                               the residual stream
 *      | x_1 = x_0 + attention_0(x_0)          causal self-attention, H_0 heads,
 *      | x_2 = x_1 + attention_1(x_1)          H_1 heads, no biases; no MLP,
 *      |                                        no layer norm
 *      | ...
 *   x_N (B, T, D)
 *      | unembed: x_N W_U^T                     W_U (V, D), no bias
 *   logits (B, T, V)  -> cross-entropy against the next token
 *
 * Query t sees keys 0 .. t (valid_lens_causal), so the logits at t are a
 * prediction of token t + 1 made from tokens 0 .. t only. Each layer adds
 * what it finds to the stream and leaves the rest as it was: layer 1 reads
 * what layer 0 wrote, which is how two heads in two layers compose.
 *
 * As PyTorch (tests/fixtures/make_induction_fixtures.py):
 *     embed_tokens = nn.Embedding(V, D)
 *     embed_positions = nn.Embedding(T, D)
 *     layers = nn.ModuleList(nn.MultiheadAttention(D, H, bias=False, batch_first=True)
 *                            for H in num_heads)  # N layers, a causal attn_mask
 *     unembed = nn.Linear(D, V, bias=False)
 * and described under those parameter names (state_dict.h), listed once by
 * learn/parameter_table.h, each layer under its prefix "layers.l.":
 *     embed_tokens.weight (V, D)      embed_positions.weight (T, D)
 *     layers.0.in_proj_weight (3D, D) layers.0.out_proj.weight (D, D)   ... per layer
 *     unembed.weight (V, D)           num_heads (N,)   num_layers (1,)
 */
#ifndef INDUCTION_MODEL_H
#define INDUCTION_MODEL_H

#include <stdbool.h>

#include "attention_layer.h"
#include "learn/optim.h"
#include "learn/parameter_table.h"
#include "state_dict.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

enum {
    INDUCTION_MAX_LAYERS = 4,
    INDUCTION_MAX_PARAMS = 3 + 4 * INDUCTION_MAX_LAYERS,
    INDUCTION_MAX_FILES = 5 + 2 * INDUCTION_MAX_LAYERS,
};

typedef struct {
    int vocab, length, num_hiddens, num_layers;    /* V, T, D, N */
    int num_heads[INDUCTION_MAX_LAYERS];           /* H of each layer */
    Tensor *embed_tokens;                          /* (V, D) */
    Tensor *embed_positions;                       /* (T, D) */
    MultiHeadAttention *layers[INDUCTION_MAX_LAYERS];   /* D -> D, no biases */
    AttentionLayer attend;                         /* CLEAR_ATTENTION unless a program says */
    const float *layer_offsets[INDUCTION_MAX_LAYERS];   /* NULL, or (T, D) added to layer
                                                           l's output in every sequence:
                                                           mean ablation (a constant, so the
                                                           backward ignores it) */
    Tensor *unembed;                               /* (V, D) */

    Tensor *grad_embed_tokens, *grad_embed_positions, *grad_unembed;
    MultiHeadGrads *grad_layers[INDUCTION_MAX_LAYERS];

    Parameter params[INDUCTION_MAX_PARAMS];
    int num_params;
    ModelFile files[INDUCTION_MAX_FILES];
    int num_files;
    int saved_layers;                              /* num_layers, as saved */
    LayerNames layer_names[INDUCTION_MAX_LAYERS];  /* "layers.0.in_proj_weight", ... */
} InductionModel;

/* Parameters drawn in a fixed order from rng, as PyTorch draws the modules
 * above: both embeddings N(0, 1), each layer's in_proj_weight
 * Xavier-uniform over (3D, D) and its out_proj nn.Linear's default, the
 * unembedding nn.Linear's default. num_heads holds each layer's H, and D
 * must divide by each; 1 <= N <= INDUCTION_MAX_LAYERS. */
InductionModel *induction_new(int vocab, int length, int num_hiddens, const int *num_heads,
                              int num_layers, Rng *rng);
void induction_free(InductionModel *model);   /* NULL is fine */

/* What the forward keeps for the backward. */
typedef struct {
    const int *tokens;                        /* (B, T), borrowed */
    int batch_size;
    ValidLens *causal;                        /* (B, T): query t sees keys 0 .. t */
    Tensor *stream[INDUCTION_MAX_LAYERS + 1]; /* x_0 .. x_N, each (B, T, D) */
    LayerCache layers[INDUCTION_MAX_LAYERS];
} InductionCache;

/* tokens (B, T) -> logits (B, T, V) (new). weights, when not NULL, is an
 * array of N pointers that receive each layer's attention weights
 * (B, H_l, T, T) (the clear layer computes them); cache, when not NULL, is
 * filled for the backward. */
Tensor *induction_forward(const InductionModel *model, const int *tokens, int batch_size,
                          Tensor **weights, InductionCache *cache);
/* grad_logits (B, T, V) -> every parameter's gradient added in. */
void induction_backward(InductionModel *model, const InductionCache *cache,
                        const Tensor *grad_logits);
void induction_cache_free(InductionCache *cache);

/* tokens (B, T + 1): the model reads tokens 0 .. T-1 of each row and is
 * scored on 1 .. T. Zero the gradients, forward, the mean cross-entropy
 * over all B*T predictions, backward, adam_step; returns the loss before
 * the step. losses, when not NULL, receives each prediction's loss (B, T)
 * (as floats, B*T of them). */
double induction_train_step(InductionModel *model, Adam *adam, const int *tokens,
                            int batch_size, float *losses);
/* tokens (B, T + 1) -> each prediction's loss into losses (B*T), no
 * gradient; returns their mean. */
double induction_losses(const InductionModel *model, const int *tokens, int batch_size,
                        float *losses);

/* Head h of layer l silenced, as if its output were zero: its rows of
 * W_v are zeroed (no bias, so the head's values, and its output, are 0).
 * The rows it had are copied into saved (d * D floats), so that
 * induction_restore_head puts them back. */
void induction_ablate_head(InductionModel *model, int layer, int head, float *saved);
void induction_restore_head(InductionModel *model, int layer, int head, const float *saved);

/* ---- the task -------------------------------------------------------------------
 * Sequences that repeat: tokens 0 .. P-1 are P different tokens drawn at
 * random from the V, and every later token repeats the one P places
 * before it, x[t] = x[t - P], to the end of the row. The period P
 * is drawn per sequence, uniformly in [min_period, max_period]: if it were
 * the same in every sequence, a single layer could learn "look P - 1
 * places back" from positions alone, and the task would need no
 * induction. The prediction at t (of token t + 1) is in the first part
 * when t < P (token t + 1 is new, or it is x[P] = x[0], which nothing
 * before announces), in the repeated part when t >= P: token t appeared
 * P places earlier, and what followed it then follows it now. The tokens
 * of a period differ, so a token seen before always means the repeat has
 * begun, and the one that followed it is the only right answer. */

/* tokens (B, T + 1) and periods (B,) drawn from rng, row after row. */
void repeats_draw(int *tokens, int *periods, int batch_size, int length, int vocab,
                  int min_period, int max_period, Rng *rng);

#endif
