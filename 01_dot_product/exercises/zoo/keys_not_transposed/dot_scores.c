/*
 * Bug zoo: the scores of queries against keys (exercise 1.1).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

Tensor *my_dot_scores(const Tensor *queries, const Tensor *keys)
{
    int num_queries = queries->shape[0], num_keys = keys->shape[0], d = queries->shape[1];
    Tensor *scores = tensor_zeros(SHAPE(num_queries, num_keys));
    for (int i = 0; i < num_queries; i++)
        for (int j = 0; j < num_keys; j++)
            for (int p = 0; p < d; p++)
                AT2(scores, i, j) += AT2(queries, i, p) * keys->data[(size_t)p * num_keys + j];
    return scores;
}
