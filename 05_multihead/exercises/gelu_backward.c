/*
 * Exercise 5.7: GELU, backwards
 * (05_multihead/backward.md, "Exercises").
 *
 * gelu(f) = 0.5 f (1 + tanh(c (f + 0.044715 f^3))), c = sqrt(2 / pi), the
 * tanh form GPT-2 uses. f (n,), grad_g dL/dg (n,) of g = gelu(f) ->
 * grad_f dL/df (n,). Do not change the inputs.
 *
 * Grade it:  make check EXERCISE=05_multihead/exercises/gelu_backward.c
 */
#include "exercises.h"

void my_gelu_backward(const float *f, const float *grad_g, float *grad_f, int n)
{
    not_started();   /* delete this line when you begin */
    (void)f;
    (void)grad_g;
    (void)grad_f;
    (void)n;
}
