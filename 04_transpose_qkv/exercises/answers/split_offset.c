/*
 * Exercise 4.1, worked answer: where an element lands.
 *
 * Column c of x is feature j = c % d of head h = c / d. In out (B*H, T, d)
 * it sits in row b * H + h, at position t, feature j:
 *
 *   x (B, T, D):    [b][t][ h*d + j ]
 *   out (B*H, T, d): [b*H + h][t][j]   -> ((b*H + h) * T + t) * d + j
 */
#include "exercises.h"

size_t my_split_offset(int b, int t, int c, int T, int D, int H)
{
    int d = D / H, h = c / d, j = c % d;
    return (((size_t)b * H + h) * T + t) * d + j;
}
