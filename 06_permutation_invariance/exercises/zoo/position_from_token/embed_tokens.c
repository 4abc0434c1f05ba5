/* Bug: the position's row is looked up by the token, wpe[tokens[b][t]],
 * not by the position t. */
#include "exercises.h"

void my_embed_tokens(const float *wte, const float *wpe, const int *tokens, int B, int T,
                     int D, float *x)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *token_row = wte + (size_t)tokens[b * T + t] * D;
            const float *position_row = wpe + (size_t)tokens[b * T + t] * D;   // the token's position?
            float *x_row = x + ((size_t)b * T + t) * D;
            for (int j = 0; j < D; j++)
                x_row[j] = token_row[j] + position_row[j];
        }
}
