/*
 * decode_timing.h - what 05_multihead/decode measures about the decode
 * step (the speed part of 05_multihead/decoding.md): the best time of a
 * call, the step without a cache, a streaming read's rate and the cache's
 * growth in resident memory.
 *
 * Legend: T = tokens, H = num_heads, G = num_kv_heads, D = num_hiddens,
 * d = D / H.
 *
 * Times are wall-clock seconds of this machine now: they move with
 * everything else it runs, and no page quotes one.
 *
 * Beside decode.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef DECODE_TIMING_H
#define DECODE_TIMING_H

#include <stdbool.h>

#include "multihead.h"
#include "tensor.h"

/* Seconds of the best of repeats calls of call(work): a busy machine only
 * ever adds time, so the least is the closest to the step's own. */
double best_seconds(void (*call)(const void *work), const void *work, int repeats);

/* prefix (1, T, D), token (1, D) -> output (1, D): the step without a
 * cache, which projects the keys and values of all T tokens again
 * (through W_k and W_v) before it attends as fast_decode_step does. */
Tensor *fast_decode_recompute(const MultiHeadAttention *layer, const Tensor *prefix,
                              const Tensor *token);

/* GB/s of fast_stream_read over a buffer of bytes, best of 3 passes. */
double stream_read_rate(double bytes);

/* A cache of 1 sequence, G heads of size d, grown from empty to each
 * table_T[i] of rows, the resident bytes of its own memory (keys and
 * values, platform_resident_bytes) read at each: bytes_per_token[i] =
 * resident / table_T[i]. What the allocator or a sanitizer holds besides
 * does not count. false when the system does not say what is resident. */
bool kv_cache_growth(int G, int d, const int *table_T, int rows, double *bytes_per_token);

#endif
