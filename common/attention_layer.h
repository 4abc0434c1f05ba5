/*
 * attention_layer.h - the attention layer a model runs, as a pair of
 * functions (introduced in chapter 05's optional section "Attention that
 * learns"), and the full layers it runs for shared key-value heads, with
 * the full causal layer a decoding cache must equal
 * (05_multihead/decoding.md).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, H = num_heads,
 * G = num_kv_heads (G divides H), D = num_hiddens, d = D / H,
 * Dq, Dk, Dv = the layer's input sizes.
 *
 * A model (lookup_model.h, two_key_model.h, reversal_model.h,
 * induction_model.h) does not
 * compute attention itself: it calls the forward of the pair it holds,
 * which keeps what the backward needs in a LayerCache, and later that
 * pair's backward. The models start with the clear layer of multihead.h,
 * CLEAR_ATTENTION, on one thread; a chapter program may hand them another
 * pair with the same signatures (the fast layer of
 * fast/fast_attention_layer.h, on num_threads threads), and the models
 * stay as they are.
 */
#ifndef ATTENTION_LAYER_H
#define ATTENTION_LAYER_H

#include "multihead.h"

/* What a layer's forward keeps for its backward. The clear layer keeps
 * multihead.h's MultiHeadCache; another layer keeps a cache of its own
 * type, which this header does not know, behind `other`, with the
 * function that frees it. */
typedef struct {
    MultiHeadCache clear;                /* the clear layer's: weights, concat, ... */
    void *other;                         /* another layer's own cache, or NULL */
    void (*other_free)(void *other);     /* frees other and what it holds */
} LayerCache;

/* queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv) -> output (B, T, D),
 * cache filled: multihead_forward_cache's arguments, and the threads the
 * layer may use */
typedef Tensor *(*AttentionForward)(const MultiHeadAttention *layer, const Tensor *queries,
                                    const Tensor *keys, const Tensor *values,
                                    const ValidLens *valid_lens, bool training, Rng *rng,
                                    int num_threads, LayerCache *cache);
/* grad_output (B, T, D) -> parameter gradients added, input gradients and
 * grad_concat returned: multihead_backward's arguments, and the threads */
typedef void (*AttentionBackward)(const MultiHeadAttention *layer, const LayerCache *cache,
                                  const Tensor *grad_output, MultiHeadGrads *grads,
                                  Tensor **grad_queries, Tensor **grad_keys,
                                  Tensor **grad_values, Tensor **grad_concat, int num_threads);

/* x (..., in) -> x W^T + b (..., out), and its backward: ops.h's linear
 * and linear_backward, on num_threads threads */
typedef Tensor *(*LinearForward)(const Tensor *x, const Tensor *weight, const Tensor *bias,
                                 int num_threads);
typedef Tensor *(*LinearBackward)(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                                  Tensor *grad_weight, Tensor *grad_bias, int num_threads);

typedef struct {
    AttentionForward forward;
    AttentionBackward backward;
    int num_threads;   /* >= 1; the clear layer runs on one whatever it says */
    /* the linear layers the model runs around attention (a readout), on
     * the same threads; NULL: ops.h's clear ones */
    LinearForward linear;
    LinearBackward linear_backward;
} AttentionLayer;

/* ---- shared key-value heads (05_multihead/decoding.md) ----------------------
 * G key-value heads serve H query heads (grouped-query attention). The
 * clear pair below runs a layer with G < H through these; decoding's cache
 * (kv_cache.h) must agree with causal_forward. */
/* multihead_forward_cache and multihead_backward for a layer of any G:
 * the same arguments, shapes and cache, K and V (B*H, n_k, d) holding each
 * key-value head repeated H / G times; the gradients of W_k, W_v (G*d, .),
 * b_k and b_v (G*d,) sum those of the query heads that read them. */
Tensor *grouped_forward_cache(const MultiHeadAttention *layer, const Tensor *queries,
                              const Tensor *keys, const Tensor *values,
                              const ValidLens *valid_lens, bool training, Rng *rng,
                              MultiHeadCache *cache);
void grouped_backward(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                      const Tensor *grad_output, MultiHeadGrads *grads,
                      Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                      Tensor **grad_concat);

/* tokens (B, T, D) -> outputs (B, T, D): the same by the full layer with
 * the causal mask, every token at once: grouped_forward_cache(tokens,
 * tokens, tokens, valid_lens_causal(B, T)), its cache dropped. */
Tensor *causal_forward(const MultiHeadAttention *layer, const Tensor *tokens);

/* the clear layer of chapter 05: multihead_forward_cache and
 * multihead_backward; for a layer with shared key-value heads (G < H),
 * grouped_forward_cache and grouped_backward above */
Tensor *clear_attention_forward(const MultiHeadAttention *layer, const Tensor *queries,
                                const Tensor *keys, const Tensor *values,
                                const ValidLens *valid_lens, bool training, Rng *rng,
                                int num_threads, LayerCache *cache);
void clear_attention_backward(const MultiHeadAttention *layer, const LayerCache *cache,
                              const Tensor *grad_output, MultiHeadGrads *grads,
                              Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                              Tensor **grad_concat, int num_threads);
#define CLEAR_ATTENTION \
    ((AttentionLayer){clear_attention_forward, clear_attention_backward, 1, NULL, NULL})
/* ops.h's linear and linear_backward with the signatures of a pair,
 * num_threads unused: the clear linear layers of a model's kernels table */
Tensor *clear_linear(const Tensor *x, const Tensor *weight, const Tensor *bias,
                     int num_threads);
Tensor *clear_linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                              Tensor *grad_weight, Tensor *grad_bias, int num_threads);

/* queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv) -> output (B, T, D)
 * through attend's forward in evaluation mode, no mask. cache, when not
 * NULL, is filled for attend's backward; attention_weights, when not NULL,
 * receives the per-head weights (B, H, T, n_k) (new): only the clear layer
 * keeps them, so that call runs the clear layer, whatever attend is. */
Tensor *attention_layer_forward(const AttentionLayer *attend, const MultiHeadAttention *layer,
                                const Tensor *queries, const Tensor *keys,
                                const Tensor *values, LayerCache *cache,
                                Tensor **attention_weights);
/* The same with a mask: valid_lens NULL, (B,) or (B, T), as
 * multihead_forward takes it (valid_lens_causal for a model that predicts
 * the next token). attention_layer_forward is this call with NULL. */
Tensor *attention_layer_forward_masked(const AttentionLayer *attend,
                                       const MultiHeadAttention *layer, const Tensor *queries,
                                       const Tensor *keys, const Tensor *values,
                                       const ValidLens *valid_lens, LayerCache *cache,
                                       Tensor **attention_weights);
/* grad_output (B, T, D) -> attend's backward on its own threads, as
 * AttentionBackward says. */
void attention_layer_backward(const AttentionLayer *attend, const MultiHeadAttention *layer,
                              const LayerCache *cache, const Tensor *grad_output,
                              MultiHeadGrads *grads, Tensor **grad_queries, Tensor **grad_keys,
                              Tensor **grad_values, Tensor **grad_concat);
/* x (..., in) -> x W^T + b through attend's linear (ops.h's linear when it
 * has none), and the backward, as linear_backward says */
Tensor *attention_layer_linear(const AttentionLayer *attend, const Tensor *x,
                               const Tensor *weight, const Tensor *bias);
Tensor *attention_layer_linear_backward(const AttentionLayer *attend, const Tensor *x,
                                        const Tensor *weight, const Tensor *grad_y,
                                        Tensor *grad_weight, Tensor *grad_bias);
/* Frees what either kind of layer kept; the struct is the caller's. */
void layer_cache_free(LayerCache *cache);

#endif
