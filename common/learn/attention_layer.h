/*
 * attention_layer.h - the attention layer a model runs, as a pair of
 * functions (introduced in chapter 05's optional section "Attention that
 * learns").
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, D = num_hiddens,
 * Dq, Dk, Dv = the layer's input sizes.
 *
 * A model (lookup_model.h, two_key_model.h, reversal_model.h) does not
 * compute attention itself: it calls the forward of the pair it holds,
 * which keeps what the backward needs in a MultiHeadCache, and later that
 * pair's backward. The models start with the clear layer of multihead.h,
 * CLEAR_ATTENTION; a chapter program may hand them another pair with the
 * same signatures, and the models stay as they are.
 */
#ifndef ATTENTION_LAYER_H
#define ATTENTION_LAYER_H

#include "multihead.h"

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv) -> output (B, T, D),
 * cache filled: multihead_forward_cache's signature */
typedef Tensor *(*AttentionForward)(const MultiHeadAttention *layer, const Tensor *queries,
                                    const Tensor *keys, const Tensor *values,
                                    const ValidLens *valid_lens, bool training, Rng *rng,
                                    MultiHeadCache *cache);
/* grad_output (B, T, D) -> parameter gradients added, input gradients and
 * grad_concat returned: multihead_backward's signature */
typedef void (*AttentionBackward)(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                                  const Tensor *grad_output, MultiHeadGrads *grads,
                                  Tensor **grad_queries, Tensor **grad_keys,
                                  Tensor **grad_values, Tensor **grad_concat);

typedef struct {
    AttentionForward forward;
    AttentionBackward backward;
} AttentionLayer;

/* the clear layer of chapter 05 */
#define CLEAR_ATTENTION ((AttentionLayer){multihead_forward_cache, multihead_backward})

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv) -> output (B, T, D)
 * through attend's forward in evaluation mode, no mask. cache, when not
 * NULL, is filled for attend's backward; attention_weights, when not NULL,
 * receives the per-head weights (B, H, T, K) (new). */
Tensor *attention_layer_forward(const AttentionLayer *attend, const MultiHeadAttention *layer,
                                const Tensor *queries, const Tensor *keys,
                                const Tensor *values, MultiHeadCache *cache,
                                Tensor **attention_weights);

#endif
