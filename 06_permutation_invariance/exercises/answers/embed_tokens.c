/*
 * Exercise 6.12, worked answer: a GPT's embedding.
 *
 * A lookup is a copy: the token's row of wte. The position's row of wpe
 * is added to it, so the same character at two places enters the stream
 * as two different vectors; that is what breaks the symmetry of chapter
 * 06 (attention alone cannot tell the order of its inputs).
 */
#include "exercises.h"

void my_embed_tokens(const float *wte, const float *wpe, const int *tokens, int B, int T,
                     int D, float *x)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *token_row = wte + (size_t)tokens[b * T + t] * D;
            const float *position_row = wpe + (size_t)t * D;   // t, whatever b and the token
            float *x_row = x + ((size_t)b * T + t) * D;
            for (int j = 0; j < D; j++)
                x_row[j] = token_row[j] + position_row[j];
        }
}
