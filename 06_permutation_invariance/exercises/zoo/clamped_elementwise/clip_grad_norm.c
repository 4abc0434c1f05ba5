/* Bug: each element clamped to [-max_norm, max_norm] on its own: the
 * clipped gradient points elsewhere, and its norm can stay far above
 * max_norm. */
#include "exercises.h"

#include <math.h>

double my_clip_grad_norm(float *const *grads, const int *sizes, int count, double max_norm)
{
    double square_sum = 0.0;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < sizes[i]; j++) {
            square_sum += (double)grads[i][j] * grads[i][j];
            grads[i][j] = fmaxf(-(float)max_norm, fminf((float)max_norm, grads[i][j]));
        }
    return sqrt(square_sum);
}
