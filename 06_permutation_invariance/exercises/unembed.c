/*
 * Exercise 6.15: the tied unembedding
 * (06_permutation_invariance/your_gpt.md, "Exercises": three
 * hints there, each a step closer to the code).
 *
 * h (R, D), the stream after the last layer norm, and wte (V, D), the
 * token embedding -> logits (R, V) = h wte^T: logits[r][v] scores token v
 * at row r. Do not change the inputs.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/unembed.c
 */
#include "exercises.h"

void my_unembed(const float *h, const float *wte, int R, int D, int V, float *logits)
{
    not_started();   /* delete this line when you begin */
    (void)h;
    (void)wte;
    (void)R;
    (void)D;
    (void)V;
    (void)logits;
}
