/*
 * Exercise 3.4: the softmax, backwards
 * (03_self_attention/README.md, "Exercises"; backward.md derives it).
 *
 * weights p (n,) = softmax(s), some exactly 0 where a mask hid the key;
 * grad_weights (n,) = dL/dp -> grad_scores (n,) = dL/ds. Write into
 * grad_scores; do not change the inputs.
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/softmax_row_backward.c
 */
#include "exercises.h"

void my_softmax_row_backward(const float *weights, const float *grad_weights,
                             float *grad_scores, int n)
{
    not_started();   /* delete this line when you begin */
    (void)weights;
    (void)grad_weights;
    (void)grad_scores;
    (void)n;
}
