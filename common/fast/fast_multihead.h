/*
 * fast_multihead.h - fast forward and backward passes for the multi-head
 * attention layer of multihead.h (the speed section of chapter 05).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value input sizes.
 *
 * The same layer, the same weights, the same numbers as multihead_forward
 * (within 1e-5 of the output's magnitude), computed differently:
 *
 *   - each (sequence b, head h) pair is one job: project that head's
 *     queries, keys and values with d rows of W_q, W_k, W_v (the register-
 *     tile matmul of fast_matmul.h), run streaming attention on them, and
 *     write the (T, d) result straight into columns h*d .. h*d+d-1 of the
 *     concatenated output, where transpose_output would have put it;
 *   - the B * H jobs are shared out between threads;
 *   - W_o mixes the heads with the fast matmul, its rows split across threads.
 *
 * Nothing of size T x n_k is ever allocated, and the projected Q, K, V exist
 * one head at a time per thread: memory is the inputs, the concatenated
 * heads and the output, (B*T + B*n_k) * D floats, plus (T + 2 n_k) * d per
 * thread.
 * There is no dropout (both passes are those of evaluation mode, or of
 * training with dropout 0) and no attention-weights output.
 */
#ifndef FAST_MULTIHEAD_H
#define FAST_MULTIHEAD_H

#include "multihead.h"
#include "valid_lens.h"
#include "tensor.h"

/* queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D), like multihead_forward in evaluation
 * mode. num_threads >= 1. */
Tensor *fast_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, int num_threads);

/* ---- backward ---------------------------------------------------------------------
 * What the fast forward keeps, and what it costs in floats: no attention
 * weights (the clear MultiHeadCache's B*H*T*n_k floats), one logsumexp per
 * head and query instead, from which the streaming backward recomputes
 * them (fast/streaming_attention.h):
 *   queries, keys, values, valid_lens   borrowed: the caller keeps them alive
 *   Q (B, T, D), K, V (B, n_k, D)         B*T*D + 2*B*n_k*D: the projections,
 *                                       head h in columns h*d .. h*d+d-1
 *                                       (the layout before transpose_qkv)
 *   concat (B, T, D)                    B*T*D: the heads' outputs, W_o's input
 *   logsumexp (B*H, T)                  B*H*T
 * so B*(2T + 2n_k)*D + B*H*T floats, growing with T + n_k, never with T * n_k. */
typedef struct {
    const Tensor *queries, *keys, *values;   /* the inputs, borrowed */
    const ValidLens *valid_lens;             /* borrowed */
    Tensor *Q, *K, *V;                       /* (B, T, D), (B, n_k, D) x2 */
    Tensor *concat;                          /* (B, T, D) */
    Tensor *logsumexp;                       /* (B*H, T), row b*H + h */
} FastMultiHeadCache;

/* fast_multihead_forward that also fills cache (free it with
 * fast_multihead_cache_free). The same output, bit for bit. */
Tensor *fast_multihead_forward_cache(const MultiHeadAttention *layer, const Tensor *queries,
                                    const Tensor *keys, const Tensor *values,
                                    const ValidLens *valid_lens, int num_threads,
                                    FastMultiHeadCache *cache);

/* multihead_backward of multihead.h, fast, with the same convention:
 * grad_output (B, T, D) -> parameter gradients ADDED into grads (NULL:
 * none wanted), input gradients grad_queries (B, T, Dq), grad_keys
 * (B, n_k, Dk), grad_values (B, n_k, Dv) returned (new; a NULL pointer: not
 * computed). Passes in reverse: W_o's backward (fast_linear_backward_raw),
 * the streaming backward per (sequence, head) job shared between threads,
 * then the three projections' backward. Equal to multihead_backward
 * within 1e-5 of each gradient's magnitude (tests/test_fast.c); the same
 * bits for any thread count. */
void fast_multihead_backward(const MultiHeadAttention *layer, const FastMultiHeadCache *cache,
                             const Tensor *grad_output, MultiHeadGrads *grads,
                             Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                             int num_threads);
/* Frees the cache. Q, K, V and concat are not given back to the system
 * but kept (up to twelve tensors, the newest) for the next forward or
 * backward, which takes any of the size it needs instead of fresh memory;
 * the forward without a cache does the same with its concatenated heads,
 * the backward with its gradients of Q, K, V and concat. Memory the
 * system gives is cleared by the kernel on its first write, page by page,
 * which costs about a millisecond per 8 MB on the machines measured here. */
void fast_multihead_cache_free(FastMultiHeadCache *cache);

/* x (NULL is fine), an output or input gradient that the fast forward or
 * backward returned, is no longer needed: kept like the cache's tensors,
 * so that the next call writes into its memory (torch's `out=`, made
 * automatic), instead of freed. */
void fast_multihead_give_back(Tensor *x);

/* Gives the kept tensors back to the system (a program that is done with
 * the layer, or a test that counts memory). */
void fast_multihead_release_memory(void);

#endif
