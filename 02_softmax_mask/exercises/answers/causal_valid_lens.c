/*
 * Exercise 2.4, worked answer: a causal mask as valid_lens.
 *
 * Query i sits at position p = n_k - T + i, after the n_k - T keys of
 * earlier steps. It sees keys 0 .. p, that is p + 1 of them: valid_len
 * = n_k - T + i + 1. With n_k = T this is d2l's i + 1.
 */
#include "exercises.h"

#include <stdlib.h>

ValidLens *my_causal_valid_lens(int batch, int num_queries, int num_keys)
{
    int *lens = malloc((size_t)batch * (size_t)num_queries * sizeof(int));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            lens[b * num_queries + i] = num_keys - num_queries + i + 1;
    ValidLens *valid_lens = valid_lens_2d(lens, batch, num_queries);
    free(lens);
    return valid_lens;
}
