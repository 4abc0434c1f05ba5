/*
 * Bug zoo: scaled dot-product attention (exercise 3.2).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

Tensor *my_dot_product_attention(const Tensor *queries, const Tensor *keys, const Tensor *values,
                                 const ValidLens *valid_lens, Tensor **weights)
{
    int batch = queries->shape[0], num_queries = queries->shape[1];
    int num_keys = keys->shape[1], d = queries->shape[2], v = values->shape[2];
    // pass 1: scores = queries @ keys^T / sqrt(d)
    Tensor *scores = tensor_empty(SHAPE(batch, num_queries, num_keys));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            for (int j = 0; j < num_keys; j++) {
                float dot = 0.0f;
                for (int p = 0; p < d; p++)
                    dot += AT3(queries, b, i, p) * AT3(keys, b, j, p);
                AT3(scores, b, i, j) = dot / sqrtf((float)d);
            }
    // pass 2: a stable softmax of the scores, dimension 1
    *weights = tensor_zeros(SHAPE(batch, num_queries, num_keys));
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < num_keys; j++) {
            float max = -INFINITY, sum = 0.0f;
            for (int i = 0; i < num_queries; i++)
                max = fmaxf(max, AT3(scores, b, i, j));
            for (int i = 0; i < num_queries; i++)
                sum += expf(AT3(scores, b, i, j) - max);
            for (int i = 0; i < num_queries; i++)
                AT3(*weights, b, i, j) = expf(AT3(scores, b, i, j) - max) / sum;
        }
    // then the mask: keys at or past valid_len get weight 0
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++) {
            int valid_len = valid_lens ? valid_len_at(valid_lens, b, i) : num_keys;
            for (int j = valid_len; j < num_keys; j++)
                AT3(*weights, b, i, j) = 0.0f;
        }
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
