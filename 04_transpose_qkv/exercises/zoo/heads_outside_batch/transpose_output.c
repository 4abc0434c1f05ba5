/*
 * Bug zoo: merging the heads (exercise 4.3).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

Tensor *my_transpose_output(const Tensor *x, int num_heads)
{
    int H = num_heads, B = x->shape[0] / H, T = x->shape[1], d = x->shape[2];
    Tensor *out = tensor_empty(SHAPE(B, T, H * d));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < d; j++)
                    AT3(out, b, t, h * d + j) = AT3(x, h * B + b, t, j);
    return out;
}
