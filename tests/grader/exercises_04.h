/* exercises_04.h - chapter 04's exercises (04_transpose_qkv/README.md).
 * Legend: B = batch_size, T = num_queries (or keys), H = num_heads,
 * D = num_hiddens, d = D / H. */

/* 4.1 Where x[b][t][c] of x (B, T, D) lands in transpose_qkv's (B*H, T, d)
 * result, as a flat index into its data. */
size_t my_split_offset(int b, int t, int c, int T, int D, int H);
/* 4.2 x (B, T, D) -> (B*H, T, d), new: row b * H + h is head h of sequence b. */
Tensor *my_transpose_qkv(const Tensor *x, int num_heads);
/* 4.3 x (B*H, T, d) -> (B, T, D), new: the heads side by side again. */
Tensor *my_transpose_output(const Tensor *x, int num_heads);
/* 4.4 valid_lens (B,) -> (B*H,), or (B, T) -> (B*H, T), new: each
 * sequence's lengths once for each of its heads, as repeat_interleave. */
ValidLens *my_repeat_valid_lens(const ValidLens *valid_lens, int num_heads);
