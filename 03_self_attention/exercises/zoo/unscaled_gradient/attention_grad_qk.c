/*
 * Bug zoo: the scores' gradient, back to Q and K (exercise 3.8).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

void my_attention_grad_qk(const Tensor *queries, const Tensor *keys, const Tensor *grad_scores,
                          Tensor **grad_queries, Tensor **grad_keys)
{
    const int B = queries->shape[0], T = queries->shape[1], d = queries->shape[2];
    const int n_k = keys->shape[1];
    Tensor *dQ = tensor_zeros(SHAPE(B, T, d)), *dK = tensor_zeros(SHAPE(B, n_k, d));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < n_k; j++) {
                const float g = AT3(grad_scores, b, i, j);
                for (int p = 0; p < d; p++) {
                    AT3(dQ, b, i, p) += g * AT3(keys, b, j, p);      // dS K
                    AT3(dK, b, j, p) += g * AT3(queries, b, i, p);   // dS^T Q
                }
            }
    *grad_queries = dQ;
    *grad_keys = dK;
}
