/*
 * Exercise 1.1, worked answer: the scores of queries against keys.
 *
 * Both a query and a key are rows, so the dot product runs along a row of
 * each: queries @ keys^T without making the transpose.
 */
#include "exercises.h"

Tensor *my_dot_scores(const Tensor *queries, const Tensor *keys)
{
    int num_queries = queries->shape[0], num_keys = keys->shape[0], d = queries->shape[1];
    Tensor *scores = tensor_empty(SHAPE(num_queries, num_keys));
    for (int i = 0; i < num_queries; i++)
        for (int j = 0; j < num_keys; j++) {
            const float *q_row = queries->data + (size_t)i * d;
            const float *k_row = keys->data + (size_t)j * d;
            float dot = 0.0f;
            for (int p = 0; p < d; p++)
                dot += q_row[p] * k_row[p];
            AT2(scores, i, j) = dot;
        }
    return scores;
}
