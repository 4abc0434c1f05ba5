/* clip_grad_norm.c - exercise 6.10's my_clip_grad_norm in place of the
 * repository's parameters_clip_grad_norm (common/learn/optim.c): the
 * language model's training step clips with it. */
#include <stdlib.h>

#include "exercises.h"
#include "learn/optim.h"
#include "memory.h"

double parameters_clip_grad_norm(const Parameter *params, int count, double max_norm)
{
    float **grads = checked_malloc((size_t)count + 1, sizeof *grads);
    int *sizes = checked_malloc((size_t)count + 1, sizeof *sizes);
    for (int i = 0; i < count; i++) {
        grads[i] = params[i].grad->data;
        sizes[i] = (int)params[i].grad->size;
    }
    const double norm = my_clip_grad_norm(grads, sizes, count, max_norm);
    free(grads);
    free(sizes);
    return norm;
}
