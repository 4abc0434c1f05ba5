/*
 * multihead_example.h - the example of chapter 05's Part 3: a multi-head
 * layer and random inputs, drawn from one seed (introduced in chapter 05).
 *
 * multihead prints this example, and layer_files --to writes it as .npy
 * files (05_multihead/layer_files.c): both build it here, so the files
 * hold the layer the story printed for the same options.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (key-value pairs),
 * H = num_heads, D = num_hiddens.
 */
#ifndef MULTIHEAD_EXAMPLE_H
#define MULTIHEAD_EXAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "multihead.h"
#include "random.h"
#include "tensor.h"

typedef struct {
    int batch, queries, keys, hiddens, heads;   /* B, T, K, D, H */
    float dropout;
    bool bias;
    uint64_t seed;
} MultiheadExampleSizes;

/* d2l's check: 2 sequences of 4 queries and 6 key-value pairs, num_hiddens
 * 100 in 5 heads, dropout 0.5 (acting in training mode only), seed 0; its
 * mask is valid_lens [3, 2] */
#define MULTIHEAD_EXAMPLE_D2L \
    {.batch = 2, .queries = 4, .keys = 6, .hiddens = 100, .heads = 5, .dropout = 0.5f}

typedef struct {
    MultiHeadAttention *layer;   /* self-attention sizes: Dq = Dk = Dv = D */
    Tensor *X;                   /* (B, T, D) ~ normal(0, 1): the queries */
    Tensor *Y;                   /* (B, K, D) ~ normal(0, 1): keys and values */
    Rng rng;                     /* where the example's forward draws its dropout */
} MultiheadExample;

/* One generator, rng_new(seed), draws in this order: the layer's
 * parameters (as nn.Linear draws them), X, then Y; the forward on them
 * goes on with ex.rng for its dropout. The same sizes and seed give the
 * same example, whatever else a program draws. */
MultiheadExample multihead_example_new(const MultiheadExampleSizes *sizes);
void multihead_example_free(MultiheadExample *ex);

#endif
