/*
 * Exercise 3.2, worked answer: scaled dot-product attention (d2l's
 * DotProductAttention, evaluation mode).
 *
 * The chapter's passes: scores, masked softmax (chapter 02's, which keeps
 * masked weights at exactly 0), then the weighted sum of values.
 */
#include "exercises.h"
#include "softmax.h"

#include <math.h>

Tensor *my_dot_product_attention(const Tensor *queries, const Tensor *keys, const Tensor *values,
                     const ValidLens *valid_lens, Tensor **weights)
{
    int batch = queries->shape[0], num_queries = queries->shape[1];
    int num_keys = keys->shape[1], d = queries->shape[2], v = values->shape[2];
    // pass 1: scores = queries @ keys^T / sqrt(d)
    Tensor *scores = tensor_empty(SHAPE(batch, num_queries, num_keys));
    float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            for (int j = 0; j < num_keys; j++) {
                float dot = 0.0f;
                for (int p = 0; p < d; p++)
                    dot += AT3(queries, b, i, p) * AT3(keys, b, j, p);
                AT3(scores, b, i, j) = dot * scale;
            }
    // pass 2: the weights, masked
    *weights = masked_softmax(scores, valid_lens);
    tensor_free(scores);
    // pass 3: output = weights @ values
    Tensor *output = tensor_zeros(SHAPE(batch, num_queries, v));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            for (int j = 0; j < num_keys; j++)
                for (int c = 0; c < v; c++)
                    AT3(output, b, i, c) += AT3(*weights, b, i, j) * AT3(values, b, j, c);
    return output;
}
