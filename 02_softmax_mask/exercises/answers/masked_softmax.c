/*
 * Exercise 2.3, worked answer: masked_softmax with 1-D and 2-D valid_lens.
 *
 * Every (b, q) row of n_k scores is one masked softmax; only the valid_len
 * that applies to it differs between the three kinds of mask.
 */
#include "exercises.h"

#include <math.h>
#include <string.h>

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
    Tensor *weights = tensor_empty(scores->ndim, scores->shape);
    memcpy(weights->data, scores->data, scores->size * sizeof(float));
    for (int b = 0; b < batch; b++)
        for (int q = 0; q < num_queries; q++) {
            float *row = weights->data + ((size_t)b * num_queries + q) * num_keys;
            int valid_len = length_of(valid_lens, b, q, num_queries, num_keys);
            float max = valid_len > 0 ? row[0] : 0.0f, sum = 0.0f;
            for (int j = 1; j < valid_len; j++)
                max = fmaxf(max, row[j]);
            for (int j = 0; j < valid_len; j++) {
                row[j] = expf(row[j] - max);
                sum += row[j];
            }
            for (int j = 0; j < num_keys; j++)
                row[j] = j < valid_len ? row[j] / sum : 0.0f;
        }
    return weights;
}
