/*
 * Bug zoo: the multi-head layer (exercise 5.2).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"
#include "heads.h"
#include "ops.h"
#include "softmax.h"

#include <math.h>

Tensor *my_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                             const Tensor *keys, const Tensor *values,
                             const ValidLens *valid_lens)
{
    int H = layer->num_heads, D = layer->num_hiddens;
    Tensor *q_proj = linear(queries, layer->W_q, layer->b_q);
    Tensor *k_proj = linear(keys, layer->W_k, layer->b_k);
    Tensor *v_proj = linear(values, layer->W_v, layer->b_v);
    Tensor *Q = transpose_qkv(q_proj, H), *K = transpose_qkv(k_proj, H);
    Tensor *V = transpose_qkv(v_proj, H);
    /* every head's scores at once, scaled as the layer's width asks */
    Tensor *scores = matmul_bt(Q, K);
    for (size_t i = 0; i < scores->size; i++)
        scores->data[i] /= sqrtf((float)D);
    ValidLens *per_head = valid_lens ? valid_lens_repeat_interleave(valid_lens, H) : NULL;
    Tensor *weights = masked_softmax(scores, per_head);
    Tensor *heads = matmul(weights, V);
    Tensor *concat = transpose_output(heads, H);
    Tensor *output = linear(concat, layer->W_o, layer->b_o);
    Tensor *scratch[] = {q_proj, k_proj, v_proj, Q, K, V, scores, weights, heads, concat};
    tensor_free_all(scratch, 10);
    valid_lens_free(per_head);
    return output;
}
