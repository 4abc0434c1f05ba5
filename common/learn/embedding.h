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

#include "learn/language_kernels.h"
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

/* ---- a GPT's embedding and its tied unembedding (chapter 06's page "A
 * language model") --------------------------------------------------------------
 * Legend: B = batch_size, T = tokens of a sequence (T <= C), C = context,
 * V = vocabulary, D = num_hiddens.
 *
 * A token at position t enters the residual stream as its row of wte plus
 * position t's row of wpe; the stream leaves as scores against every row
 * of the same wte (the unembedding is tied to the embedding), so wte's
 * gradient is the sum of what its two uses send back. */

/* wte (V, D), wpe (C, D), tokens (B, T) -> x (B, T, D) (new),
 * x[b][t] = wte[tokens[b][t]] + wpe[t]. */
Tensor *embed_tokens(const Tensor *wte, const Tensor *wpe, const int *tokens, int batch_size,
                     int length);
/* grad_x (B, T, D) -> grad_wte (V, D) += row (b, t) into row tokens[b][t]
 * (a scatter-add: a token met twice gets both), grad_wpe (C, D) += the sum
 * over b of row (b, t) into row t. */
void embed_tokens_backward(const Tensor *grad_x, const int *tokens, Tensor *grad_wte,
                           Tensor *grad_wpe);
/* h (B, T, D), wte (V, D) -> logits (B, T, V) = h wte^T (new), through
 * the model's linear kernel (language_kernels.h). */
Tensor *unembed(const LanguageKernels *kernels, const Tensor *h, const Tensor *wte);
/* grad_logits (B, T, V) -> grad_h (B, T, D) = grad_logits wte (new), and
 * grad_wte (V, D) += grad_logits^T h: added to what is there, the
 * embedding's part coming in before or after. */
Tensor *unembed_backward(const LanguageKernels *kernels, const Tensor *h, const Tensor *wte,
                         const Tensor *grad_logits, Tensor *grad_wte);

#endif
