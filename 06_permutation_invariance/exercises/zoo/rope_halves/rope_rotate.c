/*
 * Bug zoo: one RoPE rotation (exercise 6.4).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

void my_rope_rotate(float *x, int d, int position)
{
    int half = d / 2;
    for (int i = 0; i < half; i++) {
        double angle = position * pow(10000.0, -2.0 * i / d);
        double c = cos(angle), s = sin(angle);
        double a = x[i], b = x[i + half];
        x[i] = (float)(a * c - b * s);
        x[i + half] = (float)(a * s + b * c);
    }
}
