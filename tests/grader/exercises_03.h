/* exercises_03.h - chapter 03's exercises (03_self_attention/README.md).
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, d = the size of a
 * query and a key, v = the size of a value, n = tokens when T = n_k = n. */

/* 3.1 queries (B, T, d), keys (B, n_k, d) -> scores (B, T, n_k)
 * = queries @ keys^T / sqrt(d), new. */
Tensor *my_scaled_scores(const Tensor *queries, const Tensor *keys);
/* 3.2 queries (B, T, d), keys (B, n_k, d), values (B, n_k, v), valid_lens
 * NULL, (B,) or (B, T) -> output (B, T, v), new; *weights receives the
 * attention weights (B, T, n_k), new. */
Tensor *my_dot_product_attention(const Tensor *queries, const Tensor *keys, const Tensor *values,
                     const ValidLens *valid_lens, Tensor **weights);
/* 3.3 X (B, n, d) -> causal self-attention (B, n, d), new: queries = keys =
 * values = X, and token i sees tokens 0 .. i. */
Tensor *my_causal_self_attention(const Tensor *X);
/* 3.4 One row of the softmax backward: weights p (n,) = softmax(s) (some may
 * be masked, exactly 0), grad_weights dL/dp (n,) -> grad_scores dL/ds (n,). */
void my_softmax_row_backward(const float *weights, const float *grad_weights,
                             float *grad_scores, int n);
/* 3.5 The values' gradient: weights P (B, T, n_k), grad_output dO (B, T, v)
 * -> grad_values dV = P^T dO (B, n_k, v), new. */
Tensor *my_attention_grad_values(const Tensor *weights, const Tensor *grad_output);

/* Exercises on the chapter's pages (streaming.md, backward.md). A running
 * softmax over some of a query's keys is a state (max, sum, acc): max m the
 * largest score seen, sum l = sum_j exp(s_j - m), acc (v,) = sum_j
 * exp(s_j - m) v_j, not yet divided by l. No key seen yet: m = -INFINITY,
 * l = 0, acc = 0; the output, once every key is seen, is acc / l. */

/* 3.6 Two states over different keys merged into the first: (*max, *sum,
 * acc (v,)) becomes the state over both. */
void my_online_softmax_merge(float *max, float *sum, float *acc, float other_max,
                             float other_sum, const float *other_acc, int v);
/* 3.7 One block of n keys, for one query: query (d,), keys (n, d), values
 * (n, v) -> the state (*max, *sum, acc (v,)) updated with the block's scores
 * q . k_j / sqrt(d). */
void my_streaming_block(const float *query, const float *keys, const float *values, int n,
                        int d, int v, float *max, float *sum, float *acc);
/* 3.8 The scores' gradient, back to the queries and keys: S = Q K^T / sqrt(d);
 * queries (B, T, d), keys (B, n_k, d), grad_scores dL/dS (B, T, n_k) ->
 * *grad_queries (B, T, d) and *grad_keys (B, n_k, d), new. */
void my_attention_grad_qk(const Tensor *queries, const Tensor *keys, const Tensor *grad_scores,
                          Tensor **grad_queries, Tensor **grad_keys);
