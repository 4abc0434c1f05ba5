/*
 * Exercise 6.10: clipping gradients by their global norm
 * (06_permutation_invariance/language_model.md, "Graded exercises").
 *
 * grads: count gradients, grads[i] of sizes[i] floats, changed in place as
 * torch.nn.utils.clip_grad_norm_ does: norm = sqrt of the sum of every
 * element's square, over all of them; when norm > max_norm, every element
 * is multiplied by max_norm / (norm + 1e-6). Returns norm, before clipping.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/clip_grad_norm.c
 */
#include "exercises.h"

double my_clip_grad_norm(float *const *grads, const int *sizes, int count, double max_norm)
{
    not_started();   /* delete this line when you begin */
    (void)grads;
    (void)sizes;
    (void)count;
    (void)max_norm;
    return 0.0;
}
