/*
 * Exercise 6.8: layer normalisation, backwards
 * (06_permutation_invariance/language_model.md, "Graded exercises").
 *
 * grad_y, x (R, D), weight (D,), and the forward's mean, rstd (R,) ->
 * grad_x (R, D), grad_weight (D,), grad_bias (D,), all three written (not
 * added into). xhat = (x - mean) * rstd, y = xhat * weight + bias. Do not
 * change the inputs.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/layer_norm_backward.c
 */
#include "exercises.h"

void my_layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                            const float *mean, const float *rstd, float *grad_x,
                            float *grad_weight, float *grad_bias, int rows, int D)
{
    not_started();   /* delete this line when you begin */
    (void)grad_y;
    (void)x;
    (void)weight;
    (void)mean;
    (void)rstd;
    (void)grad_x;
    (void)grad_weight;
    (void)grad_bias;
    (void)rows;
    (void)D;
}
