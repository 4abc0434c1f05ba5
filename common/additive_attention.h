/*
 * additive_attention.h - additive attention, Bahdanau's scoring function
 * (introduced in chapter 03's page additive.md), d2l's AdditiveAttention.
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, q = query size,
 * k = key size, v = value size, h = num_hiddens (the hidden layer of the
 * score).
 *
 *   scores[b, i, j] = w_v . tanh(W_q queries[b, i] + W_k keys[b, j])   (B, T, n_k)
 *   weights = masked_softmax(scores, valid_lens)                        (B, T, n_k)
 *   output  = dropout(weights) @ values                                 (B, T, v)
 *
 * The score is a one-hidden-layer network of the query and the key
 * together, so queries and keys may have different sizes (q and k), and
 * nothing is divided by sqrt(d). Weights use PyTorch's nn.Linear layout
 * without bias, as d2l's module has them: W_q (h, q), W_k (h, k),
 * w_v (1, h). Masks and dropout follow dot_product_attention (attention.h).
 */
#ifndef ADDITIVE_ATTENTION_H
#define ADDITIVE_ATTENTION_H

#include "attention.h"
#include "random.h"
#include "tensor.h"
#include "valid_lens.h"

typedef struct {
    Tensor *W_q;   /* (h, q) */
    Tensor *W_k;   /* (h, k) */
    Tensor *w_v;   /* (1, h) */
} AdditiveAttention;

/* New weights drawn as nn.Linear(in, out, bias=False) draws them, uniform
 * in [-1/sqrt(in), 1/sqrt(in)), from rng: W_q, then W_k, then w_v. */
AdditiveAttention additive_attention_new(int query_size, int key_size, int num_hiddens,
                                         Rng *rng);
/* Frees the three weights and sets them to NULL (the struct is the caller's). */
void additive_attention_free(AdditiveAttention *layer);

/* queries (B, T, q), keys (B, n_k, k), values (B, n_k, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v). When attention_weights is not NULL it
 * receives the weights (B, T, n_k) after dropout; the caller frees both.
 * Shapes that do not fit stop with a message naming the tensor. */
Tensor *additive_attention(const AdditiveAttention *layer, const Tensor *queries,
                           const Tensor *keys, const Tensor *values,
                           const ValidLens *valid_lens, const Dropout *dropout,
                           Tensor **attention_weights);

#endif
