/*
 * Exercise 6.10, worked answer: clipping gradients by their global norm.
 *
 * One norm for all the gradients, as if they were one vector, and one
 * factor for all: the step keeps its direction and only gets shorter.
 * The squares are summed in double: a gradient of 1e20 squares past
 * float's range.
 */
#include "exercises.h"

#include <math.h>

double my_clip_grad_norm(float *const *grads, const int *sizes, int count, double max_norm)
{
    // pass 1: the norm of everything
    double square_sum = 0.0;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < sizes[i]; j++)
            square_sum += (double)grads[i][j] * grads[i][j];
    const double norm = sqrt(square_sum);
    // pass 2: one factor for every element, at most 1: it only ever shrinks them
    const double coef = fmin(max_norm / (norm + 1e-6), 1.0);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < sizes[i]; j++)
            grads[i][j] *= (float)coef;
    return norm;
}
