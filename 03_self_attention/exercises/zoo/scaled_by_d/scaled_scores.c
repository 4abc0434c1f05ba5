/*
 * Bug zoo: the scaled scores (exercise 3.1).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

Tensor *my_scaled_scores(const Tensor *queries, const Tensor *keys)
{
    int batch = queries->shape[0], num_queries = queries->shape[1];
    int num_keys = keys->shape[1], d = queries->shape[2];
    /* the mean of d products, so the scores keep their size as d grows */
    float scale = 1.0f / (float)d;
    Tensor *scores = tensor_empty(SHAPE(batch, num_queries, num_keys));
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            for (int j = 0; j < num_keys; j++) {
                float dot = 0.0f;
                for (int p = 0; p < d; p++)
                    dot += AT3(queries, b, i, p) * AT3(keys, b, j, p);
                AT3(scores, b, i, j) = dot * scale;
            }
    return scores;
}
