/*
 * embedding.h - a token embedding, nn.Embedding's lookup table (introduced
 * in chapter 05's optional section "Attention that learns").
 *
 * Legend: V = vocabulary size (num_embeddings), D = embedding size
 * (embedding_dim), N = how many token ids are looked up (any shape).
 *
 * A word is an id in [0, V); its vector is one row of the weight (V, D).
 * The forward copies rows; the backward adds each output row's gradient
 * back into the row it came from, so a word that appears twice in a batch
 * gets both gradients added, as PyTorch's embedding backward does.
 */
#ifndef EMBEDDING_H
#define EMBEDDING_H

#include "random.h"
#include "tensor.h"

/* weight (V, D) drawn from N(0, 1), nn.Embedding's default. */
Tensor *embedding_new(int num_embeddings, int embedding_dim, Rng *rng);

/* weight (V, D), ids with shape (...), 1 to 3 dimensions -> out (..., D),
 * like nn.functional.embedding(ids, weight). Called as
 *     Tensor *x = embedding_forward(weight, ids, SHAPE(B, K));   // (B, K, D)
 * An id outside [0, V) is a programming error: it stops, naming it. */
Tensor *embedding_forward(const Tensor *weight, const int *ids, int ndim, const int *shape);

/* Backward of embedding_forward: grad_out (..., D) with the ids' shape in
 * front -> grad_weight (V, D) += grad_out row i into row ids[i]. The ids
 * are not differentiable, so nothing is returned. */
void embedding_backward(Tensor *grad_weight, const int *ids, const Tensor *grad_out);

#endif
