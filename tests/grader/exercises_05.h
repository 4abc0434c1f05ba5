/* exercises_05.h - chapter 05's exercises (05_multihead/README.md and
 * decoding.md). Legend: B = batch_size, T = num_queries, n_k = num_keys,
 * H = num_heads, D = num_hiddens, d = D / H, G = num_kv_heads. */

#include "kv_cache.h"
#include "multihead.h"

/* 5.1 x (..., in), weight (out, in), bias (out,) or NULL -> x W^T + b
 * (..., out), new: PyTorch's nn.Linear. */
Tensor *my_linear(const Tensor *x, const Tensor *weight, const Tensor *bias);
/* 5.2 The layer's forward in evaluation mode, from the repository's pieces:
 * queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv), valid_lens
 * NULL, (B,) or (B, T) -> output (B, T, D), new. */
Tensor *my_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                             const Tensor *keys, const Tensor *values,
                             const ValidLens *valid_lens);
/* 5.3 One decoding step's write: k, v (B, G*d), one token's keys and
 * values, go into the cache at position T = cache->length, which then
 * becomes T + 1. */
void my_kv_cache_append(KVCache *cache, const Tensor *k, const Tensor *v);
/* 5.4 Grouped-query attention: x (B*G, T, d), G key-value heads per
 * sequence -> (B*H, T, d), new, row b*H + h holding the key-value head
 * that query head h reads. */
Tensor *my_repeat_kv_heads(const Tensor *x, int num_kv_heads, int num_heads);
