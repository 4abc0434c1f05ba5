/*
 * Exercise 3.4, worked answer: the softmax, backwards.
 *
 * With p = softmax(s), dp_i/ds_j = p_i (delta_ij - p_j), so
 *     dL/ds_j = sum_i dL/dp_i p_i (delta_ij - p_j) = p_j (g_j - sum_i g_i p_i),
 * g = dL/dp: one dot product and one pass, never the (n, n) Jacobian. A
 * masked key has p_j = 0 and so a gradient of exactly 0.
 */
#include "exercises.h"

void my_softmax_row_backward(const float *weights, const float *grad_weights,
                             float *grad_scores, int n)
{
    // pass 1: the weighted mean of the incoming gradient, sum_i g_i p_i
    float dot = 0.0f;
    for (int i = 0; i < n; i++)
        dot += grad_weights[i] * weights[i];
    // pass 2: each score's gradient
    for (int j = 0; j < n; j++)
        grad_scores[j] = weights[j] * (grad_weights[j] - dot);
}
