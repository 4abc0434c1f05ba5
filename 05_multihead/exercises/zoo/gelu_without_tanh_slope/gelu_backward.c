/*
 * Bug zoo: GELU, backwards (exercise 5.7).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

void my_gelu_backward(const float *f, const float *grad_g, float *grad_f, int n)
{
    const float c = 0.7978845608f;
    for (int i = 0; i < n; i++) {
        const float u = f[i];
        const float t = tanhf(c * (u + 0.044715f * u * u * u));
        /* gelu(u) = 0.5 u (1 + t): its slope */
        grad_f[i] = grad_g[i] * 0.5f * (1.0f + t);
    }
}
