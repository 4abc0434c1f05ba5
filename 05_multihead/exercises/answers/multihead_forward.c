/*
 * Exercise 5.2, worked answer: the multi-head layer, from the pieces.
 *
 *   Q = queries W_q^T + b_q (B, T, D)   -> transpose_qkv -> (B*H, T, d)
 *   K, V alike with n_k rows            -> (B*H, n_k, d)
 *   heads = dot_product_attention(Q, K, V, valid_lens repeated per head)
 *   output = transpose_output(heads) W_o^T + b_o   (B, T, D)
 *
 * dot_product_attention divides by sqrt of its queries' size, d = D / H,
 * because it sees one head at a time.
 */
#include "exercises.h"
#include "attention.h"
#include "heads.h"
#include "ops.h"

Tensor *my_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                             const Tensor *keys, const Tensor *values,
                             const ValidLens *valid_lens)
{
    int H = layer->num_heads;
    // step 1: the three projections, split into heads
    Tensor *q_proj = linear(queries, layer->W_q, layer->b_q);
    Tensor *k_proj = linear(keys, layer->W_k, layer->b_k);
    Tensor *v_proj = linear(values, layer->W_v, layer->b_v);
    Tensor *Q = transpose_qkv(q_proj, H), *K = transpose_qkv(k_proj, H);
    Tensor *V = transpose_qkv(v_proj, H);
    // step 2: every head's attention at once, each row b*H + h with its sequence's mask
    ValidLens *per_head = valid_lens ? valid_lens_repeat_interleave(valid_lens, H) : NULL;
    Tensor *heads = dot_product_attention(Q, K, V, per_head, NULL, NULL);
    // step 3: the heads side by side, then the output projection
    Tensor *concat = transpose_output(heads, H);
    Tensor *output = linear(concat, layer->W_o, layer->b_o);
    Tensor *scratch[] = {q_proj, k_proj, v_proj, Q, K, V, heads, concat};
    tensor_free_all(scratch, 8);
    valid_lens_free(per_head);
    return output;
}
