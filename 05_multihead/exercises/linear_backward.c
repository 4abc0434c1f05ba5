/*
 * Exercise 5.9: a linear layer, backwards
 * (05_multihead/backward.md, "Exercises").
 *
 * y = x W^T + b, x (R, in), weight W (out, in), bias b (out,): from
 * grad_y (R, out) -> grad_x (R, in), grad_weight (out, in), grad_bias
 * (out,), all three written (not added into). Do not change the inputs.
 *
 * Grade it:  make check EXERCISE=05_multihead/exercises/linear_backward.c
 */
#include "exercises.h"

void my_linear_backward(const float *x, const float *weight, const float *grad_y,
                        float *grad_x, float *grad_weight, float *grad_bias, int rows, int in,
                        int out)
{
    not_started();   /* delete this line when you begin */
    (void)x;
    (void)weight;
    (void)grad_y;
    (void)grad_x;
    (void)grad_weight;
    (void)grad_bias;
    (void)rows;
    (void)in;
    (void)out;
}
