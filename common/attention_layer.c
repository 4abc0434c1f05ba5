/*
 * attention_layer.c - the attention layer a model runs, as a pair of
 * functions (introduced in chapter 05's optional section "Attention that
 * learns"). See attention_layer.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens.
 */
#include "attention_layer.h"

#include <stdlib.h>

#include "kv_cache.h"
#include "ops.h"

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
