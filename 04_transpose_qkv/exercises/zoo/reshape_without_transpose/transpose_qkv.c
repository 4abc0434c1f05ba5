/*
 * Bug zoo: splitting into heads (exercise 4.2).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <string.h>

Tensor *my_transpose_qkv(const Tensor *x, int num_heads)
{
    int B = x->shape[0], T = x->shape[1], D = x->shape[2], d = D / num_heads;
    /* (B, T, D) viewed as (B, H, T, d), then as (B*H, T, d) */
    Tensor *out = tensor_empty(SHAPE(B * num_heads, T, d));
    memcpy(out->data, x->data, x->size * sizeof(float));
    return out;
}
