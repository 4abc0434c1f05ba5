/*
 * Exercise 1.4, worked answer: the soft lookup.
 *
 * Three steps, as the chapter takes them: scores = queries @ keys^T, a
 * softmax over each row (softmax_row subtracts the row's maximum, so scores
 * in the thousands do not overflow), then the weighted sum of values.
 */
#include "exercises.h"
#include "softmax.h"

#include <stdlib.h>

Tensor *my_soft_lookup(const Tensor *queries, const Tensor *keys, const Tensor *values)
{
    int num_queries = queries->shape[0], num_keys = keys->shape[0];
    int d = queries->shape[1], v = values->shape[1];
    Tensor *output = tensor_zeros(SHAPE(num_queries, v));
    float *row = malloc((size_t)num_keys * sizeof(float));
    for (int i = 0; i < num_queries; i++) {
        // step 1: the scores of query i
        for (int j = 0; j < num_keys; j++) {
            float dot = 0.0f;
            for (int p = 0; p < d; p++)
                dot += AT2(queries, i, p) * AT2(keys, j, p);
            row[j] = dot;
        }
        // step 2: its weights
        softmax_row(row, num_keys);
        // step 3: the weighted sum of value rows
        for (int j = 0; j < num_keys; j++)
            for (int c = 0; c < v; c++)
                AT2(output, i, c) += row[j] * AT2(values, j, c);
    }
    free(row);
    return output;
}
