/*
 * Exercise 6.4, worked answer: one RoPE rotation.
 *
 * Pair i, (x[2i], x[2i+1]), is a point in a plane of its own, turned by
 * position * theta_i. The angle and its cosine and sine are computed in
 * double and each result rounded once to float, so a position of 100000
 * turns by the right angle (a float angle near 1e5 is off by up to 0.004).
 */
#include "exercises.h"

#include <math.h>

void my_rope_rotate(float *x, int d, int position)
{
    for (int i = 0; i < d / 2; i++) {
        double theta = pow(10000.0, -2.0 * i / d), angle = position * theta;
        double c = cos(angle), s = sin(angle);
        double a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = (float)(a * c - b * s);
        x[2 * i + 1] = (float)(a * s + b * c);
    }
}
