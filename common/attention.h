/*
 * attention.h - scaled dot-product attention (introduced in chapter 03).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys (= number of
 * key-value pairs), d = query and key size, v = value size.
 *
 *   scores  = queries @ keys^T / sqrt(d)            (B, T, n_k)
 *   weights = masked_softmax(scores, valid_lens)    (B, T, n_k)
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
    int batch_size, num_queries, num_keys;   /* B, T, n_k */
    int d, v;                                 /* query/key size, value size */
} AttentionSizes;

/* Stop (die) with a message unless queries (B, T, d), keys (B, n_k, d),
 * values (B, n_k, v) and valid_lens (NULL, (B,) or (B, T), each in [0, n_k])
 * fit together; returns their sizes. Every attention function checks its
 * inputs with this one rule. */
AttentionSizes attention_check_shapes(const Tensor *queries, const Tensor *keys,
                                      const Tensor *values, const ValidLens *valid_lens);

/* queries (B, T, d), keys (B, n_k, d), values (B, n_k, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v). When attention_weights is not NULL it
 * receives the weights (B, T, n_k) after dropout; the caller frees both. */
Tensor *dot_product_attention(const Tensor *queries, const Tensor *keys,
                              const Tensor *values, const ValidLens *valid_lens,
                              const Dropout *dropout, Tensor **attention_weights);

/* ---- backward ------------------------------------------------------------
 * What the forward keeps for its backward. Memory: weights B*T*n_k floats,
 * and as many again for the dropout scale in training mode. */
typedef struct {
    Tensor *weights;         /* (B, T, n_k) softmax output, before dropout */
    Tensor *dropout_scale;   /* (B, T, n_k) 0 or 1/(1-p) as drawn; NULL without dropout */
} AttentionCache;

/* dot_product_attention that also keeps what the backward needs: the same
 * output, drawing the same dropout coin flips from dropout->rng. */
Tensor *dot_product_attention_cache(const Tensor *queries, const Tensor *keys,
                                   const Tensor *values, const ValidLens *valid_lens,
                                   const Dropout *dropout, AttentionCache *cache);

/* queries (B, T, d), keys (B, n_k, d), values (B, n_k, v), cached by the
 * forward, grad_output (B, T, v) -> grad_queries (B, T, d),
 * grad_keys (B, n_k, d), grad_values (B, n_k, v), each new, or not computed
 * when its pointer is NULL:
 *   A = P * scale (dropout's mask, or P)   dV = A^T dO,   dA = dO V^T
 *   dP = dA * scale,   dS = P * (dP - rowsum(dP * P)),   S = Q K^T / sqrt(d)
 *   dQ = dS K / sqrt(d),   dK = dS^T Q / sqrt(d) */
void dot_product_attention_backward(const Tensor *queries, const Tensor *keys,
                                    const Tensor *values, const AttentionCache *cache,
                                    const Tensor *grad_output, Tensor **grad_queries,
                                    Tensor **grad_keys, Tensor **grad_values);
/* The weights after dropout (B, T, n_k), new: what pass 4 multiplied the
 * values by, and what dot_product_attention returns as its weights. */
Tensor *attention_cache_dropped(const AttentionCache *cache);
/* Frees the cached tensors and sets them to NULL (the struct is the caller's). */
void attention_cache_free(AttentionCache *cache);

#endif
