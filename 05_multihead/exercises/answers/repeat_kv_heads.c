/*
 * Exercise 5.4, worked answer: grouped-query attention's shared heads.
 *
 * The H query heads come in G groups of H / G consecutive heads; group g
 * reads key-value head g. So query head h reads head h / (H / G), and each
 * key-value head is copied H / G times in a row, like
 * torch.repeat_interleave(kv, H // G, dim=1).
 */
#include "exercises.h"

#include <string.h>

Tensor *my_repeat_kv_heads(const Tensor *x, int num_kv_heads, int num_heads)
{
    int G = num_kv_heads, H = num_heads, B = x->shape[0] / G;
    int T = x->shape[1], d = x->shape[2], group = H / G;
    size_t row = (size_t)T * d;
    Tensor *out = tensor_empty(SHAPE(B * H, T, d));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            memcpy(out->data + ((size_t)b * H + h) * row,
                   x->data + ((size_t)b * G + h / group) * row, row * sizeof(float));
    return out;
}
