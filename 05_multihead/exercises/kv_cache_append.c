/*
 * Exercise 5.3: one token into the key-value cache
 * (05_multihead/decoding.md; the chapter's README lists the exercise).
 *
 * k, v (B, G*d): the new token's keys and values, G key-value heads of d
 * numbers side by side. Write head g of sequence b into the cache at
 * position T = cache->length, where kv_cache_key(cache, b, g, T) and
 * kv_cache_value(cache, b, g, T) point (kv_cache.h), then advance the
 * length to T + 1. The grader never gives a full cache.
 *
 * Grade it:  make check EXERCISE=05_multihead/exercises/kv_cache_append.c
 */
#include "exercises.h"

void my_kv_cache_append(KVCache *cache, const Tensor *k, const Tensor *v)
{
    not_started();   /* delete this line when you begin */
    (void)cache;
    (void)k;
    (void)v;
}
