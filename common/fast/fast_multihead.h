/*
 * fast_multihead.h - a fast forward pass for the multi-head attention layer
 * of multihead.h (the speed section of chapter 05).
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
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
 * Nothing of size T x K is ever allocated, and the projected Q, K, V exist
 * one head at a time per thread: memory is the inputs, the concatenated
 * heads and the output, (B*T + B*K) * D floats, plus (T + 2K) * d per
 * thread.
 * Evaluation only: there is no dropout and no attention-weights output.
 */
#ifndef FAST_MULTIHEAD_H
#define FAST_MULTIHEAD_H

#include "multihead.h"
#include "valid_lens.h"
#include "tensor.h"

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D), like multihead_forward in evaluation
 * mode. num_threads >= 1. */
Tensor *fast_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, int num_threads);

#endif
