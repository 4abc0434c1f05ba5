/*
 * fast_attention_layer.h - the fast multi-head layer as the pair of
 * functions a model runs (attention_layer.h), so that the models of
 * chapter 05's training page train through fast_multihead.h on several
 * threads.
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, D = num_hiddens.
 *
 * The forward keeps a FastMultiHeadCache (no attention weights: one
 * logsumexp per head and query) inside the model's LayerCache, and the
 * backward reads it back. The numbers are those of the clear layer within
 * the tests' tolerance, not bit for bit: the fast kernels add in another
 * order and fuse multiply-adds. For one thread count they are the same
 * bits on every run, and the backward's for any thread count.
 * No dropout: a layer with dropout > 0 in training mode stops.
 */
#ifndef FAST_ATTENTION_LAYER_H
#define FAST_ATTENTION_LAYER_H

#include "attention_layer.h"

/* The fast pair on num_threads threads (>= 1). */
AttentionLayer fast_attention_layer(int num_threads);

#endif
