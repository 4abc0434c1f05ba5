/*
 * language_model.h - a character-level GPT: the chapters' multi-head
 * layer, causal, in transformer blocks with layer norms and MLPs, trained
 * to predict the next character of a text (introduced in chapter 06's
 * page "A language model").
 *
 * Legend: B = batch_size, T = tokens of a sequence (at most the context),
 * C = context, V = vocabulary, D = num_hiddens, H = num_heads, d = D / H,
 * F = 4 D, N = num_layers.
 *
 *   tokens (B, T)
 *      | wte (V, D) + wpe (C, D), rows 0 .. T-1     token and position embeddings
 *   x (B, T, D)                                     the residual stream
 *      | N blocks, each:
 *      |   x = x + attention(ln_1(x))               causal: query t sees keys 0 .. t
 *      |   x = x + mlp(ln_2(x))                     D -> F, GELU, F -> D (mlp.h)
 *      | ln_f(x) wte^T                              the unembedding, tied to wte
 *   logits (B, T, V)  -> cross-entropy against the next token
 *
 * Every block writes into the stream through a layer norm that reads it
 * and a residual that adds to it: nanoGPT's shape (GPT-2's, with the
 * layer norm before each half). Tying the unembedding to the embedding
 * makes a character's input vector and its output score one row.
 *
 * As PyTorch (tests/fixtures/make_language_model_fixtures.py), and saved
 * under those names (state_dict.h):
 *     wte.weight (V, D)                       wpe.weight (C, D)
 *     blocks.l.ln_1.weight, .bias (D,)        nn.LayerNorm(D)
 *     blocks.l.attn.in_proj_weight (3D, D)    nn.MultiheadAttention(D, H, batch_first=True)
 *     blocks.l.attn.in_proj_bias (3D,)        blocks.l.attn.out_proj.weight, .bias
 *     blocks.l.ln_2.weight, .bias (D,)
 *     blocks.l.mlp.fc.weight (F, D), .bias    blocks.l.mlp.proj.weight (D, F), .bias
 *     ln_f.weight, .bias (D,)
 *     vocab (V,): the byte each token stands for   num_heads (1,)   num_layers (1,)
 */
#ifndef LANGUAGE_MODEL_H
#define LANGUAGE_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "attention_layer.h"
#include "kv_cache.h"
#include "learn/adamw.h"
#include "learn/gpt_block.h"
#include "learn/mlp.h"
#include "learn/optim.h"
#include "learn/parameter_table.h"
#include "learn/sampling.h"
#include "multihead.h"
#include "random.h"
#include "state_dict.h"
#include "tensor.h"

enum {
    LM_MAX_LAYERS = 8,
    LM_MAX_HEADS = 64,                            /* of a block, as --heads or a saved model */
    LM_MAX_VOCAB = 256,                           /* a token is a byte */
    LM_BLOCK_PARAMS = 16,                         /* 8 of attention, 8 around it */
    LM_MAX_PARAMS = 4 + LM_BLOCK_PARAMS * LM_MAX_LAYERS,
    LM_MAX_FILES = 7 + 12 * LM_MAX_LAYERS,
    LM_NAME_LEN = 40,
    LM_SHARES = 2,                                /* of a training step's batch */
};

/* What a model leaves out: the rungs of the build-up (chapter 06's page
 * "Building the GPT"). All false, {0}: the model of the page, the one
 * language_model_new draws, and the only one saved or decoded.
 *   bigram  logits = wte[token], wte (V, V): a table of next-character
 *           scores and nothing else (no wpe, no block, no ln_f; D = V, N = 0)
 *   block   what every block leaves out (gpt_block.h's BlockParts); without
 *           layer norm, ln_f goes too and the unembedding reads the stream */
typedef struct {
    bool bigram;
    BlockParts block;
} LanguageParts;

typedef struct LanguageModel {
    int vocab, context, num_hiddens, num_heads, num_layers;   /* V, C, D, H, N */
    LanguageParts parts;
    int bytes[LM_MAX_VOCAB];                /* the byte token i stands for, increasing */
    Tensor *wte, *wpe;                      /* (V, D), (C, D); no wpe for the bigram */
    Block blocks[LM_MAX_LAYERS];
    Tensor *lnf_weight, *lnf_bias;          /* (D,) */
    LanguageKernels kernels;

    Tensor *grad_wte, *grad_wpe, *grad_lnf_weight, *grad_lnf_bias;
    BlockGrads grads[LM_MAX_LAYERS];

    Parameter params[LM_MAX_PARAMS];
    int num_params;
    ModelFile files[LM_MAX_FILES];
    int num_files;
    int saved_heads, saved_layers;          /* num_heads, num_layers, as saved */
    char names[LM_MAX_PARAMS][LM_NAME_LEN];
    LayerNames layer_names[LM_MAX_LAYERS];
    /* a training step's shares of the batch (language_model_train_step):
     * each a model that borrows these parameters and has gradients of its
     * own; made by the first step, NULL before */
    struct LanguageModel *shares[LM_SHARES];
    /* memory for the kernels' step, made by its first call and freed with
     * the model by step_memory_free, NULL before: a share's for
     * kernels.share_step, the whole model's for kernels.prepare */
    void *step_memory;
    void (*step_memory_free)(void *memory);
    /* in a share, during a step: what kernels.prepare made for it (in the
     * whole model's memory); NULL otherwise */
    const void *prepared;
} LanguageModel;

/* ---- the vocabulary: a token is a byte ----------------------------------------- */
/* text (n,) -> bytes (V,), the distinct bytes in increasing order;
 * returns V. */
int text_vocabulary(const unsigned char *text, size_t n, int *bytes);
/* text (n,) -> ids (n,), each byte's token in bytes (V,); returns the
 * offset of the first byte that is not in the vocabulary, n when every
 * one is (ids is then whole). */
size_t text_encode(const unsigned char *text, size_t n, const int *bytes, int vocab, int *ids);

/* A model over the vocabulary bytes[0 .. V-1] (distinct, increasing),
 * drawn from rng as nanoGPT draws its own: every weight and embedding
 * N(0, 0.02), the two projections into the stream (attn.out_proj and
 * mlp.proj) N(0, 0.02 / sqrt(2 N)) so that the stream's variance does not
 * grow with depth, biases 0, layer norms' weights 1. H must split D (a
 * program checks its user's sizes with heads_split first); 1 <= N <=
 * LM_MAX_LAYERS. */
LanguageModel *language_model_new(const int *bytes, int vocab, int context, int num_hiddens,
                                  int num_heads, int num_layers, Rng *rng);
/* The same with parts left out (LanguageParts): drawn in the same order,
 * what is left out neither drawn nor kept (its tensors and gradients
 * NULL, and not in the parameter list); {0} is language_model_new. The
 * bigram needs D = V and N = 0. */
LanguageModel *language_model_new_parts(const int *bytes, int vocab, int context,
                                        int num_hiddens, int num_heads, int num_layers,
                                        LanguageParts parts, Rng *rng);
void language_model_free(LanguageModel *model);   /* NULL is fine */
/* The trainable numbers, the tied unembedding counted once. */
size_t language_model_size(const LanguageModel *model);

typedef struct {
    const int *tokens;                /* (B, T), borrowed */
    int batch_size, length;           /* B, T */
    ValidLens *causal;
    BlockCache blocks[LM_MAX_LAYERS];
    Tensor *x_out;                    /* (B, T, D) the stream after the last block */
    Tensor *hf, *meanf, *rstdf;       /* ln_f(x_out) */
} LanguageCache;

/* tokens (B, T), T <= C -> logits (B, T, V) (new). weights, when not NULL,
 * is an array of N pointers that receive each block's attention weights
 * (B, H, T, T) (the clear layer computes them); cache, when not NULL, is
 * filled for the backward. */
Tensor *language_model_forward(const LanguageModel *model, const int *tokens, int batch_size,
                               int length, Tensor **weights, LanguageCache *cache);
/* grad_logits (B, T, V) -> every parameter's gradient added in. */
void language_model_backward(LanguageModel *model, const LanguageCache *cache,
                             const Tensor *grad_logits);
void language_cache_free(LanguageCache *cache);

/* tokens (B, T + 1): inputs 0 .. T-1 of each row, targets 1 .. T -> the
 * mean cross-entropy over the B*T predictions, no gradient. Computed in
 * the shares of a training step (language_model_train_step), each on a
 * thread of its own or in turn: the same bits on one thread and two. */
double language_model_loss(const LanguageModel *model, const int *tokens, int batch_size,
                           int length);
/* The same with every gradient (zeroed first, then filled). */
double language_model_loss_grad(LanguageModel *model, const int *tokens, int batch_size,
                                int length);

/* ---- training ---------------------------------------------------------------------
 * nanoGPT's documented CPU run on Shakespeare, the one place its numbers
 * are written: language_model's defaults, its bench and the PyTorch
 * model it is timed against (tests/fixtures/make_language_model_fixtures.py). */
typedef struct {
    int num_layers, num_heads, num_hiddens, context;   /* N, H, D, C */
    int batch_size, steps, warmup;
    double lr, min_lr, weight_decay, clip;             /* AdamW betas (0.9, 0.99) */
} LanguageTraining;

#define LANGUAGE_TRAINING                                                                 \
    ((LanguageTraining){.num_layers = 4, .num_heads = 4, .num_hiddens = 128, .context = 64, \
                        .batch_size = 12, .steps = 2000, .warmup = 100, .lr = 1e-3,       \
                        .min_lr = 1e-4, .weight_decay = 0.1, .clip = 1.0})

/* AdamW over the model's parameters as t trains them: lr t->lr (a step
 * sets its own from the schedule), betas (0.9, 0.99), weight decay on
 * matrices. */
Adam *language_adamw_new(const LanguageModel *model, const LanguageTraining *t);

/* tokens (B, C + 1): B windows of ids[0 .. n) at random offsets, n > C. */
void text_batch_draw(const int *ids, size_t n, int batch_size, int context, Rng *rng,
                     int *tokens);

/* One training step on tokens (B, C + 1): the gradients, clipped to a
 * global norm of max_norm, then AdamW at adam's learning rate. Returns
 * the loss before the update.
 *
 * The batch is cut in LM_SHARES shares of windows (B / 2 each when B is
 * even), and each share's forward and backward runs on a model of its own
 * (model->shares) that reads these parameters and writes gradients of its
 * own: on a thread of its own when the kernels have two or more threads,
 * each share's kernels then on one, or in turn. The gradient is then the
 * shares' gradients weighted by their windows, B_s / B, summed in share
 * order. The shares and the order are the same whatever the thread count,
 * so one thread and two give the same bits; against one forward over the
 * whole batch (language_model_loss_grad) the gradient differs only by the
 * order of the sums over the windows. */
double language_model_train_step(LanguageModel *model, Adam *adam, const int *tokens,
                                 int batch_size, double max_norm);

/* The mean loss over batches batches of batch_size windows of ids[0 .. n)
 * at random offsets drawn from rng (text_batch_draw): an estimate, as
 * nanoGPT's estimate_loss makes it. */
double language_model_sampled_loss(const LanguageModel *model, const int *ids, size_t n,
                                   int batch_size, int batches, Rng *rng);

/* The mean loss over every character of ids[1 .. n-1], each predicted
 * from the ones before it in its window: windows of C + 1 ids that overlap
 * by one, batch_size windows per forward (a last shorter window too). */
double language_model_text_loss(const LanguageModel *model, const int *ids, size_t n,
                                int batch_size);

/* Head h of block l silenced (zero ablation): its rows of W_v and b_v
 * set to 0, so its values, and its output, are 0; the rows it had copied
 * into saved ((D + 1) * d floats) for language_model_restore_head. */
void language_model_ablate_head(LanguageModel *model, int layer, int head, float *saved);
void language_model_restore_head(LanguageModel *model, int layer, int head,
                                 const float *saved);

/* ---- decoding with a key-value cache (05_multihead/decoding.md) -------------
 * One character at a time: each block's keys and values of the tokens so
 * far stay in a KVCache, so a new token costs one row of every product
 * instead of the whole sequence again. Runs the clear path (ops.h's
 * linear, kv_cache.h's decode_step), whose every logit equals the clear
 * full forward's for the same window, bit for bit. */
typedef struct {
    const LanguageModel *model;      /* borrowed */
    KVCache *caches[LM_MAX_LAYERS];  /* (1, H, C, d) each */
    int length;                      /* tokens in the window */
    float *logits;                   /* (V,) the last token's */
} LanguageDecoder;

LanguageDecoder *language_decoder_new(const LanguageModel *model);
void language_decoder_free(LanguageDecoder *decoder);   /* NULL is fine */
/* Appends token at the next position; returns the logits (V,) of the
 * character after it (the decoder's own memory, valid until the next
 * call). The window must have room (length < C): language_model_sample
 * starts a full window again from its last C / 2 tokens. */
const float *language_decoder_step(LanguageDecoder *decoder, int token);
void language_decoder_reset(LanguageDecoder *decoder);

/* prompt (P,) tokens, P >= 1 -> out (n,) tokens that continue it. When the
 * window fills (C tokens), it starts again from its last C / 2 tokens
 * (with positions 0 .. C/2 - 1), so every character sees between C / 2
 * and C before it. */
void language_model_sample(const LanguageModel *model, const int *prompt, int prompt_length,
                           int *out, int n, float temperature, Rng *rng);

#endif
