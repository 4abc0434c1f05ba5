/*
 * Exercise 6.15, worked answer: the tied unembedding.
 *
 * The score of token v at row r is the dot product of the stream's last
 * vector h[r] with token v's own embedding, wte[v]: a character scores
 * high where the stream points the way its input vector points. One
 * matrix serves both ends of the model (nanoGPT's weight tying), which
 * saves V * D numbers.
 */
#include "exercises.h"

void my_unembed(const float *h, const float *wte, int R, int D, int V, float *logits)
{
    for (int r = 0; r < R; r++) {
        const float *h_row = h + (size_t)r * D;
        for (int v = 0; v < V; v++) {
            const float *token_row = wte + (size_t)v * D;   // wte is (V, D): a row per token
            float sum = 0.0f;
            for (int j = 0; j < D; j++)
                sum += h_row[j] * token_row[j];
            logits[(size_t)r * V + v] = sum;
        }
    }
}
