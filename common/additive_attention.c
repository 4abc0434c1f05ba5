/*
 * additive_attention.c - additive attention, the clear version (introduced
 * in chapter 03's page additive.md). See additive_attention.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, q = query size,
 * k = key size, v = value size, h = num_hiddens.
 */
#include "additive_attention.h"

#include <math.h>

#include "ops.h"
#include "softmax.h"

AdditiveAttention additive_attention_new(int query_size, int key_size, int num_hiddens,
                                         Rng *rng)
{
    /* nn.Linear's default: uniform in [-1/sqrt(in), 1/sqrt(in)) */
    const float bound_q = 1.0f / sqrtf((float)query_size);
    const float bound_k = 1.0f / sqrtf((float)key_size);
    const float bound_v = 1.0f / sqrtf((float)num_hiddens);
    AdditiveAttention layer;
    layer.W_q = tensor_uniform(rng, -bound_q, bound_q, SHAPE(num_hiddens, query_size));
    layer.W_k = tensor_uniform(rng, -bound_k, bound_k, SHAPE(num_hiddens, key_size));
    layer.w_v = tensor_uniform(rng, -bound_v, bound_v, SHAPE(1, num_hiddens));
    return layer;
}

void additive_attention_free(AdditiveAttention *layer)
{
    TENSOR_FREE(layer->W_q, layer->W_k, layer->w_v);
    layer->W_q = layer->W_k = layer->w_v = NULL;
}

/* Stop naming the tensor unless the inputs and the weights fit together. */
static void check_shapes(const AdditiveAttention *layer, const Tensor *queries, const Tensor *keys,
                         const Tensor *values, const ValidLens *valid_lens)
{
    tensor_check_shape("queries", queries, SHAPE(-1, -1, -1));
    const int batch_size = queries->shape[0];
    /* Unlike a dot product, the score never multiplies a query by a key,
     * so their sizes are free: only the projections must fit them. */
    tensor_check_shape("keys", keys, SHAPE(batch_size, -1, -1));
    const int num_keys = keys->shape[1];
    tensor_check_shape("values", values, SHAPE(batch_size, num_keys, -1));
    tensor_check_shape("W_q", layer->W_q, SHAPE(-1, queries->shape[2]));
    const int num_hiddens = layer->W_q->shape[0];
    tensor_check_shape("W_k", layer->W_k, SHAPE(num_hiddens, keys->shape[2]));
    tensor_check_shape("w_v", layer->w_v, SHAPE(1, num_hiddens));
    valid_lens_check(valid_lens, batch_size, queries->shape[1], num_keys);
}

/* projected_queries (B, T, h), projected_keys (B, K, h), w_v (1, h)
 * -> scores (B, T, K), score = w_v . tanh(q_row + k_row). d2l broadcasts
 * the sum into a (B, T, K, h) tensor of features first; one pair at a
 * time needs no more than its h numbers. */
static Tensor *additive_scores(const Tensor *projected_queries, const Tensor *projected_keys,
                               const Tensor *w_v)
{
    const int batch_size = projected_queries->shape[0];
    const int num_queries = projected_queries->shape[1], num_hiddens = projected_queries->shape[2];
    const int num_keys = projected_keys->shape[1];
    Tensor *scores = tensor_zeros(SHAPE(batch_size, num_queries, num_keys));
    for (int b = 0; b < batch_size; b++)
        for (int i = 0; i < num_queries; i++) {
            const float *q_row = projected_queries->data +
                                 ((size_t)b * num_queries + (size_t)i) * num_hiddens;
            for (int j = 0; j < num_keys; j++) {
                const float *k_row = projected_keys->data +
                                     ((size_t)b * num_keys + (size_t)j) * num_hiddens;
                float score = 0.0f;
                for (int c = 0; c < num_hiddens; c++)
                    score += w_v->data[c] * tanhf(q_row[c] + k_row[c]);
                AT3(scores, b, i, j) = score;
            }
        }
    return scores;
}

/* queries (B, T, q), keys (B, K, k), values (B, K, v) -> output (B, T, v),
 * attention_weights (B, T, K) */
Tensor *additive_attention(const AdditiveAttention *layer, const Tensor *queries,
                           const Tensor *keys, const Tensor *values,
                           const ValidLens *valid_lens, const Dropout *dropout,
                           Tensor **attention_weights)
{
    check_shapes(layer, queries, keys, values, valid_lens);

    /* pass 1: project once, queries (B, T, q) -> (B, T, h) and keys
     * (B, K, k) -> (B, K, h). W_q q + W_k k is then a sum of two rows, so
     * each query and each key is projected once, not once per pair. */
    Tensor *projected_queries = linear(queries, layer->W_q, NULL);
    Tensor *projected_keys = linear(keys, layer->W_k, NULL);

    /* pass 2: scores (B, T, K), score = w_v . tanh(q_row + k_row) */
    Tensor *scores = additive_scores(projected_queries, projected_keys, layer->w_v);

    /* pass 3: masked softmax over each row (chapter 02): a key at or past
     * the row's valid_len gets weight exactly 0. The scores of a tanh
     * layer lie in [-|w_v|_1, |w_v|_1], so no scale is needed. */
    Tensor *weights = masked_softmax(scores, valid_lens);

    /* pass 4: dropout on the weights, in training mode only */
    dropout_inplace(weights, dropout);

    /* pass 5: weighted sum of values, (B, T, K) @ (B, K, v) -> (B, T, v) */
    Tensor *output = matmul(weights, values);

    TENSOR_FREE(projected_queries, projected_keys, scores);
    if (attention_weights != NULL)
        *attention_weights = weights;
    else
        tensor_free(weights);
    return output;
}
