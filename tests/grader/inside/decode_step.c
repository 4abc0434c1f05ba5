/* decode_step.c - exercise 5.8's my_decode_step in place of the
 * repository's decode_step (common/kv_cache.c): each block's attention
 * while the language model writes, one character at a time. */
#include "exercises.h"
#include "kv_cache.h"

Tensor *decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token)
{
    return my_decode_step(layer, cache, token);
}
