/* dot_product_attention.c - exercise 3.2's my_dot_product_attention in
 * place of the repository's dot_product_attention (common/attention.c), for
 * make NN_chapter EXERCISE=FILE (tests/grader/inside_run). The exercise has
 * no dropout: in training mode the repository's cached version runs. */
#include "attention.h"
#include "exercises.h"

Tensor *dot_product_attention(const Tensor *queries, const Tensor *keys,
                              const Tensor *values, const ValidLens *valid_lens,
                              const Dropout *dropout, Tensor **attention_weights)
{
    if (dropout && dropout->training && dropout->p > 0.0f) {
        AttentionCache cache;
        Tensor *out = dot_product_attention_cache(queries, keys, values, valid_lens, dropout,
                                                  &cache);
        if (attention_weights)
            *attention_weights = tensor_copy(cache.weights);
        attention_cache_free(&cache);
        return out;
    }
    Tensor *weights = NULL;
    Tensor *out = my_dot_product_attention(queries, keys, values, valid_lens, &weights);
    if (attention_weights)
        *attention_weights = weights;
    else
        tensor_free(weights);
    return out;
}
