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
