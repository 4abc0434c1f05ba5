/*
 * Exercise 3.1, worked answer: the scaled scores.
 *
 * Each sequence b is its own product: query i of b against key j of b.
 * The scale is 1 / sqrt(d), d the size of one query, so that the scores'
 * spread does not grow with d (the chapter's section 3).
 */
#include "exercises.h"

#include <math.h>

Tensor *my_scaled_scores(const Tensor *queries, const Tensor *keys)
{
    int batch = queries->shape[0], num_queries = queries->shape[1];
    int num_keys = keys->shape[1], d = queries->shape[2];
    float scale = 1.0f / sqrtf((float)d);
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
