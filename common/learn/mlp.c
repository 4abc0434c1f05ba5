/*
 * mlp.c - GELU forward and backward, the nonlinearity of a transformer
 * block's MLP (introduced in chapter 06's page "A language model"). See
 * mlp.h; the MLP's two linear layers are ops.h's linear.
 */
#include "learn/mlp.h"

#include <math.h>

#define GELU_C 0.7978845608028654f   /* sqrt(2 / pi) */
#define GELU_A 0.044715f

/* f (n,) -> g (n,) */
void gelu_forward(const float *f, float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float u = f[i];
        const float t = tanhf(GELU_C * (u + GELU_A * u * u * u));
        g[i] = 0.5f * u * (1.0f + t);
    }
}

/* grad_g (n,) -> grad_f (n,) */
void gelu_backward(const float *f, const float *grad_g, float *grad_f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float u = f[i];
        const float t = tanhf(GELU_C * (u + GELU_A * u * u * u));
        const float slope = 0.5f * (1.0f + t) +
                            0.5f * u * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * u * u);
        grad_f[i] = grad_g[i] * slope;
    }
}
