/*
 * kv_cache.c - decoding one token at a time with a key-value cache
 * (introduced in 05_multihead/decoding.md). See kv_cache.h.
 *
 * Legend: B = batch_size, T = tokens decoded so far, T_max = capacity,
 * H = num_heads, G = num_kv_heads (G divides H), D = num_hiddens, d = D / H.
 */
#include "kv_cache.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "heads.h"
#include "ops.h"
#include "platform.h"
#include "softmax.h"

double kv_cache_bytes(int batch_size, int num_kv_heads, int capacity, int head_size)
{
    return 2.0 * batch_size * num_kv_heads * (double)capacity * head_size * sizeof(float);
}

/* count floats straight from the system, zero, not yet resident: calloc
 * may hand back pages a freed block left resident, and then the growth of
 * the cache could not be watched */
static float *map_floats(size_t count)
{
    return platform_map_zeroed(count * sizeof(float));
}

static size_t cache_floats(const KVCache *cache)   /* B * G * T_max * d */
{
    return (size_t)cache->batch_size * cache->num_kv_heads * cache->capacity * cache->head_size;
}

KVCache *kv_cache_new(int batch_size, int num_kv_heads, int capacity, int head_size)
{
    if (batch_size < 1 || num_kv_heads < 1 || capacity < 1 || head_size < 1)
        die("sizes must be positive: batch_size %d, num_kv_heads %d, capacity %d, "
            "head_size %d", batch_size, num_kv_heads, capacity, head_size);
    const double bytes = kv_cache_bytes(batch_size, num_kv_heads, capacity, head_size);
    if (bytes / 2 > (double)(SIZE_MAX / 2))
        die("a cache of %.3g bytes does not fit in this machine's addresses", bytes);
    KVCache *cache = checked_calloc(1, sizeof *cache);
    *cache = (KVCache){batch_size, num_kv_heads, capacity, head_size, 0, NULL, NULL};
    cache->keys = map_floats(cache_floats(cache));
    cache->values = map_floats(cache_floats(cache));
    if (cache->keys == NULL || cache->values == NULL) {
        char text[32];
        bytes_text(text, sizeof text, bytes);
        kv_cache_free(cache);
        die("out of memory: a cache of %d tokens needs %s", capacity, text);
    }
    return cache;
}

void kv_cache_free(KVCache *cache)
{
    if (cache == NULL)
        return;
    platform_unmap(cache->keys, cache_floats(cache) * sizeof(float));
    platform_unmap(cache->values, cache_floats(cache) * sizeof(float));
    free(cache);
}

/* offset of row t of head g of sequence b in (B, G, T_max, d) */
static size_t row_offset(const KVCache *cache, int b, int g, int t)
{
    return (((size_t)b * cache->num_kv_heads + g) * cache->capacity + t) * cache->head_size;
}

float *kv_cache_key(const KVCache *cache, int b, int g, int t)
{
    return cache->keys + row_offset(cache, b, g, t);
}

float *kv_cache_value(const KVCache *cache, int b, int g, int t)
{
    return cache->values + row_offset(cache, b, g, t);
}

/* k, v (B, G*d) -> row T of every head of every sequence */
void kv_cache_append(KVCache *cache, const Tensor *k, const Tensor *v)
{
    const int B = cache->batch_size, G = cache->num_kv_heads, d = cache->head_size;
    tensor_check_shape("k", k, SHAPE(B, G * d));
    tensor_check_shape("v", v, SHAPE(B, G * d));
    if (cache->length == cache->capacity)
        die("the cache is full: its capacity is %d tokens", cache->capacity);
    const int t = cache->length;
    for (int b = 0; b < B; b++)
        for (int g = 0; g < G; g++) {
            /* head g's d numbers of the token: one contiguous piece of its row,
             * the split of transpose_qkv done for a single token */
            const size_t piece = (size_t)b * G * d + (size_t)g * d;
            memcpy(kv_cache_key(cache, b, g, t), k->data + piece, (size_t)d * sizeof(float));
            memcpy(kv_cache_value(cache, b, g, t), v->data + piece, (size_t)d * sizeof(float));
        }
    cache->length = t + 1;
}

/* q_row (d,), key-value head g of sequence b over its T cached rows ->
 * head_out (d,); scores (T_max,) is room to work in */
static void attend_to_cache(const KVCache *cache, int b, int g, const float *q_row,
                            float *scores, float *head_out)
{
    const int T = cache->length, d = cache->head_size;
    const float scale = (float)sqrt((double)d);

    // pass 1: a score per cached token. The future does not exist yet:
    // rows T .. T_max-1 hold nothing, so the causal mask is the loop bound.
    for (int t = 0; t < T; t++) {
        const float *k_row = kv_cache_key(cache, b, g, t);
        float dot = 0.0f;
        for (int i = 0; i < d; i++)
            dot += q_row[i] * k_row[i];
        scores[t] = dot / scale;   /* as attention.c: the product, then the division */
    }
    // pass 2: softmax over the T scores
    softmax_row(scores, T);
    // pass 3: weighted sum of the cached values, token by token
    for (int i = 0; i < d; i++)
        head_out[i] = 0.0f;
    for (int t = 0; t < T; t++) {
        const float *v_row = kv_cache_value(cache, b, g, t);
        for (int i = 0; i < d; i++)
            head_out[i] += scores[t] * v_row[i];
    }
}

/* token (B, D) -> output (B, D) */
Tensor *decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token)
{
    const int H = layer->num_heads, G = layer->num_kv_heads, D = layer->num_hiddens;
    const int d = D / H, B = cache->batch_size;
    if (layer->query_size != D || layer->key_size != D || layer->value_size != D)
        die("a decoder's layer attends over its own tokens: query, key and value "
            "sizes must be num_hiddens %d, got %d, %d, %d", D, layer->query_size,
            layer->key_size, layer->value_size);
    tensor_check_shape("token", token, SHAPE(B, D));
    if (cache->num_kv_heads != G || cache->head_size != d)
        die("the cache has %d heads of %d, the layer %d key-value heads of %d",
            cache->num_kv_heads, cache->head_size, G, d);

    // pass 1: project the new token only; the earlier ones are in the cache
    Tensor *q = linear(token, layer->W_q, layer->b_q);   /* (B, D) */
    Tensor *k = linear(token, layer->W_k, layer->b_k);   /* (B, G*d) */
    Tensor *v = linear(token, layer->W_v, layer->b_v);   /* (B, G*d) */

    // pass 2: its key and value join the cache, at position T
    kv_cache_append(cache, k, v);

    // pass 3: query head h attends over the T cached tokens of key-value
    // head h / (H/G), its output going where transpose_output puts head h
    Tensor *concat = tensor_zeros(SHAPE(B, D));
    float *scores = checked_malloc((size_t)cache->length, sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q_row = q->data + (size_t)b * D + (size_t)h * d;
            float *head_out = concat->data + (size_t)b * D + (size_t)h * d;
            attend_to_cache(cache, b, h / (H / G), q_row, scores, head_out);
        }
    free(scores);

    // pass 4: mix the heads with W_o
    Tensor *output = linear(concat, layer->W_o, layer->b_o);   /* (B, D) */
    TENSOR_FREE(q, k, v, concat);
    return output;
}

/* x (B, T, D), t -> (B, D), token t of every sequence (new) */
static Tensor *token_at(const Tensor *x, int t)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    Tensor *token = tensor_zeros(SHAPE(B, D));
    for (int b = 0; b < B; b++)
        memcpy(token->data + (size_t)b * D, x->data + ((size_t)b * T + t) * D,
               (size_t)D * sizeof(float));
    return token;
}

/* tokens (B, T, D) -> outputs (B, T, D) */
Tensor *decode_sequence(const MultiHeadAttention *layer, const Tensor *tokens)
{
    tensor_check_shape("tokens", tokens, SHAPE(-1, -1, layer->query_size));
    const int B = tokens->shape[0], T = tokens->shape[1], D = layer->num_hiddens;
    KVCache *cache = kv_cache_new(B, layer->num_kv_heads, T, D / layer->num_heads);
    Tensor *outputs = tensor_zeros(SHAPE(B, T, D));
    for (int t = 0; t < T; t++) {
        Tensor *token = token_at(tokens, t);
        Tensor *out = decode_step(layer, cache, token);   /* (B, D) */
        for (int b = 0; b < B; b++)
            memcpy(outputs->data + ((size_t)b * T + t) * D, out->data + (size_t)b * D,
                   (size_t)D * sizeof(float));
        TENSOR_FREE(token, out);
    }
    kv_cache_free(cache);
    return outputs;
}
