/*
 * Bug zoo: grouped-query attention's shared heads (exercise 5.4).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <string.h>

Tensor *my_repeat_kv_heads(const Tensor *x, int num_kv_heads, int num_heads)
{
    int G = num_kv_heads, H = num_heads, B = x->shape[0] / G;
    int T = x->shape[1], d = x->shape[2];
    size_t row = (size_t)T * d;
    Tensor *out = tensor_empty(SHAPE(B * H, T, d));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            memcpy(out->data + ((size_t)b * H + h) * row,
                   x->data + ((size_t)b * G + h % G) * row, row * sizeof(float));
    return out;
}
