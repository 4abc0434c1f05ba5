/*
 * multihead.h - the multi-head attention layer (introduced in chapter 05).
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value input sizes.
 *
 *   Q = queries W_q^T + b_q  (B, T, D)  -> transpose_qkv -> (B*H, T, d)
 *   K = keys    W_k^T + b_k  (B, K, D)  -> transpose_qkv -> (B*H, K, d)
 *   V = values  W_v^T + b_v  (B, K, D)  -> transpose_qkv -> (B*H, K, d)
 *   heads = dot_product_attention(Q, K, V, valid_lens repeated per head)
 *   output = transpose_output(heads) W_o^T + b_o         (B, T, D)
 *
 * Weights have PyTorch's layout (out_features, in_features): W_q (D, Dq),
 * W_k (D, Dk), W_v (D, Dv), W_o (D, D); biases (D,) or NULL when bias is off.
 */
#ifndef MULTIHEAD_H
#define MULTIHEAD_H

#include <stdbool.h>

#include "attention.h"
#include "random.h"
#include "valid_lens.h"
#include "tensor.h"

typedef struct {
    int query_size, key_size, value_size;   /* Dq, Dk, Dv */
    int num_hiddens, num_heads;             /* D, H */
    float dropout;                          /* on the attention weights, training only */
    bool bias;
    Tensor *W_q, *W_k, *W_v, *W_o;
    Tensor *b_q, *b_k, *b_v, *b_o;          /* NULL when bias is false */
} MultiHeadAttention;

/* Parameters drawn as nn.Linear's default does: weight and bias uniform in
 * [-1/sqrt(in_features), 1/sqrt(in_features)). num_hiddens must divide by
 * num_heads. */
MultiHeadAttention *multihead_new(int query_size, int key_size, int value_size,
                                  int num_hiddens, int num_heads, float dropout,
                                  bool bias, Rng *rng);
void multihead_free(MultiHeadAttention *layer);

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D). training (with rng) turns dropout on.
 * When attention_weights is not NULL it receives the per-head weights
 * (B, H, T, K); the caller frees it. */
Tensor *multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values,
                          const ValidLens *valid_lens, bool training, Rng *rng,
                          Tensor **attention_weights);

#endif
