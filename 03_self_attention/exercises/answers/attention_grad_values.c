/*
 * Exercise 3.5, worked answer: the values' gradient.
 *
 * The forward's pass 4 is output[i][c] = sum_j P[i][j] values[j][c], so
 * value j's gradient gathers every query's gradient that it fed:
 *     dV[j][c] = sum_i P[i][j] dO[i][c]        dV = P^T dO (B, n_k, v)
 * A key no query sees has a column of zeros in P and a gradient of 0.
 */
#include "exercises.h"

Tensor *my_attention_grad_values(const Tensor *weights, const Tensor *grad_output)
{
    int batch = weights->shape[0], num_queries = weights->shape[1];
    int num_keys = weights->shape[2], v = grad_output->shape[2];
    Tensor *grad_values = tensor_zeros(SHAPE(batch, num_keys, v));
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < num_keys; j++)
            for (int i = 0; i < num_queries; i++)
                for (int c = 0; c < v; c++)
                    AT3(grad_values, b, j, c) += AT3(weights, b, i, j) * AT3(grad_output, b, i, c);
    return grad_values;
}
