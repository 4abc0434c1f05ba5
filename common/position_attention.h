/*
 * position_attention.h - scaled dot-product attention over heads already
 * split, with the positions that act inside it: RoPE on the queries and
 * keys, or ALiBi on the scores (introduced in chapter 06's page
 * "Positions that keep a symmetry").
 *
 * Legend: B = batch_size, H = num_heads, N = B * H, T = tokens (queries
 * and keys alike: self-attention), d = head size.
 *
 *   queries, keys (N, T, d)  -- RoPE: rotated for positions S ... S+T-1 -->
 *   scores = Q K^T / sqrt(d) (N, T, T)  -- ALiBi: + -m_h |i - j| -->
 *   weights = softmax over the keys, the causal mask first when asked
 *   output = weights V       (N, T, d)
 *
 * Matrix n is head n % H of sequence n / H (heads.h). The causal mask
 * lets query i see keys j <= i (valid_lens (N, T) of i + 1): masked
 * weights are exactly 0. ALiBi's bias does not add anything to learn, and
 * RoPE's rotation is fixed, so the backward is chapter 03's with RoPE's
 * rotation undone on the query and key gradients.
 */
#ifndef POSITION_ATTENTION_H
#define POSITION_ATTENTION_H

#include <stdbool.h>

#include "attention.h"
#include "tensor.h"

typedef enum { HEAD_POSITIONS_NONE, HEAD_POSITIONS_ROPE, HEAD_POSITIONS_ALIBI } HeadPositions;

typedef struct {
    HeadPositions positions;
    int num_heads;
    int first_position;   /* S: token t sits at S + t */
    bool causal;
} PositionAttention;

/* What the forward keeps for its backward. */
typedef struct {
    Tensor *queries, *keys;      /* (N, T, d): as the scores saw them, rotated for RoPE */
    const Tensor *values;        /* (N, T, d), borrowed */
    AttentionCache attention;    /* weights (N, T, T) */
} PositionAttentionCache;

/* queries, keys, values (N, T, d) -> output (N, T, d), new. scores, when
 * not NULL, receives the scaled scores after the positions and before the
 * mask (N, T, T); weights, when not NULL, the weights (N, T, T); cache,
 * when not NULL, what the backward needs (free with
 * position_attention_cache_free). RoPE needs an even d. */
Tensor *position_attention_forward(const PositionAttention *how, const Tensor *queries,
                                   const Tensor *keys, const Tensor *values, Tensor **scores,
                                   Tensor **weights, PositionAttentionCache *cache);

/* grad_output (N, T, d) -> grad_queries, grad_keys, grad_values (N, T, d),
 * each new, or not computed when its pointer is NULL. */
void position_attention_backward(const PositionAttention *how,
                                 const PositionAttentionCache *cache,
                                 const Tensor *grad_output, Tensor **grad_queries,
                                 Tensor **grad_keys, Tensor **grad_values);
void position_attention_cache_free(PositionAttentionCache *cache);

/* valid_lens (N, T) of i + 1 for query i: the causal mask, new. */
ValidLens *causal_valid_lens(int num_matrices, int num_queries);

#endif
