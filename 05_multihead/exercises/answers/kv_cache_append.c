/*
 * Exercise 5.3, worked answer: one token into the key-value cache.
 *
 * Head g's d numbers of sequence b's token are one piece of its row of k,
 * starting at g * d: transpose_qkv done for a single token. Each goes to
 * position T of its (sequence, head) matrix; the length advances once,
 * after every head is written.
 */
#include "exercises.h"

#include <string.h>

void my_kv_cache_append(KVCache *cache, const Tensor *k, const Tensor *v)
{
    int B = cache->batch_size, G = cache->num_kv_heads, d = cache->head_size;
    int t = cache->length;
    for (int b = 0; b < B; b++)
        for (int g = 0; g < G; g++) {
            size_t piece = (size_t)b * G * d + (size_t)g * d;
            memcpy(kv_cache_key(cache, b, g, t), k->data + piece, (size_t)d * sizeof(float));
            memcpy(kv_cache_value(cache, b, g, t), v->data + piece, (size_t)d * sizeof(float));
        }
    cache->length = t + 1;
}
