/*
 * Bug zoo: a causal mask as valid_lens (exercise 2.4).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <stdlib.h>

ValidLens *my_causal_valid_lens(int batch, int num_queries, int num_keys)
{
    int *lens = malloc((size_t)batch * (size_t)num_queries * sizeof(int));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            lens[b * num_queries + i] = num_keys - num_queries + i;
    ValidLens *valid_lens = valid_lens_2d(lens, batch, num_queries);
    free(lens);
    return valid_lens;
}
