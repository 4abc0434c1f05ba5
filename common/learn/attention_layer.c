/*
 * attention_layer.c - the attention layer a model runs, as a pair of
 * functions (introduced in chapter 05's optional section "Attention that
 * learns"). See attention_layer.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens.
 */
#include "learn/attention_layer.h"

Tensor *attention_layer_forward(const AttentionLayer *attend, const MultiHeadAttention *layer,
                                const Tensor *queries, const Tensor *keys,
                                const Tensor *values, MultiHeadCache *cache,
                                Tensor **attention_weights)
{
    MultiHeadCache scratch;
    MultiHeadCache *c = cache != NULL ? cache : &scratch;
    Tensor *out = attend->forward(layer, queries, keys, values, NULL, false, NULL, c);
    if (attention_weights != NULL) {
        /* row b*H + h of (B*H, T, K) is head h of sequence b: the same
         * numbers as (B, H, T, K) */
        const int B = queries->shape[0], T = queries->shape[1], K = keys->shape[1];
        *attention_weights = tensor_copy(c->attention.weights);
        tensor_reshape(*attention_weights, SHAPE(B, layer->num_heads, T, K));
    }
    if (cache == NULL)
        multihead_cache_free(&scratch);
    return out;
}
