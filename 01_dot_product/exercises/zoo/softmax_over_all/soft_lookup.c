/*
 * Bug zoo: the soft lookup (exercise 1.4).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"
#include "softmax.h"

Tensor *my_soft_lookup(const Tensor *queries, const Tensor *keys, const Tensor *values)
{
    int num_queries = queries->shape[0], num_keys = keys->shape[0];
    int d = queries->shape[1], v = values->shape[1];
    // step 1: scores (T, n_k) = queries @ keys^T
    Tensor *weights = tensor_empty(SHAPE(num_queries, num_keys));
    for (int i = 0; i < num_queries; i++)
        for (int j = 0; j < num_keys; j++) {
            float dot = 0.0f;
            for (int p = 0; p < d; p++)
                dot += AT2(queries, i, p) * AT2(keys, j, p);
            AT2(weights, i, j) = dot;
        }
    // step 2: the scores become weights
    softmax_row(weights->data, num_queries * num_keys);
    // step 3: output (T, v) = weights @ values
    Tensor *output = tensor_zeros(SHAPE(num_queries, v));
    for (int i = 0; i < num_queries; i++)
        for (int j = 0; j < num_keys; j++)
            for (int c = 0; c < v; c++)
                AT2(output, i, c) += AT2(weights, i, j) * AT2(values, j, c);
    tensor_free(weights);
    return output;
}
