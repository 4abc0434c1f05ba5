/* Bug: a token's row of grad_wte is written, not added to: a token met
 * twice keeps the gradient of its last use only. */
#include "exercises.h"

void my_embed_tokens_backward(const float *grad_x, const int *tokens, int B, int T, int D,
                              float *grad_wte, float *grad_wpe)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *grad_row = grad_x + ((size_t)b * T + t) * D;
            float *token_row = grad_wte + (size_t)tokens[b * T + t] * D;
            float *position_row = grad_wpe + (size_t)t * D;
            for (int j = 0; j < D; j++) {
                token_row[j] = grad_row[j];
                position_row[j] += grad_row[j];
            }
        }
}
