/*
 * positional.c - d2l's sinusoidal positional encoding (introduced in
 * chapter 06). See positional.h.
 *
 * Legend: B = batch_size, T = number of tokens, D = num_hiddens.
 */
#include "positional.h"

#include <math.h>

/* -> PE (max_len, D) */
Tensor *positional_encoding(int max_len, int num_hiddens)
{
    if (max_len < 1 || num_hiddens < 1)
        die("max_len and num_hiddens must be positive, got %d and %d",
            max_len, num_hiddens);
    Tensor *PE = tensor_zeros(SHAPE(max_len, num_hiddens));
    for (int i = 0; i < max_len; i++)
        for (int col = 0; col < num_hiddens; col += 2) {
            /* Columns 2j and 2j+1 share one frequency 1 / 10000^(2j / D);
             * col is 2j. Low columns turn fast and tell neighbours apart,
             * high columns turn slowly and tell distant positions apart. */
            double angle = (double)i / pow(10000.0, (double)col / (double)num_hiddens);
            AT2(PE, i, col) = (float)sin(angle);
            if (col + 1 < num_hiddens)
                AT2(PE, i, col + 1) = (float)cos(angle);
        }
    return PE;
}

/* x (B, T, D) -> x + PE[:T] (B, T, D) */
Tensor *add_positional_encoding(const Tensor *x)
{
    tensor_check_shape("x", x, SHAPE(-1, -1, -1));
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    Tensor *PE = positional_encoding(T, D);
    Tensor *out = tensor_copy(x);
    /* The same table is added to every sequence of the batch: position i
     * gets PE[i] whatever the token there is. */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++)
                AT3(out, b, t, k) += AT2(PE, t, k);
    tensor_free(PE);
    return out;
}
