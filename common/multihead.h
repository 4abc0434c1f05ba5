/*
 * multihead.h - the multi-head attention layer (introduced in chapter 05).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value input sizes.
 *
 *   Q = queries W_q^T + b_q  (B, T, D)  -> transpose_qkv -> (B*H, T, d)
 *   K = keys    W_k^T + b_k  (B, n_k, D)  -> transpose_qkv -> (B*H, n_k, d)
 *   V = values  W_v^T + b_v  (B, n_k, D)  -> transpose_qkv -> (B*H, n_k, d)
 *   heads = dot_product_attention(Q, K, V, valid_lens repeated per head)
 *   output = transpose_output(heads) W_o^T + b_o         (B, T, D)
 *
 * Weights have PyTorch's layout (out_features, in_features): W_q (D, Dq),
 * W_k (D, Dk), W_v (D, Dv), W_o (D, D); biases (D,) or NULL when bias is off.
 *
 * A layer whose H query heads share G < H key-value heads (num_kv_heads,
 * made by multihead_new_grouped) is grouped-query attention, a topic of
 * 05_multihead/decoding.md: attention_layer.h runs it, with this layer's stages
 * (the end of this header).
 *
 * Non-finite results, for every layer of the library (this one, attention,
 * the fast path in fast/): float32 arithmetic as IEEE 754 defines it, no
 * check and no clamping. Finite inputs can still overflow (queries near
 * 1e38 give an infinite projection, then NaN scores), and the clear and
 * fast paths, which sum in different orders, need not overflow at the same
 * place. The library returns such values as they come; whoever writes or
 * prints results checks them first, naming the stage that overflowed
 * (multihead_checked.h does it for 05_multihead/multihead --from),
 * so no NaN or infinity leaves a program unannounced.
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
    int num_kv_heads;                       /* G, dividing H; H for multi-head attention */
    float dropout;                          /* on the attention weights, training only */
    bool bias;
    Tensor *W_q, *W_k, *W_v, *W_o;
    Tensor *b_q, *b_k, *b_v, *b_o;          /* NULL when bias is false */
} MultiHeadAttention;

/* Parameters drawn as nn.Linear's default does: weight and bias uniform in
 * [-1/sqrt(in_features), 1/sqrt(in_features)). num_heads must split
 * num_hiddens (heads_split in heads.h): a caller checks its user's sizes
 * first, and a layer that breaks the rule is a bug that dies here. */
MultiHeadAttention *multihead_new(int query_size, int key_size, int value_size,
                                  int num_hiddens, int num_heads, float dropout,
                                  bool bias, Rng *rng);
/* The grouped layer: W_k and W_v have G*d rows (G = num_kv_heads, which
 * must divide num_heads). With G = H it draws the same numbers as
 * multihead_new. */
MultiHeadAttention *multihead_new_grouped(int query_size, int key_size, int value_size,
                                          int num_hiddens, int num_heads, int num_kv_heads,
                                          float dropout, bool bias, Rng *rng);
void multihead_free(MultiHeadAttention *layer);

/* A layer around weights that exist already (read from files): params are
 * W_q (D, Dq), W_k (G*d, Dk), W_v (G*d, Dv), W_o (D, D), then b_q (D,),
 * b_k, b_v (G*d,) and b_o (D,), all four biases or none (NULL). The sizes
 * come from their shapes, the heads from num_heads and num_kv_heads (H for
 * multi-head attention); dropout is 0. The layer borrows the tensors: the
 * caller keeps them alive, frees them itself and never gives the layer to
 * multihead_free. A loader checks its files first (heads_split and every
 * shape), so a shape that does not fit here is a bug, and dies. */
enum { MULTIHEAD_PARAMETERS = 8 };
MultiHeadAttention multihead_from_weights(int num_heads, int num_kv_heads,
                                          Tensor *const params[MULTIHEAD_PARAMETERS]);

/* queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D). training (with rng) turns dropout on.
 * When attention_weights is not NULL it receives the per-head weights
 * (B, H, T, n_k); the caller frees it. */
Tensor *multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values,
                          const ValidLens *valid_lens, bool training, Rng *rng,
                          Tensor **attention_weights);

/* ---- backward ------------------------------------------------------------
 * Gradients follow ops.h's convention: input gradients are returned (new),
 * parameter gradients are ADDED into a MultiHeadGrads, as PyTorch's .grad
 * accumulates: zero them before each step. */
typedef struct MultiHeadGrads {
    Tensor *W_q, *W_k, *W_v, *W_o;   /* same shapes as the layer's */
    Tensor *b_q, *b_k, *b_v, *b_o;   /* NULL where the layer has no such bias */
} MultiHeadGrads;
MultiHeadGrads *multihead_grads_new(const MultiHeadAttention *layer);   /* zeros */
void multihead_grads_free(MultiHeadGrads *grads);   /* NULL is fine */

/* What the forward keeps for the backward, and what it costs in floats:
 *   queries, keys, values, valid_lens   borrowed, 0: the caller keeps them
 *                                       alive until the backward has run
 *   Q (B*H, T, d), K, V (B*H, n_k, d)   B*T*D + 2*B*n_k*D: the projected
 *                                       inputs, split into heads (K and V
 *                                       as H heads, repeated when G < H)
 *   attention.weights (B*H, T, n_k)     B*H*T*n_k: the softmax output
 *   attention.dropout_scale             B*H*T*n_k more, in training mode with
 *                                       dropout > 0 only
 *   concat (B, T, D)                    B*T*D: the heads merged, W_o's input
 * so about B*(2T + 2*n_k)*D + B*H*T*n_k floats, the H attention matrices being
 * the large part when T and n_k grow (the streaming backward avoids them). */
typedef struct {
    const Tensor *queries, *keys, *values;   /* the inputs, borrowed: keep them alive */
    const ValidLens *valid_lens;             /* borrowed */
    Tensor *Q, *K, *V;                       /* projected and split: (B*H, T, d), (B*H, n_k, d) x2 */
    AttentionCache attention;                /* weights (B*H, T, n_k), dropout scale */
    Tensor *concat;                          /* (B, T, D): heads merged, input of W_o */
} MultiHeadCache;

/* multihead_forward that also fills cache (free it with
 * multihead_cache_free): the same passes, the same output, the same
 * dropout draws. */
Tensor *multihead_forward_cache(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, bool training, Rng *rng,
                               MultiHeadCache *cache);

/* grad_output (B, T, D) -> parameter gradients added into grads; input
 * gradients returned through grad_queries (B, T, Dq), grad_keys (B, n_k, Dk),
 * grad_values (B, n_k, Dv) (each may be NULL: not computed); grad_concat
 * (B, T, D), the gradient of the merged heads before W_o, returned when not
 * NULL (head importance uses it: the gradient of a gate on head h is the
 * sum over its d columns of concat * grad_concat). grads may be NULL when
 * only input gradients are wanted. */
void multihead_backward(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                        const Tensor *grad_output, MultiHeadGrads *grads,
                        Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                        Tensor **grad_concat);
/* Frees what the forward allocated (not the borrowed inputs). */
void multihead_cache_free(MultiHeadCache *cache);

/* ---- the layer in stages ---------------------------------------------------
 * multihead_forward_cache is: the checks, pass 1 (project, split into
 * heads), then passes 2 and 3 (attend, merge the heads, W_o); the backward
 * goes back through passes 3 and 2, then pass 1. A layer that splits its
 * keys and values its own way (grouped_forward_cache in attention_layer.h) writes
 * its own pass 1 and runs the rest with these. */

/* The inputs checked against the layer (die when they do not fit) and kept,
 * borrowed, in cache; everything else in cache set to NULL. */
void multihead_cache_inputs(const MultiHeadAttention *layer, const Tensor *queries,
                            const Tensor *keys, const Tensor *values, const ValidLens *valid_lens,
                            bool training, Rng *rng, MultiHeadCache *cache);
/* Passes 2 and 3: cache->Q (B*H, T, d), cache->K and cache->V (B*H, n_k, d)
 * -> output (B, T, D), the weights and concat kept in cache. */
Tensor *multihead_attend(const MultiHeadAttention *layer, bool training, Rng *rng,
                         MultiHeadCache *cache);
/* Passes 3 and 2 backwards: grad_output (B, T, D) -> W_o's and b_o's
 * gradients added into grads (NULL: none), grad_concat as multihead_backward
 * gives it, and the heads' gradients d_Q (B*H, T, d), d_K, d_V
 * (B*H, n_k, d) returned (new). */
void multihead_attend_backward(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                               const Tensor *grad_output, MultiHeadGrads *grads,
                               Tensor **grad_concat, Tensor **d_Q, Tensor **d_K, Tensor **d_V);

#endif
