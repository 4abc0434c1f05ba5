/*
 * Bug zoo: the sinusoidal positional encoding (exercise 6.5).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

Tensor *my_positional_encoding(int max_len, int num_hiddens)
{
    Tensor *PE = tensor_empty(SHAPE(max_len, num_hiddens));
    for (int p = 0; p < max_len; p++)
        for (int col = 0; col < num_hiddens; col++) {
            double angle = p / pow(10000.0, (double)(col - col % 2) / num_hiddens);
            AT2(PE, p, col) = (float)(col % 2 == 0 ? cos(angle) : sin(angle));
        }
    return PE;
}
