/* Bug: wte read as a (D, V) matrix, element j of token v at j * V + v:
 * wte is (V, D), one row per token. */
#include "exercises.h"

void my_unembed(const float *h, const float *wte, int R, int D, int V, float *logits)
{
    for (int r = 0; r < R; r++) {
        const float *h_row = h + (size_t)r * D;
        for (int v = 0; v < V; v++) {
            float sum = 0.0f;
            for (int j = 0; j < D; j++)
                sum += h_row[j] * wte[(size_t)j * V + v];   // wte as (D, V)?
            logits[(size_t)r * V + v] = sum;
        }
    }
}
