/* Bug: the token attends before its key and value join the cache: it does
 * not see itself (the causal mask's diagonal is missing). The first token,
 * with nothing cached, attends to no key at all. */
#include "exercises.h"
#include "ops.h"
#include "softmax.h"

#include <math.h>
#include <stdlib.h>

Tensor *my_decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token)
{
    const int H = layer->num_heads, G = layer->num_kv_heads, D = layer->num_hiddens;
    const int d = D / H, B = cache->batch_size;
    // pass 1: the new token's projections; its key and value join the cache
    Tensor *q = linear(token, layer->W_q, layer->b_q);   /* (B, D) */
    Tensor *k = linear(token, layer->W_k, layer->b_k);   /* (B, G*d) */
    Tensor *v = linear(token, layer->W_v, layer->b_v);   /* (B, G*d) */
    const int T = cache->length;
    Tensor *concat = tensor_zeros(SHAPE(B, D));
    float *scores = malloc((size_t)(T + 1) * sizeof *scores);
    if (scores == NULL)
        abort();
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int g = h / (H / G);
            const float *q_row = q->data + (size_t)b * D + (size_t)h * d;
            float *head_out = concat->data + (size_t)b * D + (size_t)h * d;
            for (int t = 0; t < T; t++) {
                const float *k_row = kv_cache_key(cache, b, g, t);
                float dot = 0.0f;
                for (int i = 0; i < d; i++)
                    dot += q_row[i] * k_row[i];
                scores[t] = dot / sqrtf((float)d);
            }
            softmax_row(scores, T);
            for (int t = 0; t < T; t++) {
                const float *v_row = kv_cache_value(cache, b, g, t);
                for (int i = 0; i < d; i++)
                    head_out[i] += scores[t] * v_row[i];
            }
        }
    free(scores);
    kv_cache_append(cache, k, v);
    Tensor *output = linear(concat, layer->W_o, layer->b_o);   /* (B, D) */
    TENSOR_FREE(q, k, v, concat);
    return output;
}
