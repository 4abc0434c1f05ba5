/* decode_timing.c - timing the decode step. See decode_timing.h. */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include "decode_timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fast/fast_decode.h"
#include "fast/fast_matmul.h"
#include "kv_cache.h"
#include "memory.h"
#include "platform.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double best_seconds(void (*call)(const void *work), const void *work, int repeats)
{
    double best = INFINITY;
    for (int r = 0; r < repeats; r++) {
        const double start = now_seconds();
        call(work);
        best = fmin(best, now_seconds() - start);
    }
    return best;
}

/* prefix (1, T, D), token (1, D) -> output (1, D) */
Tensor *fast_decode_recompute(const MultiHeadAttention *layer, const Tensor *prefix,
                              const Tensor *token)
{
    const int T = prefix->shape[1], D = layer->num_hiddens, H = layer->num_heads;
    const int G = layer->num_kv_heads, d = D / H;
    Tensor *q = fast_linear(token, layer->W_q, layer->b_q, 1);    /* (1, D) */
    Tensor *k = fast_linear(prefix, layer->W_k, layer->b_k, 1);   /* (1, T, G*d) */
    Tensor *v = fast_linear(prefix, layer->W_v, layer->b_v, 1);   /* (1, T, G*d) */
    /* the freshly computed rows as a cache of T tokens, then the same attention */
    KVCache *fresh = kv_cache_new(1, G, T, d);
    for (int g = 0; g < G; g++)
        for (int t = 0; t < T; t++) {
            memcpy(kv_cache_key(fresh, 0, g, t), k->data + (size_t)t * G * d + (size_t)g * d,
                   (size_t)d * sizeof(float));
            memcpy(kv_cache_value(fresh, 0, g, t), v->data + (size_t)t * G * d + (size_t)g * d,
                   (size_t)d * sizeof(float));
        }
    fresh->length = T;
    Tensor *concat = tensor_zeros(SHAPE(1, D));
    fast_decode_attend(fresh, H, q->data, concat->data);
    Tensor *out = fast_linear(concat, layer->W_o, layer->b_o, 1);
    kv_cache_free(fresh);
    TENSOR_FREE(q, k, v, concat);
    return out;
}

double stream_read_rate(double bytes)
{
    const size_t n = (size_t)(bytes / sizeof(float));
    float *buffer = checked_malloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        buffer[i] = (float)(i & 1023);   /* written: every page resident before timing */
    double best = INFINITY;
    volatile float sink = 0.0f;
    for (int r = 0; r < 3; r++) {
        const double start = now_seconds();
        sink += fast_stream_read(buffer, n);
        best = fmin(best, now_seconds() - start);
    }
    (void)sink;
    free(buffer);
    return (double)n * sizeof(float) / best / 1e9;
}

bool kv_cache_growth(int G, int d, const int *table_T, int rows, double *bytes_per_token)
{
    KVCache *cache = kv_cache_new(1, G, table_T[rows - 1], d);
    Tensor *k = tensor_full(0.5f, SHAPE(1, G * d)), *v = tensor_full(-0.5f, SHAPE(1, G * d));
    /* the cache's own two mappings, and nothing else the process holds */
    const size_t bytes = (size_t)G * (size_t)table_T[rows - 1] * (size_t)d * sizeof(float);
    bool known = true;
    for (int i = 0; i < rows; i++) {
        while (cache->length < table_T[i])
            kv_cache_append(cache, k, v);
        const double keys = platform_resident_bytes(cache->keys, bytes);
        const double values = platform_resident_bytes(cache->values, bytes);
        known = known && keys >= 0.0 && values >= 0.0;
        bytes_per_token[i] = (keys + values) / table_T[i];
    }
    TENSOR_FREE(k, v);
    kv_cache_free(cache);
    return known;
}
