/*
 * Exercise 4.3, worked answer: merging the heads.
 *
 *   (B*H, T, d) --view--> (B, H, T, d) --swap H and T--> (B, T, H, d) --view--> (B, T, D)
 *
 * Exactly the inverse of exercise 4.2's map: every element goes back.
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
                    AT3(out, b, t, h * d + j) = AT3(x, b * H + h, t, j);
    return out;
}
