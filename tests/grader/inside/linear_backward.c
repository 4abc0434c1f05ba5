/* linear_backward.c - exercise 5.9's my_linear_backward in place of the
 * repository's linear_backward (common/ops.c). The exercise writes
 * grad_weight and grad_bias; the repository's adds them (a parameter's
 * gradient accumulates, and may be NULL for a frozen one): here they are
 * written into scratch, then added. */
#include <stdlib.h>

#include "exercises.h"
#include "memory.h"
#include "ops.h"

Tensor *linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                        Tensor *grad_weight, Tensor *grad_bias)
{
    const int in = x->shape[x->ndim - 1], out = weight->shape[0];
    const int rows = (int)(x->size / (size_t)in);
    Tensor *grad_x = tensor_zeros(x->ndim, x->shape);
    float *scratch = checked_malloc((size_t)out * in + (size_t)out, sizeof *scratch);
    float *gw = scratch, *gb = scratch + (size_t)out * in;
    my_linear_backward(x->data, weight->data, grad_y->data, grad_x->data, gw, gb, rows, in, out);
    if (grad_weight != NULL)
        for (size_t i = 0; i < (size_t)out * in; i++)
            grad_weight->data[i] += gw[i];
    if (grad_bias != NULL)
        for (int j = 0; j < out; j++)
            grad_bias->data[j] += gb[j];
    free(scratch);
    return grad_x;
}
