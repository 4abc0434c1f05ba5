/* exercises_02.h - chapter 02's exercises (02_softmax_mask/README.md).
 * Legend: B = batch_size, T = num_queries, n_k = num_keys. */

/* 2.1 In place over one row of n scores: a softmax that never overflows. */
void my_softmax_row(float *row, int n);
/* 2.2 In place: keys j >= valid_len get weight exactly 0, the first
 * valid_len share the weight; valid_len 0 gives a row of zeros. */
void my_masked_softmax_row(float *row, int n, int valid_len);
/* 2.3 scores (B, T, n_k), valid_lens 1-D (B,), 2-D (B, T) or NULL
 * -> weights (B, T, n_k), a new tensor. */
Tensor *my_masked_softmax(const Tensor *scores, const ValidLens *valid_lens);
/* 2.4 The causal mask as a 2-D valid_lens (B, T): the T queries are the
 * last T of n_k positions (n_k >= T), and each sees itself and every
 * position before it. */
ValidLens *my_causal_valid_lens(int batch, int num_queries, int num_keys);
