/* multihead_forward.c - exercise 5.2's my_multihead_forward in place of the
 * repository's multihead_forward (common/multihead.c), for make NN_chapter
 * EXERCISE=FILE (tests/grader/inside_run). The exercise gives the output in
 * evaluation mode: the per-head weights a program draws, and a training
 * step's dropout, come from the repository's multihead_forward_cache. */
#include "exercises.h"
#include "multihead.h"

Tensor *multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values,
                          const ValidLens *valid_lens, bool training, Rng *rng,
                          Tensor **attention_weights)
{
    if (training || attention_weights) {
        MultiHeadCache cache;
        Tensor *out = multihead_forward_cache(layer, queries, keys, values, valid_lens,
                                              training, rng, &cache);
        if (attention_weights) {
            const int B = queries->shape[0], H = layer->num_heads;
            const int T = queries->shape[1], K = keys->shape[1];
            *attention_weights = tensor_reshape(attention_cache_dropped(&cache.attention),
                                                SHAPE(B, H, T, K));
        }
        multihead_cache_free(&cache);
        if (training)
            return out;
        tensor_free(out);
    }
    return my_multihead_forward(layer, queries, keys, values, valid_lens);
}
