/*
 * Bug zoo: masked_softmax with 1-D and 2-D valid_lens (exercise 2.3).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

/* The valid_len of query q of sequence b. */
static int length_of(const ValidLens *valid_lens, int b, int q, int num_queries, int num_keys)
{
    if (valid_lens == NULL)
        return num_keys;
    if (valid_lens->ndim == 1)
        return valid_lens->data[b];
    return valid_lens->data[b * num_queries + q];
}

Tensor *my_masked_softmax(const Tensor *scores, const ValidLens *valid_lens)
{
    int batch = scores->shape[0], num_queries = scores->shape[1], num_keys = scores->shape[2];
    Tensor *weights = tensor_zeros(scores->ndim, scores->shape);
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < num_keys; j++) {
            /* the column of key j over the queries that may see it */
            float max = -INFINITY, sum = 0.0f;
            for (int q = 0; q < num_queries; q++)
                if (j < length_of(valid_lens, b, q, num_queries, num_keys))
                    max = fmaxf(max, AT3(scores, b, q, j));
            for (int q = 0; q < num_queries; q++)
                if (j < length_of(valid_lens, b, q, num_queries, num_keys)) {
                    AT3(weights, b, q, j) = expf(AT3(scores, b, q, j) - max);
                    sum += AT3(weights, b, q, j);
                }
            for (int q = 0; q < num_queries; q++)
                AT3(weights, b, q, j) /= sum > 0.0f ? sum : 1.0f;
        }
    return weights;
}
