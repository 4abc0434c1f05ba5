/* exercises_01.h - chapter 01's exercises (01_dot_product/README.md).
 * Legend: T = num_queries, n_k = num_keys, d = the size of a query and a
 * key, v = the size of a value. */

/* 1.1 queries (T, d), keys (n_k, d) -> scores (T, n_k) = queries @ keys^T, new. */
Tensor *my_dot_scores(const Tensor *queries, const Tensor *keys);
/* 1.2 weights (T, n_k), values (n_k, v) -> (T, v) = weights @ values, new. */
Tensor *my_weighted_sum(const Tensor *weights, const Tensor *values);
/* 1.3 The dictionary: the index of the key (n_k rows of d in keys) whose dot
 * product with the query (d,) is largest; the first such key on a tie. */
int my_hard_lookup(const float *query, const float *keys, int num_keys, int d);
/* 1.4 queries (T, d), keys (n_k, d), values (n_k, v)
 * -> softmax(queries @ keys^T) @ values (T, v), new. */
Tensor *my_soft_lookup(const Tensor *queries, const Tensor *keys, const Tensor *values);
