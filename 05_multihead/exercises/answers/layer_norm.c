/*
 * Exercise 5.6, worked answer: layer normalisation.
 *
 * Two passes over a row: its mean, then its variance as the mean of
 * (x - mean)^2, divided by D as PyTorch does (the row is the whole
 * population, not a sample of it). The one-pass E[x^2] - mean^2 loses its
 * digits when the values sit far from 0 and close together.
 */
#include "exercises.h"

#include <math.h>

void my_layer_norm(const float *x, const float *weight, const float *bias, float *y,
                   float *mean, float *rstd, int rows, int D)
{
    for (int r = 0; r < rows; r++) {
        const float *x_row = x + (size_t)r * D;
        float *y_row = y + (size_t)r * D;
        // pass 1: the mean
        float sum = 0.0f;
        for (int j = 0; j < D; j++)
            sum += x_row[j];
        const float m = sum / (float)D;
        // pass 2: the variance, divided by D
        float square_sum = 0.0f;
        for (int j = 0; j < D; j++)
            square_sum += (x_row[j] - m) * (x_row[j] - m);
        const float s = 1.0f / sqrtf(square_sum / (float)D + 1e-5f);
        // pass 3: normalise, scale and shift
        for (int j = 0; j < D; j++)
            y_row[j] = (x_row[j] - m) * s * weight[j] + bias[j];
        mean[r] = m;
        rstd[r] = s;
    }
}
