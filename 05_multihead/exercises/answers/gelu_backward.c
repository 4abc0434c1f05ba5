/*
 * Exercise 5.7, worked answer: GELU, backwards.
 *
 * gelu(u) = 0.5 u (1 + t) with t = tanh(a(u)), a(u) = c (u + 0.044715 u^3).
 * The product rule: the first factor's slope gives 0.5 (1 + t); the
 * second's gives 0.5 u t', and t' = tanh'(a) a'(u) = (1 - t^2) c (1 + 3 *
 * 0.044715 u^2), the chain rule through tanh.
 */
#include "exercises.h"

#include <math.h>

void my_gelu_backward(const float *f, const float *grad_g, float *grad_f, int n)
{
    const float c = 0.7978845608f;   // the square root of 2 over pi
    for (int i = 0; i < n; i++) {
        const float u = f[i];
        const float t = tanhf(c * (u + 0.044715f * u * u * u));
        const float slope = 0.5f * (1.0f + t) +
                            0.5f * u * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * u * u);
        grad_f[i] = grad_g[i] * slope;
    }
}
