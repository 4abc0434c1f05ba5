/*
 * Exercise 6.5, worked answer: the sinusoidal positional encoding.
 *
 * Columns 2j and 2j + 1 share one frequency 1 / 10000^(2j / D): a point
 * going round the unit circle, sine in the even column, cosine in the odd
 * one. col below is 2j.
 */
#include "exercises.h"

#include <math.h>

Tensor *my_positional_encoding(int max_len, int num_hiddens)
{
    Tensor *PE = tensor_empty(SHAPE(max_len, num_hiddens));
    for (int p = 0; p < max_len; p++)
        for (int col = 0; col < num_hiddens; col += 2) {
            double angle = p / pow(10000.0, (double)col / num_hiddens);
            AT2(PE, p, col) = (float)sin(angle);
            if (col + 1 < num_hiddens)
                AT2(PE, p, col + 1) = (float)cos(angle);
        }
    return PE;
}
