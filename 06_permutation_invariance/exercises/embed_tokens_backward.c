/*
 * Exercise 6.13: the backward of a GPT's embedding
 * (06_permutation_invariance/your_gpt.md, "Exercises": three
 * hints there, each a step closer to the code).
 *
 * grad_x (B, T, D), the gradient of x = wte[tokens] + wpe[0 .. T-1], and
 * the tokens (B, T) -> grad_wte (V, D) and grad_wpe (C, D), ADDED into
 * (they already hold numbers: the tied unembedding adds its part of wte's
 * gradient to the same table).
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/embed_tokens_backward.c
 */
#include "exercises.h"

void my_embed_tokens_backward(const float *grad_x, const int *tokens, int B, int T, int D,
                              float *grad_wte, float *grad_wpe)
{
    not_started();   /* delete this line when you begin */
    (void)grad_x;
    (void)tokens;
    (void)B;
    (void)T;
    (void)D;
    (void)grad_wte;
    (void)grad_wpe;
}
