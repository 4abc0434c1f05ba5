/* exercises_06.h - chapter 06's exercises (06_permutation_invariance/README.md
 * and its pages).
 * Legend: B = batch_size, T = tokens, D = num_hiddens, d = a head's size. */

#include "random.h"

/* 6.1 x (B, T, D), perm (T,) -> P x (B, T, D), new: out[b][i] = x[b][perm[i]]. */
Tensor *my_permute_tokens(const Tensor *x, const int *perm);
/* 6.2 perm (n,) -> inverse (n,): inverse[perm[i]] = i. */
void my_permutation_inverse(const int *perm, int *inverse, int n);
/* 6.3 max |f(P X) - P f(X)| over every element, for f mapping (B, T, D) to
 * a new (B, T, D) tensor: how far f is from equivariance under perm. */
float my_equivariance_gap(Tensor *(*f)(const Tensor *X), const Tensor *X, const int *perm);
/* 6.4 x (d,), d even, a query or key at `position` -> rotated in place by
 * RoPE: pair (x[2i], x[2i+1]) turned by the angle position * 10000^(-2i/d). */
void my_rope_rotate(float *x, int d, int position);
/* 6.5 -> PE (max_len, D), new: PE[p][2j] = sin(p / 10000^(2j/D)),
 * PE[p][2j+1] = cos(p / 10000^(2j/D)). */
Tensor *my_positional_encoding(int max_len, int num_hiddens);
/* 6.6 ALiBi's bias of head h (1 .. H): bias (T, n_k) = -m_h |i - j|, the
 * paper's slopes m_h (alibi.h states them). */
void my_alibi_bias(int num_heads, int head, int num_queries, int num_keys, float *bias);
/* 6.7 weights (B, T, T) of one head -> its previous-token score: the mean,
 * over every sequence b and query t >= 1, of the weight on key t - 1 (0
 * when T = 1). */
double my_previous_token_score(const Tensor *weights);
/* 6.8 Layer normalisation backwards: grad_y, x (R, D), weight (D,), the
 * forward's mean, rstd (R,) -> grad_x (R, D), grad_weight, grad_bias (D,),
 * written. */
void my_layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                            const float *mean, const float *rstd, float *grad_x,
                            float *grad_weight, float *grad_bias, int rows, int D);
/* 6.9 A token drawn from softmax(logits / temperature), logits (V,), with
 * one uniform draw rng_uniform(rng): the first token whose running sum of
 * probabilities passes it; temperature 0: the largest logit (the first),
 * drawing nothing. */
int my_sample_token(const float *logits, int vocab, float temperature, Rng *rng);
/* 6.10 Clipping by global norm: count gradients, grads[i] of sizes[i]
 * floats, multiplied in place by max_norm / (norm + 1e-6) when the norm of
 * them all together exceeds max_norm; returns that norm before clipping
 * (torch.nn.utils.clip_grad_norm_). */
double my_clip_grad_norm(float *const *grads, const int *sizes, int count, double max_norm);
/* 6.11 A learned relative bias: table (2 R + 1,) one number per distance j - i
 * from -R to R, further ones clipped to -R or R -> bias (T, n_k),
 * bias[i][j] = table[clip(j - i, -R, R) + R]. */
void my_relative_bias(const float *table, int max_distance, int num_queries, int num_keys,
                      float *bias);

/* ---- the language model's pieces (06_permutation_invariance/your_gpt.md) ----
 * Legend: B = batch_size, T = tokens of a sequence, R = B * T rows,
 * V = vocabulary, C = context, D = num_hiddens, n = numbers of a tensor. */
#include "learn/gpt_block.h"

/* 6.12 The embedding: wte (V, D), wpe (C, D), tokens (B, T), T <= C ->
 * x (B, T, D), x[b][t] = wte[tokens[b][t]] + wpe[t]. */
void my_embed_tokens(const float *wte, const float *wpe, const int *tokens, int B, int T,
                     int D, float *x);
/* 6.13 Its backward: grad_x (B, T, D) -> grad_wte (V, D) += row (b, t) into
 * row tokens[b][t], grad_wpe (C, D) += row (b, t) into row t: both ADDED
 * into what they hold. */
void my_embed_tokens_backward(const float *grad_x, const int *tokens, int B, int T, int D,
                              float *grad_wte, float *grad_wpe);
/* 6.14 GELU (tanh form): f (n,) -> g (n,) = 0.5 f (1 + tanh(c (f + 0.044715
 * f^3))), c = sqrt(2 / pi). */
void my_gelu(const float *f, float *g, int n);
/* 6.15 The tied unembedding: h (R, D), wte (V, D) -> logits (R, V) = h wte^T. */
void my_unembed(const float *h, const float *wte, int R, int D, int V, float *logits);
/* 6.16 Its backward: grad_logits (R, V) -> grad_h (R, D) = grad_logits wte,
 * written; grad_wte (V, D) += grad_logits^T h, ADDED to the embedding's part. */
void my_unembed_backward(const float *h, const float *wte, const float *grad_logits, int R,
                         int D, int V, float *grad_h, float *grad_wte);
/* 6.17 One AdamW step: param (n,) *= 1 - lr * weight_decay, then Adam's step
 * (exercise 5.5) on param, m, v (n,) from grad (n,), step t = 1, 2, ... */
void my_adamw_step(float *param, const float *grad, float *m, float *v, int n, int step,
                   float lr, float beta1, float beta2, float eps, float weight_decay);
/* 6.18 The learning rate at step s = 0, 1, ...: lr (s + 1) / (warmup + 1)
 * while s < warmup, then a cosine from lr down to min_lr at decay_steps,
 * min_lr from there on. */
double my_lr_schedule(int step, double lr, double min_lr, int warmup, int decay_steps);
/* 6.19 One block: x (B, T, D), causal = valid_lens_causal(B, T) -> out
 * (B, T, D), new: x_mid = x + attention(ln_1(x)), out = x_mid +
 * mlp(ln_2(x_mid)); every field of cache filled as block_backward reads
 * it, except cache->x (the caller's). */
Tensor *my_block_forward(const Block *block, const Tensor *x, const ValidLens *causal,
                         BlockCache *cache);
