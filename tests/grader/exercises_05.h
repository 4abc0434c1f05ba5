/* exercises_05.h - chapter 05's exercises (05_multihead/README.md and
 * its pages training.md, backward.md and decoding.md). Legend: B = batch_size, T = num_queries, n_k = num_keys,
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

/* 5.5 One Adam step (torch.optim.Adam, no weight decay), step t = 1, 2, ...:
 * param, m, v (n,) updated in place from grad (n,). */
void my_adam_step(float *param, const float *grad, float *m, float *v, int n, int step,
                  float lr, float beta1, float beta2, float eps);
/* 5.6 Layer normalisation: x (R, D), weight, bias (D,) -> y (R, D), and each
 * row's mean (R,) and rstd (R,) = 1 / sqrt(var + 1e-5), var divided by D. */
void my_layer_norm(const float *x, const float *weight, const float *bias, float *y,
                   float *mean, float *rstd, int rows, int D);
/* 5.7 GELU (tanh form) backwards: f, grad_g (n,) -> grad_f (n,) =
 * grad_g * gelu'(f). */
void my_gelu_backward(const float *f, const float *grad_g, float *grad_f, int n);
/* 5.8 One decoding step with a key-value cache: token (B, D) -> output
 * (B, D), new, the token joining the cache->length tokens cached. */
Tensor *my_decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token);
/* 5.9 y = x W^T + b backwards: x (R, in), weight (out, in), grad_y (R, out)
 * -> grad_x (R, in), grad_weight (out, in), grad_bias (out,), written. */
void my_linear_backward(const float *x, const float *weight, const float *grad_y,
                        float *grad_x, float *grad_weight, float *grad_bias, int rows, int in,
                        int out);
/* 5.10 The mean cross-entropy: logits (N, C), targets (N,) -> the loss,
 * returned, and grad_logits (N, C) = (softmax - onehot(targets)) / N. */
double my_cross_entropy(const float *logits, const int *targets, int N, int C,
                        float *grad_logits);
