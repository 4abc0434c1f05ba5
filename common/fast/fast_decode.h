/*
 * fast_decode.h - the decode step of kv_cache.h, fast (the speed part of
 * 05_multihead/decoding.md).
 *
 * Legend: B = batch_size, T = tokens cached, H = num_heads,
 * G = num_kv_heads, D = num_hiddens, d = D / H.
 *
 * One decode step does little arithmetic per byte it reads: every cached
 * key and value is used once per query head that reads it, for 2 flops per
 * float. So its speed is the speed at which memory delivers the cache, and
 * the kernel is built around reading the cache once, front to back:
 *
 *   - the H / G query heads that share a key-value head are served in the
 *     same pass: each key row is loaded once and multiplied by all of
 *     them, so a grouped cache is read once per step, not H / G times;
 *   - a key row is d contiguous floats, taken FAST_VEC at a time into
 *     vector accumulators; the scores of a head are one row of T floats,
 *     exponentiated by fast_exp (fast_exp.h);
 *   - the value rows are read once more, in order, each added into the
 *     H / G output rows with its weights.
 *
 * Results equal decode_step's within rounding: the dot products are summed
 * in vector lanes and with fused multiply-adds, the exponential is
 * fast_exp's, so the order of the sums differs and nothing else.
 * One thread: the step is memory-bound, and the benchmark in
 * 05_multihead/decode compares its cache-read speed with a plain streaming
 * read (fast_stream_read) on the same thread.
 */
#ifndef FAST_DECODE_H
#define FAST_DECODE_H

#include <stddef.h>

#include "kv_cache.h"
#include "multihead.h"
#include "tensor.h"

/* q (B, D): the new token's query heads -> concat (B, D): every head's
 * attention over the T cached tokens, heads side by side (pass 3 of
 * decode_step). Reads 2 * B * G * T * d floats of the cache once. */
void fast_decode_attend(const KVCache *cache, int num_heads, const float *q, float *concat);

/* token (B, D) -> output (B, D), the token appended to the cache: as
 * decode_step, with vector dot products for the projections (each weight
 * read once, row by row) and fast_decode_attend. */
Tensor *fast_decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token);

/* The sum of x[0 .. n-1], read front to back with vector loads: a streaming
 * read, the fastest way this thread can take n floats from memory. With n
 * far larger than the caches its time gives the memory's bandwidth. */
float fast_stream_read(const float *x, size_t n);

#endif
