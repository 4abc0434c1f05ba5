/*
 * attention.h - scaled dot-product attention (introduced in chapter 03).
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (= number of
 * key-value pairs), d = query and key size, v = value size.
 *
 *   scores  = queries @ keys^T / sqrt(d)            (B, T, K)
 *   weights = masked_softmax(scores, valid_lens)    (B, T, K)
 *   output  = dropout(weights) @ values             (B, T, v)
 *
 * Dropout acts on the weights in training mode only; evaluation (dropout
 * NULL, or training false) is the default.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stdbool.h>

#include "random.h"
#include "valid_lens.h"
#include "tensor.h"

typedef struct {
    float p;          /* probability of zeroing a weight, in [0, 1) */
    bool training;    /* false: dropout does nothing */
    Rng *rng;         /* where the coin flips come from */
} Dropout;

/* In place: when training, zero each element with probability p and scale
 * the survivors by 1 / (1 - p), as nn.Dropout does. NULL does nothing; so
 * does p = 0, which draws nothing and so needs no rng. */
void dropout_inplace(Tensor *x, const Dropout *dropout);

/* The sizes of one attention call, read from its inputs. */
typedef struct {
    int batch_size, num_queries, num_keys;   /* B, T, K */
    int d, v;                                 /* query/key size, value size */
} AttentionSizes;

/* Stop with a message naming func unless queries (B, T, d), keys (B, K, d),
 * values (B, K, v) and valid_lens (NULL, (B,) or (B, T), each in [0, K])
 * fit together; returns their sizes. Every attention function checks its
 * inputs with this one rule. */
AttentionSizes attention_check_shapes(const char *func, const Tensor *queries,
                                      const Tensor *keys, const Tensor *values,
                                      const ValidLens *valid_lens);

/* queries (B, T, d), keys (B, K, d), values (B, K, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v). When attention_weights is not NULL it
 * receives the weights (B, T, K) after dropout; the caller frees both. */
Tensor *dot_product_attention(const Tensor *queries, const Tensor *keys,
                              const Tensor *values, const ValidLens *valid_lens,
                              const Dropout *dropout, Tensor **attention_weights);

#endif
