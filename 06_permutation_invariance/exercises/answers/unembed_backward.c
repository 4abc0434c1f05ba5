/*
 * Exercise 6.16, worked answer: the backward of the tied unembedding.
 *
 * logits[r][v] = sum_j h[r][j] wte[v][j]. Each number reaches the loss
 * through the other: dL/dh[r][j] = sum_v dL/dlogits[r][v] wte[v][j], and
 * dL/dwte[v][j] = sum_r dL/dlogits[r][v] h[r][j]. wte is used twice in
 * the model, at the embedding and here: its gradient is the sum of both
 * uses, so this part is added to what grad_wte holds.
 */
#include "exercises.h"

void my_unembed_backward(const float *h, const float *wte, const float *grad_logits, int R,
                         int D, int V, float *grad_h, float *grad_wte)
{
    // grad_h = grad_logits wte, (R, V) @ (V, D), written
    for (int r = 0; r < R; r++)
        for (int j = 0; j < D; j++) {
            float sum = 0.0f;
            for (int v = 0; v < V; v++)
                sum += grad_logits[(size_t)r * V + v] * wte[(size_t)v * D + j];
            grad_h[(size_t)r * D + j] = sum;
        }
    // grad_wte += grad_logits^T h, (V, R) @ (R, D), added to the embedding's part
    for (int v = 0; v < V; v++)
        for (int j = 0; j < D; j++) {
            float sum = 0.0f;
            for (int r = 0; r < R; r++)
                sum += grad_logits[(size_t)r * V + v] * h[(size_t)r * D + j];
            grad_wte[(size_t)v * D + j] += sum;
        }
}
