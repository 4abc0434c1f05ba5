/*
 * Bug zoo: masked_softmax with 1-D and 2-D valid_lens (exercise 2.3).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>
#include <string.h>

Tensor *my_masked_softmax(const Tensor *scores, const ValidLens *valid_lens)
{
    int batch = scores->shape[0], num_queries = scores->shape[1], num_keys = scores->shape[2];
    Tensor *weights = tensor_empty(scores->ndim, scores->shape);
    memcpy(weights->data, scores->data, scores->size * sizeof(float));
    for (int b = 0; b < batch; b++)
        for (int q = 0; q < num_queries; q++) {
            float *row = weights->data + ((size_t)b * num_queries + q) * num_keys;
            int valid_len = valid_lens ? valid_lens->data[b] : num_keys;
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
