/*
 * Exercise 1.2, worked answer: the weighted sum of values.
 *
 * Row i of the output starts at zero and gains weights[i][j] times value
 * row j, for every key j: the i, j, c loop order reads both rows in order.
 */
#include "exercises.h"

Tensor *my_weighted_sum(const Tensor *weights, const Tensor *values)
{
    int num_queries = weights->shape[0], num_keys = weights->shape[1], v = values->shape[1];
    Tensor *output = tensor_zeros(SHAPE(num_queries, v));
    for (int i = 0; i < num_queries; i++)
        for (int j = 0; j < num_keys; j++)
            for (int c = 0; c < v; c++)
                AT2(output, i, c) += AT2(weights, i, j) * AT2(values, j, c);
    return output;
}
