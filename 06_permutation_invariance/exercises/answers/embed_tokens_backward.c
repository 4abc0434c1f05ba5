/*
 * Exercise 6.13, worked answer: the backward of a GPT's embedding.
 *
 * x[b][t] = wte[tokens[b][t]] + wpe[t]: each row of x's gradient flows
 * back, unchanged, into the two rows it was made of. A token met twice
 * (or a position, once per sequence) receives every one of its rows:
 * the gradient of a lookup is a scatter-add. Both tables' gradients
 * already hold numbers (the tied unembedding adds its part to grad_wte):
 * add, never write.
 */
#include "exercises.h"

void my_embed_tokens_backward(const float *grad_x, const int *tokens, int B, int T, int D,
                              float *grad_wte, float *grad_wpe)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *grad_row = grad_x + ((size_t)b * T + t) * D;
            float *token_row = grad_wte + (size_t)tokens[b * T + t] * D;
            float *position_row = grad_wpe + (size_t)t * D;
            for (int j = 0; j < D; j++) {
                token_row[j] += grad_row[j];
                position_row[j] += grad_row[j];
            }
        }
}
