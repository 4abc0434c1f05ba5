/*
 * Bug zoo: permuting the tokens (exercise 6.1).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <string.h>

Tensor *my_permute_tokens(const Tensor *x, const int *perm)
{
    int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    Tensor *out = tensor_empty(SHAPE(B, T, D));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            memcpy(out->data + ((size_t)b * T + perm[i]) * D, x->data + ((size_t)b * T + i) * D,
                   (size_t)D * sizeof(float));
    return out;
}
