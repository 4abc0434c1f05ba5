/*
 * Exercise 4.2, worked answer: splitting into heads.
 *
 *   (B, T, D) --view--> (B, T, H, d) --swap T and H--> (B, H, T, d) --view--> (B*H, T, d)
 *
 * Loop over the result's indices and read each value where it came from.
 */
#include "exercises.h"

Tensor *my_transpose_qkv(const Tensor *x, int num_heads)
{
    int B = x->shape[0], T = x->shape[1], D = x->shape[2], H = num_heads, d = D / H;
    Tensor *out = tensor_empty(SHAPE(B * H, T, d));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < d; j++)
                    AT3(out, b * H + h, t, j) = AT3(x, b, t, h * d + j);
    return out;
}
