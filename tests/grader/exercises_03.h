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
