/* block_forward.c - exercise 6.19's my_block_forward in place of the
 * repository's block_forward (common/learn/gpt_block.c): every block of
 * the language model's forward. The exercise runs the clear pieces,
 * whatever kernels the model holds (inside.txt forces the model's
 * attention onto the clear layer, whose cache the backward then reads).
 * The per-head weights a program draws come from the clear layer again. */
#include "exercises.h"
#include "learn/gpt_block.h"

Tensor *block_forward(const Block *block, const LanguageKernels *kernels, Tensor *x,
                      const ValidLens *causal, Tensor **weights, BlockCache *cache)
{
    (void)kernels;
    BlockCache local = {0};
    BlockCache *c = cache != NULL ? cache : &local;
    *c = (BlockCache){0};
    Tensor *out = my_block_forward(block, x, causal, c);
    if (weights != NULL) {
        const AttentionLayer clear = CLEAR_ATTENTION;
        tensor_free(attention_layer_forward_masked(&clear, block->attn, c->h1, c->h1, c->h1,
                                                   causal, NULL, weights));
    }
    if (cache != NULL)
        c->x = x;   /* the cache keeps the stream it came in with */
    else
        block_cache_free(c);
    return out;
}
