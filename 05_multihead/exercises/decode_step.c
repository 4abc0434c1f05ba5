/*
 * Exercise 5.8: one decoding step with a key-value cache
 * (05_multihead/backward.md, "Exercises").
 *
 * token (B, D) -> output (B, D), new: the layer's output for the token
 * after the cache->length tokens cached, which it joins (the cache then
 * holds one more). Query head h (of H) reads key-value head h / (H / G).
 * You may call linear (ops.h), kv_cache_append and kv_cache_key,
 * kv_cache_value (kv_cache.h), softmax_row (softmax.h).
 *
 * Grade it:  make check EXERCISE=05_multihead/exercises/decode_step.c
 */
#include "exercises.h"

Tensor *my_decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token)
{
    not_started();   /* delete this line when you begin */
    (void)layer;
    (void)cache;
    (void)token;
    return NULL;
}
