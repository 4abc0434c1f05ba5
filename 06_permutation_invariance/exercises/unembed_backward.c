/*
 * Exercise 6.16: the backward of the tied unembedding
 * (06_permutation_invariance/your_gpt.md, "Exercises": three
 * hints there, each a step closer to the code).
 *
 * h (R, D), wte (V, D) and grad_logits (R, V), the gradient of logits =
 * h wte^T -> grad_h (R, D), written, and grad_wte (V, D), ADDED into (it
 * holds the embedding's part of the same table's gradient).
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/unembed_backward.c
 */
#include "exercises.h"

void my_unembed_backward(const float *h, const float *wte, const float *grad_logits, int R,
                         int D, int V, float *grad_h, float *grad_wte)
{
    not_started();   /* delete this line when you begin */
    (void)h;
    (void)wte;
    (void)grad_logits;
    (void)R;
    (void)D;
    (void)V;
    (void)grad_h;
    (void)grad_wte;
}
