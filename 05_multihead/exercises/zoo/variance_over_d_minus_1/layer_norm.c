/*
 * Bug zoo: layer normalisation (exercise 5.6).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

void my_layer_norm(const float *x, const float *weight, const float *bias, float *y,
                   float *mean, float *rstd, int rows, int D)
{
    for (int r = 0; r < rows; r++) {
        const float *x_row = x + (size_t)r * D;
        float *y_row = y + (size_t)r * D;
        float sum = 0.0f;
        for (int j = 0; j < D; j++)
            sum += x_row[j];
        const float m = sum / (float)D;
        float square_sum = 0.0f;
        for (int j = 0; j < D; j++)
            square_sum += (x_row[j] - m) * (x_row[j] - m);
        const float s = 1.0f / sqrtf(square_sum / (float)(D - 1) + 1e-5f);
        for (int j = 0; j < D; j++)
            y_row[j] = (x_row[j] - m) * s * weight[j] + bias[j];
        mean[r] = m;
        rstd[r] = s;
    }
}
