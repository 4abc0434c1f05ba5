/* unembed_backward.c - exercise 6.16's my_unembed_backward in place of the
 * repository's unembed_backward (common/learn/embedding.c). */
#include "exercises.h"
#include "learn/embedding.h"

Tensor *unembed_backward(const LanguageKernels *kernels, const Tensor *h, const Tensor *wte,
                         const Tensor *grad_logits, Tensor *grad_wte)
{
    (void)kernels;
    const int D = wte->shape[1], V = wte->shape[0], R = (int)(h->size / (size_t)D);
    Tensor *grad_h = tensor_empty(h->ndim, h->shape);
    my_unembed_backward(h->data, wte->data, grad_logits->data, R, D, V, grad_h->data,
                        grad_wte->data);
    return grad_h;
}
