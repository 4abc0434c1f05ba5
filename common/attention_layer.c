/*
 * attention_layer.c - the attention layer a model runs, as a pair of
 * functions (introduced in chapter 05's optional section "Attention that
 * learns"), and the full layer with shared key-value heads and the full
 * causal layer that run beside it (05_multihead/decoding.md). See
 * attention_layer.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * G = num_kv_heads (G divides H), D = num_hiddens, d = D / H.
 */
#include "attention_layer.h"

#include <stdlib.h>

#include "heads.h"
#include "ops.h"
#include "valid_lens.h"

/* ---- the full layer with shared key-value heads ------------------------- */

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D); cache: Q (B*H, T, d), K and V
 * (B*H, K, d), attention weights (B*H, T, K), concat (B, T, D) */
Tensor *grouped_forward_cache(const MultiHeadAttention *layer, const Tensor *queries,
                              const Tensor *keys, const Tensor *values,
                              const ValidLens *valid_lens, bool training, Rng *rng,
                              MultiHeadCache *cache)
{
    const int H = layer->num_heads, G = layer->num_kv_heads;
    multihead_cache_inputs("grouped_forward", layer, queries, keys, values, valid_lens,
                           training, rng, cache);

    // pass 1: project; the keys and values into G heads, each repeated H / G times
    Tensor *q_proj = linear(queries, layer->W_q, layer->b_q);   /* (B, T, D) */
    Tensor *k_proj = linear(keys, layer->W_k, layer->b_k);      /* (B, K, G*d) */
    Tensor *v_proj = linear(values, layer->W_v, layer->b_v);    /* (B, K, G*d) */
    cache->Q = transpose_qkv(q_proj, H);                        /* (B*H, T, d) */
    cache->K = split_kv_heads(k_proj, G, H);                    /* (B*H, K, d) */
    cache->V = split_kv_heads(v_proj, G, H);                    /* (B*H, K, d) */
    TENSOR_FREE(q_proj, k_proj, v_proj);

    return multihead_attend(layer, training, rng, cache);      /* chapter 05's passes 2, 3 */
}

/* grad_output (B, T, D) -> grads += dW_*, db_*; grad_queries (B, T, Dq),
 * grad_keys (B, K, Dk), grad_values (B, K, Dv), grad_concat (B, T, D) */
void grouped_backward(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                      const Tensor *grad_output, MultiHeadGrads *grads,
                      Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                      Tensor **grad_concat)
{
    const int H = layer->num_heads, G = layer->num_kv_heads;
    MultiHeadGrads none = {0};   /* grads NULL: only input gradients wanted */
    const MultiHeadGrads *g = grads != NULL ? grads : &none;

    // passes 3 and 2 backwards, as chapter 05's layer
    Tensor *d_Q = NULL, *d_K = NULL, *d_V = NULL;
    multihead_attend_backward(layer, cache, grad_output, grads, grad_concat, &d_Q, &d_K, &d_V);

    // pass 1 backwards: merge the heads' gradients (a key-value head's is
    // the sum over the H / G query heads that read it), then the projections
    Tensor *grad_q = transpose_qkv_backward(d_Q, H);       /* (B, T, D) */
    Tensor *grad_k = split_kv_heads_backward(d_K, G, H);   /* (B, K, G*d) */
    Tensor *grad_v = split_kv_heads_backward(d_V, G, H);   /* (B, K, G*d) */
    tensor_keep_or_free(linear_backward(cache->queries, layer->W_q, grad_q, g->W_q, g->b_q),
                        grad_queries);
    tensor_keep_or_free(linear_backward(cache->keys, layer->W_k, grad_k, g->W_k, g->b_k),
                        grad_keys);
    tensor_keep_or_free(linear_backward(cache->values, layer->W_v, grad_v, g->W_v, g->b_v),
                        grad_values);
    TENSOR_FREE(d_Q, d_K, d_V, grad_q, grad_k, grad_v);
}

/* tokens (B, T, D) -> outputs (B, T, D) */
Tensor *causal_forward(const MultiHeadAttention *layer, const Tensor *tokens)
{
    ValidLens *causal = valid_lens_causal(tokens->shape[0], tokens->shape[1]);
    MultiHeadCache cache;
    Tensor *outputs = grouped_forward_cache(layer, tokens, tokens, tokens, causal, false, NULL,
                                            &cache);
    multihead_cache_free(&cache);
    valid_lens_free(causal);
    return outputs;
}

/* ---- the pair ------------------------------------------------------------- */

Tensor *clear_attention_forward(const MultiHeadAttention *layer, const Tensor *queries,
                                const Tensor *keys, const Tensor *values,
                                const ValidLens *valid_lens, bool training, Rng *rng,
                                int num_threads, LayerCache *cache)
{
    (void)num_threads;   /* the clear layer is one loop after another, on one thread */
    *cache = (LayerCache){0};
    if (layer->num_kv_heads != layer->num_heads)   /* shared key-value heads (kv_cache.h) */
        return grouped_forward_cache(layer, queries, keys, values, valid_lens, training, rng,
                                     &cache->clear);
    return multihead_forward_cache(layer, queries, keys, values, valid_lens, training, rng,
                                   &cache->clear);
}

void clear_attention_backward(const MultiHeadAttention *layer, const LayerCache *cache,
                              const Tensor *grad_output, MultiHeadGrads *grads,
                              Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                              Tensor **grad_concat, int num_threads)
{
    (void)num_threads;
    if (layer->num_kv_heads != layer->num_heads)
        grouped_backward(layer, &cache->clear, grad_output, grads, grad_queries, grad_keys,
                         grad_values, grad_concat);
    else
        multihead_backward(layer, &cache->clear, grad_output, grads, grad_queries, grad_keys,
                           grad_values, grad_concat);
}

Tensor *clear_linear(const Tensor *x, const Tensor *weight, const Tensor *bias,
                     int num_threads)
{
    (void)num_threads;
    return linear(x, weight, bias);
}

Tensor *clear_linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                              Tensor *grad_weight, Tensor *grad_bias, int num_threads)
{
    (void)num_threads;
    return linear_backward(x, weight, grad_y, grad_weight, grad_bias);
}

Tensor *attention_layer_forward(const AttentionLayer *attend, const MultiHeadAttention *layer,
                                const Tensor *queries, const Tensor *keys,
                                const Tensor *values, LayerCache *cache,
                                Tensor **attention_weights)
{
    return attention_layer_forward_masked(attend, layer, queries, keys, values, NULL, cache,
                                          attention_weights);
}

Tensor *attention_layer_forward_masked(const AttentionLayer *attend,
                                       const MultiHeadAttention *layer, const Tensor *queries,
                                       const Tensor *keys, const Tensor *values,
                                       const ValidLens *valid_lens, LayerCache *cache,
                                       Tensor **attention_weights)
{
    LayerCache scratch;
    LayerCache *c = cache != NULL ? cache : &scratch;
    const AttentionForward forward =
        attention_weights != NULL ? clear_attention_forward : attend->forward;
    Tensor *out = forward(layer, queries, keys, values, valid_lens, false, NULL,
                          attend->num_threads, c);
    if (attention_weights != NULL) {
        /* row b*H + h of (B*H, T, K) is head h of sequence b: the same
         * numbers as (B, H, T, K) */
        const int B = queries->shape[0], T = queries->shape[1], K = keys->shape[1];
        *attention_weights = tensor_copy(c->clear.attention.weights);
        tensor_reshape(*attention_weights, SHAPE(B, layer->num_heads, T, K));
    }
    if (cache == NULL)
        layer_cache_free(&scratch);
    return out;
}

void attention_layer_backward(const AttentionLayer *attend, const MultiHeadAttention *layer,
                              const LayerCache *cache, const Tensor *grad_output,
                              MultiHeadGrads *grads, Tensor **grad_queries, Tensor **grad_keys,
                              Tensor **grad_values, Tensor **grad_concat)
{
    attend->backward(layer, cache, grad_output, grads, grad_queries, grad_keys, grad_values,
                     grad_concat, attend->num_threads);
}

Tensor *attention_layer_linear(const AttentionLayer *attend, const Tensor *x,
                               const Tensor *weight, const Tensor *bias)
{
    return attend->linear != NULL ? attend->linear(x, weight, bias, attend->num_threads)
                                  : linear(x, weight, bias);
}

Tensor *attention_layer_linear_backward(const AttentionLayer *attend, const Tensor *x,
                                        const Tensor *weight, const Tensor *grad_y,
                                        Tensor *grad_weight, Tensor *grad_bias)
{
    return attend->linear_backward != NULL
               ? attend->linear_backward(x, weight, grad_y, grad_weight, grad_bias,
                                         attend->num_threads)
               : linear_backward(x, weight, grad_y, grad_weight, grad_bias);
}

void layer_cache_free(LayerCache *cache)
{
    multihead_cache_free(&cache->clear);
    if (cache->other != NULL)
        cache->other_free(cache->other);
    *cache = (LayerCache){0};
}
