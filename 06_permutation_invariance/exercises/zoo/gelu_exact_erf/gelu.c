/* Bug: the exact GELU, 0.5 u (1 + erf(u / sqrt 2)), where the model uses
 * GPT-2's tanh form: close, but not what it was trained with. */
#include "exercises.h"

#include <math.h>

void my_gelu(const float *f, float *g, int n)
{
    const float c = 0.7978845608f;   // the square root of 2 over pi
    for (int i = 0; i < n; i++) {
        const float u = f[i];
        const float phi = 0.5f * (1.0f + erff(u / sqrtf(2.0f)));   // the exact Phi
        (void)c;
        g[i] = u * phi;
    }
}
