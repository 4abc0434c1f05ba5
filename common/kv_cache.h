/*
 * kv_cache.h - decoding one token at a time with a key-value cache
 * (introduced in 05_multihead/decoding.md).
 *
 * Legend: B = batch_size, T = tokens decoded so far, T_max = capacity,
 * H = num_heads, G = num_kv_heads (G divides H), D = num_hiddens, d = D / H.
 *
 * A decoder's token t may attend to tokens 0 .. t only. Their keys and
 * values do not change when later tokens arrive, so they are computed once
 * and kept: the cache. One decode step, for a new token x (B, D):
 *
 *   q = x W_q^T + b_q   (B, D)   = H query heads of d
 *   k = x W_k^T + b_k   (B, G*d) = G key heads, appended at position T
 *   v = x W_v^T + b_v   (B, G*d) = G value heads, appended at position T
 *   head h: softmax(q_h . K_g[0..T] / sqrt(d)) V_g[0..T],  g = h / (H/G)
 *   out = heads side by side W_o^T + b_o   (B, D)
 *
 * The keys cached for one sequence and one key-value head are a
 * (T_max, d) matrix whose first T rows are filled:
 *
 *   keys (B, G, T_max, d):   [b][g] ->  t = 0   [k k k ... k]   filled
 *                                       t = 1   [k k k ... k]   filled
 *                                       t = T   [. . . ... .]   the next token's
 *                                       ...                     not yet written
 *
 * and values alike. Each step reads all T filled rows once: 2 * G * d
 * floats per cached token, which is why sharing key-value heads (G < H)
 * makes decoding cheaper.
 *
 * The step computes, for token t, exactly what the full layer computes
 * for query t with the causal mask (valid_lens_causal): the same products
 * in the same order, so the clear step and the full layer agree to the
 * last bit; a faster step (fast/fast_decode.h) sums in another order and
 * agrees within rounding.
 *
 * The full layer, the step's reference, is causal_forward, and the full
 * layer with shared key-value heads is grouped_forward_cache: both in
 * attention_layer.h, beside the pair that trains a grouped model.
 * Grouped-query attention:
 * G = num_kv_heads key-value heads, G dividing H (multihead_new_grouped):
 * W_k (G*d, Dk), W_v (G*d, Dv), b_k and b_v (G*d,); K and V are split into
 * G heads and each repeated H / G times (split_kv_heads in heads.h), so
 * query head h reads key-value head h / (H/G); the rest is chapter 05's
 * layer (multihead.h's stages). G = H is chapter 05's layer, number for
 * number; G = 1 is multi-query attention.
 */
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include <stddef.h>

#include "multihead.h"
#include "tensor.h"

typedef struct {
    int batch_size, num_kv_heads, capacity, head_size;   /* B, G, T_max, d */
    int length;                                          /* T: tokens cached */
    float *keys, *values;                                /* (B, G, T_max, d) each */
} KVCache;

/* Bytes kv_cache_new asks the system for: 2 * B * G * T_max * d floats.
 * The pages become resident only as tokens are written into them, so a
 * process grows by 2 * G * d * 4 bytes per token and sequence as it decodes
 * (05_multihead/decode measures it). */
double kv_cache_bytes(int batch_size, int num_kv_heads, int capacity, int head_size);

/* An empty cache (T = 0). Stops with one line, as tensor_zeros does, when
 * the sizes are not positive or the memory cannot be had: a program checks
 * kv_cache_bytes against memory_available first. */
KVCache *kv_cache_new(int batch_size, int num_kv_heads, int capacity, int head_size);
void kv_cache_free(KVCache *cache);   /* NULL is fine */

/* Row t of key-value head g of sequence b: d floats. */
float *kv_cache_key(const KVCache *cache, int b, int g, int t);
float *kv_cache_value(const KVCache *cache, int b, int g, int t);

/* k, v (B, G*d): one token's keys and values -> written at position T,
 * then T + 1. Stops when the cache is full (T = T_max). */
void kv_cache_append(KVCache *cache, const Tensor *k, const Tensor *v);

/* token (B, D) -> output (B, D), the token appended to the cache: the
 * decode step above, with the layer's G = layer->num_kv_heads. The cache
 * must have B sequences, G heads and head size d. */
Tensor *decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token);

/* tokens (B, T, D) -> outputs (B, T, D): T decode steps from an empty
 * cache of capacity T (new, freed before returning). */
Tensor *decode_sequence(const MultiHeadAttention *layer, const Tensor *tokens);

#endif
