/*
 * head_gates.c - gates on the heads of a multi-head layer (introduced in
 * chapter 05's optional section on head importance). See head_gates.h.
 *
 * Legend: B = batch_size, T = num_queries, H = num_heads, D = num_hiddens,
 * d = D / H.
 */
#include "learn/head_gates.h"

#include "heads.h"

/* W_o (D, D), gates (H,) -> W_o with column c scaled by gates[c / d] */
Tensor *head_gated_W_o(const MultiHeadAttention *layer, const float *gates)
{
    const int D = layer->num_hiddens, H = layer->num_heads, d = D / H;
    Tensor *W_o = tensor_copy(layer->W_o);
    /* row i of W_o mixes all of concat into output i; its columns
     * h*d .. (h+1)*d - 1 are where head h comes in */
    for (int i = 0; i < D; i++)
        for (int h = 0; h < H; h++)
            for (int c = h * d; c < (h + 1) * d; c++)
                AT2(W_o, i, c) *= gates[h];
    return W_o;
}

/* concat (B, T, D), grad_concat (B, T, D) -> (B, H) */
Tensor *head_gate_grads(const Tensor *concat, const Tensor *grad_concat, int num_heads)
{
    tensor_check_shape("concat", concat, SHAPE(-1, -1, -1));
    const int B = concat->shape[0], T = concat->shape[1], D = concat->shape[2];
    tensor_check_shape("grad_concat", grad_concat, SHAPE(B, T, D));
    const int H = num_heads, d = head_size(D, H);
    Tensor *grads = tensor_zeros(SHAPE(B, H));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                /* one dot product of length d per head and row, in double
                 * so that summing many small terms loses nothing */
                const float *x = &AT3(concat, b, t, h * d);
                const float *g = &AT3(grad_concat, b, t, h * d);
                double dot = 0.0;
                for (int c = 0; c < d; c++)
                    dot += (double)x[c] * g[c];
                AT2(grads, b, h) += (float)dot;
            }
    return grads;
}
