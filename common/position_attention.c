/*
 * position_attention.c - attention with RoPE or ALiBi inside it
 * (introduced in chapter 06's page "Positions that keep a symmetry"). See
 * position_attention.h.
 *
 * Legend: B = batch_size, H = num_heads, N = B * H, T = tokens, d = head
 * size.
 */
#include "position_attention.h"

#include <math.h>
#include <stdlib.h>

#include "alibi.h"
#include "ops.h"
#include "rope.h"
#include "softmax.h"

/* valid_lens (N, T): query i sees keys 0 ... i */
ValidLens *causal_valid_lens(int num_matrices, int num_queries)
{
    int *lens = checked_malloc((size_t)num_matrices * num_queries,
                               sizeof *lens);
    for (int n = 0; n < num_matrices; n++)
        for (int i = 0; i < num_queries; i++)
            lens[(size_t)n * num_queries + i] = i + 1;
    ValidLens *valid_lens = valid_lens_2d(lens, num_matrices, num_queries);
    free(lens);
    return valid_lens;
}

/* queries, keys, values (N, T, d) -> output (N, T, d); scores and weights
 * (N, T, T) */
Tensor *position_attention_forward(const PositionAttention *how, const Tensor *queries,
                                   const Tensor *keys, const Tensor *values, Tensor **scores,
                                   Tensor **weights, PositionAttentionCache *cache)
{
    const AttentionSizes n = attention_check_shapes(queries, keys, values, NULL);
    if (n.num_keys != n.num_queries)
        die("self-attention: %d queries and %d keys", n.num_queries, n.num_keys);
    if (how->num_heads < 1 || n.batch_size % how->num_heads != 0)
        die("%d matrices are not a whole number of %d heads", n.batch_size,
            how->num_heads);

    // pass 1: RoPE turns every query and key by its position's angles
    const bool rope = how->positions == HEAD_POSITIONS_ROPE;
    Tensor *q = rope ? rope_forward(queries, how->first_position) : tensor_copy(queries);
    Tensor *k = rope ? rope_forward(keys, how->first_position) : tensor_copy(keys);

    // pass 2: scaled scores Q K^T / sqrt(d), as in chapter 03
    Tensor *s = matmul_bt(q, k);   /* (N, T, T) */
    const float scale = (float)sqrt((double)n.d);
    for (size_t i = 0; i < s->size; i++)
        s->data[i] /= scale;

    // pass 3: ALiBi's penalty on the distance, after the scaling
    if (how->positions == HEAD_POSITIONS_ALIBI)
        alibi_add_bias(s, how->num_heads);
    if (scores != NULL)
        *scores = tensor_copy(s);

    // pass 4: the causal mask (a loop bound in each row) and the softmax
    ValidLens *causal = how->causal ? causal_valid_lens(n.batch_size, n.num_queries) : NULL;
    Tensor *w = masked_softmax(s, causal);
    valid_lens_free(causal);
    tensor_free(s);

    // pass 5: the weighted sum of the values
    Tensor *output = matmul(w, values);
    if (weights != NULL)
        *weights = tensor_copy(w);
    if (cache != NULL) {
        *cache = (PositionAttentionCache){q, k, values, {w, NULL}};
    } else {
        TENSOR_FREE(q, k, w);
    }
    return output;
}

/* grad_output (N, T, d) -> grad_queries, grad_keys, grad_values (N, T, d) */
void position_attention_backward(const PositionAttention *how,
                                 const PositionAttentionCache *cache,
                                 const Tensor *grad_output, Tensor **grad_queries,
                                 Tensor **grad_keys, Tensor **grad_values)
{
    // passes 5 to 2 backwards: chapter 03's backward on the rotated queries
    // and keys; ALiBi added a constant to the scores, which changes the
    // weights the cache holds but not a single derivative after them
    dot_product_attention_backward(cache->queries, cache->keys, cache->values,
                                   &cache->attention, grad_output, grad_queries, grad_keys,
                                   grad_values);

    // pass 1 backwards: turn the query and key gradients back (R^T)
    if (how->positions != HEAD_POSITIONS_ROPE)
        return;
    Tensor **grads[2] = {grad_queries, grad_keys};
    for (int g = 0; g < 2; g++)
        if (grads[g] != NULL) {
            Tensor *turned_back = rope_backward(*grads[g], how->first_position);
            tensor_free(*grads[g]);
            *grads[g] = turned_back;
        }
}

void position_attention_cache_free(PositionAttentionCache *cache)
{
    if (cache == NULL)
        return;
    TENSOR_FREE(cache->queries, cache->keys);
    attention_cache_free(&cache->attention);
    *cache = (PositionAttentionCache){0};
}
