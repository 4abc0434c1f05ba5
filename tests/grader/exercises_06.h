/* exercises_06.h - chapter 06's exercises (06_permutation_invariance/README.md).
 * Legend: B = batch_size, T = tokens, D = num_hiddens, d = a head's size. */

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
