/*
 * Exercise 3.8, worked answer: the scores' gradient, back to Q and K.
 *
 * Score S_ij = q_i . k_j / sqrt(d) depends on query i and key j alone, with
 * dS_ij/dq_i = k_j / sqrt(d) and dS_ij/dk_j = q_i / sqrt(d). Summing over
 * the scores each one reaches:
 *     dQ_i = sum_j dS_ij k_j / sqrt(d)      dQ = dS K / sqrt(d)
 *     dK_j = sum_i dS_ij q_i / sqrt(d)      dK = dS^T Q / sqrt(d)
 * one product each, as pass 1 of the forward was one product.
 */
#include "exercises.h"

#include <math.h>

void my_attention_grad_qk(const Tensor *queries, const Tensor *keys, const Tensor *grad_scores,
                          Tensor **grad_queries, Tensor **grad_keys)
{
    const int B = queries->shape[0], T = queries->shape[1], d = queries->shape[2];
    const int n_k = keys->shape[1];
    const float scale = 1.0f / sqrtf((float)d);
    Tensor *dQ = tensor_zeros(SHAPE(B, T, d)), *dK = tensor_zeros(SHAPE(B, n_k, d));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < n_k; j++) {
                const float g = AT3(grad_scores, b, i, j) * scale;
                for (int p = 0; p < d; p++) {
                    AT3(dQ, b, i, p) += g * AT3(keys, b, j, p);      // dS K
                    AT3(dK, b, j, p) += g * AT3(queries, b, i, p);   // dS^T Q
                }
            }
    *grad_queries = dQ;
    *grad_keys = dK;
}
