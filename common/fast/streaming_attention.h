/*
 * streaming_attention.h - scaled dot-product attention without the n x n
 * matrix (the fast path of chapter 03; the online softmax it rests on is
 * explained step by step in 03_self_attention/README.md).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, d = query and key
 * size, v = value size; Br x Bc = STREAM_BLOCK_QUERIES x STREAM_BLOCK_KEYS.
 *
 * dot_product_attention builds all B * T * n_k scores, then softmaxes them.
 * This version takes Br queries at a time and walks the keys Bc at a time:
 * it keeps, per query, the largest score seen so far (m), the sum of
 * exp(score - m) so far (l) and the output so far (o, not yet divided by l).
 * When a block of keys raises the maximum from m to m', everything summed
 * so far was scaled by exp(-m) where it should now be exp(-m'), so l and o
 * are multiplied by exp(m - m') before the new block is added:
 *
 *   m' = max(m, max_j s_j)
 *   l' = l * exp(m - m') + sum_j exp(s_j - m')
 *   o' = o * exp(m - m') + sum_j exp(s_j - m') * value_j
 *
 * and after the last block the output is o / l. The memory per thread is
 * the running outputs of Br queries and the scores of a few of them at a
 * time (STREAM_TILE_QUERIES x Bc), plus the packed keys and values:
 * O(n_k * d) instead of O(T * n_k).
 *
 * Masking is the clear version's: key j takes part for a query when
 * j < valid_len (valid_lens NULL, (B,) or (B, T)); masked keys get weight
 * exactly 0; a query with valid_len 0 gets a zero output. There is no
 * dropout (evaluation only) and no attention-weights output: the weights
 * are never all in memory at once, which is the point. The threads share
 * the blocks of queries; the output is the same bits on any thread count.
 *
 * Results equal dot_product_attention up to float rounding (sums in another
 * order, fused multiply-adds, the fast exp): tests/test_fast.c checks them
 * within 1e-5 of the output's magnitude.
 */
#ifndef STREAMING_ATTENTION_H
#define STREAMING_ATTENTION_H

#include <stddef.h>

#include "valid_lens.h"
#include "tensor.h"

enum {
    STREAM_BLOCK_QUERIES = 96,   /* Br: a multiple of the register tile's 6 rows */
    STREAM_BLOCK_KEYS = 256,     /* Bc: a multiple of the 16- or 32-column panels */
    STREAM_TILE_QUERIES = 12,    /* queries whose Bc scores are held at once: room
                                  * for the register tile's rows (12 with AVX-512,
                                  * else 6), the same memory on every machine */
};

/* queries (B, T, d), keys (B, n_k, d), values (B, n_k, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v), like dot_product_attention without
 * dropout. num_threads >= 1 threads share each sequence's query blocks. */
Tensor *streaming_attention(const Tensor *queries, const Tensor *keys,
                            const Tensor *values, const ValidLens *valid_lens,
                            int num_threads);

/* ---- backward ------------------------------------------------------------------
 * The backward needs the weights again, and they were never stored. It
 * recomputes them block by block from one number per query that the
 * forward keeps: lse = log(sum_j exp(s_j)) over its valid keys (m + log(l)
 * in the notation above; -inf for a query with no key), since the weight
 * of key j is exp(s_j - lse). Memory: B * T floats kept, and per thread
 * blocks of Bk x Bq plus the sequence's queries and output gradient
 * (O(T * d)), never T x n_k. How the five products of a block go is told in
 * streaming_attention.c.
 */
enum {
    STREAM_BACKWARD_QUERIES = 96,   /* Bq: a multiple of the panel width, 16 or 32 */
    STREAM_BACKWARD_KEYS = 96,      /* Bk: a multiple of the tile's 6 or 12 rows */
};

/* streaming_attention, which also returns logsumexp (B, T) when not NULL
 * (the caller frees it): what the backward needs besides the inputs and
 * the output. */
Tensor *streaming_attention_cache(const Tensor *queries, const Tensor *keys,
                                 const Tensor *values, const ValidLens *valid_lens,
                                 int num_threads, Tensor **logsumexp);

/* The gradients of sum(output * grad_output): queries (B, T, d), keys
 * (B, n_k, d), values (B, n_k, v), valid_lens, and output (B, T, v) and
 * logsumexp (B, T) as streaming_attention_cache returned them, grad_output
 * (B, T, v) -> grad_queries (B, T, d), grad_keys (B, n_k, d), grad_values
 * (B, n_k, v), returned (new; a NULL pointer: not wanted). Masked keys and
 * queries with no key get exactly 0. One thread takes whole sequences;
 * with more, and fewer than two sequences per thread, each sequence's
 * keys are split into parts with as many block pairs each (under a causal
 * mask the first keys pair with more query blocks than the last). The
 * result depends on the thread count only through the order in which the
 * parts' dQ are added, and is the same bits on every run. Equal to dot_product_attention_backward up
 * to float rounding (tests/test_fast.c: within 1e-5 of each gradient's
 * magnitude). */
void streaming_attention_backward(const Tensor *queries, const Tensor *keys,
                                  const Tensor *values, const ValidLens *valid_lens,
                                  const Tensor *output, const Tensor *logsumexp,
                                  const Tensor *grad_output, int num_threads,
                                  Tensor **grad_queries, Tensor **grad_keys,
                                  Tensor **grad_values);

/* ---- the pieces, for the multi-head fast path ---------------------------- */

/* One sequence's keys and values, copied once into the panel layout of
 * fast_matmul.h (keys transposed), so every block of queries reads them
 * with contiguous vector loads. */
typedef struct {
    int num_keys, key_size, value_size;   /* n_k, d, v */
    float *key_panels;     /* K^T (d, n_k) as panels of FAST_NR keys */
    float *value_panels;   /* values (n_k, v) as panels of FAST_NR columns */
} PackedKeysValues;

/* Keys (n_k, d) and values (n_k, v) into panels, in two steps, for keys
 * and values that arrive in pieces: allocate room for n_k keys (free with
 * packed_kv_free), then copy in count keys and values (rows at the given
 * strides, in floats) as keys first_key .. first_key + count - 1;
 * first_key must be a multiple of fast_panels_size(1, 1), the panel
 * width (the start of a panel). */
void packed_kv_alloc(PackedKeysValues *kv, int num_keys, int key_size, int value_size);
void packed_kv_fill(PackedKeysValues *kv, int first_key, int count,
                    const float *keys, size_t key_stride,
                    const float *values, size_t value_stride);
void packed_kv_free(PackedKeysValues *kv);

/* Attention of num_queries query rows (at stride query_stride) over the
 * packed keys and values -> out rows (at stride out_stride, v floats each).
 * The rows are queries first_query, first_query + 1, ... of sequence
 * batch_index, which is how their valid lengths are looked up in
 * valid_lens (NULL: every key). Single-threaded; callers share rows or
 * sequences between threads. */
void streaming_attention_rows(const PackedKeysValues *kv, const float *queries,
                              size_t query_stride, int num_queries,
                              const ValidLens *valid_lens, int batch_index, int first_query,
                              float *out, size_t out_stride, float *logsumexp);

/* The same with the scratch memory the call needs made once by the caller
 * (streaming_scratch_new, for heads of key_size d and value_size v), for
 * a caller that runs it again and again on one thread: nothing allocated. */
typedef struct StreamingScratch StreamingScratch;
StreamingScratch *streaming_scratch_new(int key_size, int value_size);
void streaming_scratch_free(StreamingScratch *scratch);   /* NULL is fine */
void streaming_attention_rows_scratch(const PackedKeysValues *kv, const float *queries,
                                      size_t query_stride, int num_queries,
                                      const ValidLens *valid_lens, int batch_index,
                                      int first_query, float *out, size_t out_stride,
                                      float *logsumexp, StreamingScratch *scratch);

/* One sequence (one head) for the backward: its rows anywhere in memory,
 * each matrix at its own row stride (in floats), so a head's columns of a
 * (B, T, D) tensor are used in place. The gradients are added into. */
typedef struct {
    int num_queries, num_keys, key_size, value_size;      /* T, n_k, d, v */
    const float *queries;      size_t query_stride;       /* (T, d) */
    const float *keys;         size_t key_stride;         /* (n_k, d) */
    const float *values;       size_t value_stride;       /* (n_k, v) */
    const float *output;       size_t output_stride;      /* (T, v), the forward's */
    const float *grad_output;  size_t grad_output_stride; /* (T, v) */
    const float *logsumexp;                               /* (T,), the forward's */
    const ValidLens *valid_lens; int batch_index;         /* whose lengths apply */
    float *grad_queries;       size_t grad_query_stride;  /* (T, d), += */
    float *grad_keys;          size_t grad_key_stride;    /* (n_k, d), += */
    float *grad_values;        size_t grad_value_stride;  /* (n_k, v), += */
} AttentionRowsBackward;

/* What one thread needs for the backward of sequences of up to T queries,
 * reused from sequence to sequence. */
typedef struct {
    int num_queries, key_size, value_size;   /* T, d, v it was made for */
    float *query_panels_t;        /* (Q / sqrt(d))^T (d, T) as panels */
    float *query_panels;          /* Q / sqrt(d) (T, d) as panels */
    float *grad_output_panels_t;  /* dO^T (v, T) as panels */
    float *grad_output_panels;    /* dO (T, v) as panels */
    float *key_panels;            /* one block's K / sqrt(d) (Bk, d) as panels */
    float *delta;                 /* (T,) rowsum(dO * O) */
    int *len;                     /* (T,) valid length of each query */
    float *p, *dp;                /* (Bk, Bq) P^T, and dP^T then dS^T */
} StreamingBackwardScratch;

void streaming_backward_scratch_alloc(StreamingBackwardScratch *scratch, int num_queries,
                                      int key_size, int value_size);
void streaming_backward_scratch_free(StreamingBackwardScratch *scratch);

/* The backward of one sequence for keys first_key .. last_key - 1 (the
 * whole of dK and dV there, and their share of dQ), single-threaded. */
void streaming_attention_backward_rows(const AttentionRowsBackward *rows, int first_key,
                                       int last_key, StreamingBackwardScratch *scratch);

#endif
