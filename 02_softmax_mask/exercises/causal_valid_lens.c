/*
 * Exercise 2.4: a causal mask as valid_lens
 * (02_softmax_mask/README.md, "Exercises").
 *
 * A decoder's query may see its own position and every position before
 * it, never one after. Here the T queries are the last T of n_k positions
 * (n_k >= T: when a model decodes, the keys of earlier steps come first).
 * Return a new 2-D valid_lens (B, T) that says so, the same for every
 * sequence; valid_lens_2d (valid_lens.h) makes one from an array.
 *
 * Grade it:  make check EXERCISE=02_softmax_mask/exercises/causal_valid_lens.c
 */
#include "exercises.h"

#include <stdlib.h>

ValidLens *my_causal_valid_lens(int batch, int num_queries, int num_keys)
{
    not_started();   /* delete this line when you begin */
    (void)num_keys;
    int *lens = calloc((size_t)batch * (size_t)num_queries, sizeof(int));
    ValidLens *valid_lens = valid_lens_2d(lens, batch, num_queries);
    free(lens);
    return valid_lens;
}
