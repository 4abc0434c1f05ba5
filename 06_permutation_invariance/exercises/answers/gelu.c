/*
 * Exercise 6.14, worked answer: GELU in GPT-2's tanh form.
 *
 * gelu(u) = u Phi(u), Phi the standard normal's distribution function:
 * the input times the chance that a standard normal falls below it. GPT-2
 * computes Phi(u) as 0.5 (1 + tanh(c (u + 0.044715 u^3))), c = sqrt(2 /
 * pi), within 1e-3 of the exact 0.5 (1 + erf(u / sqrt 2)); a model trained
 * with one form runs with that form.
 */
#include "exercises.h"

#include <math.h>

void my_gelu(const float *f, float *g, int n)
{
    const float c = 0.7978845608f;   // the square root of 2 over pi
    for (int i = 0; i < n; i++) {
        const float u = f[i];
        const float phi = 0.5f * (1.0f + tanhf(c * (u + 0.044715f * u * u * u)));
        g[i] = u * phi;
    }
}
