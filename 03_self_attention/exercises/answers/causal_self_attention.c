/*
 * Exercise 3.3, worked answer: causal self-attention.
 *
 * Self-attention is attention with queries = keys = values = X; the causal
 * mask is chapter 02's 2-D valid_lens, valid_len = i + 1 for token i.
 */
#include "exercises.h"
#include "softmax.h"

#include <math.h>

Tensor *my_causal_self_attention(const Tensor *X)
{
    int batch = X->shape[0], n = X->shape[1], d = X->shape[2];
    // pass 1: scores = X X^T / sqrt(d)
    Tensor *scores = tensor_empty(SHAPE(batch, n, n));
    float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                float dot = 0.0f;
                for (int p = 0; p < d; p++)
                    dot += AT3(X, b, i, p) * AT3(X, b, j, p);
                AT3(scores, b, i, j) = dot * scale;
            }
    // pass 2: weights, token i seeing tokens 0 .. i
    ValidLens *causal = valid_lens_causal(batch, n);
    Tensor *weights = masked_softmax(scores, causal);
    // pass 3: output = weights @ X
    Tensor *output = tensor_zeros(SHAPE(batch, n, d));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int c = 0; c < d; c++)
                    AT3(output, b, i, c) += AT3(weights, b, i, j) * AT3(X, b, j, c);
    valid_lens_free(causal);
    tensor_free(weights);
    tensor_free(scores);
    return output;
}
