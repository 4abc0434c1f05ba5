/* Bug: the MLP's output is not added to the stream: out = mlp(ln_2(x_mid))
 * alone, the second residual missing. */
#include "exercises.h"
#include "ops.h"

Tensor *my_block_forward(const Block *block, const Tensor *x, const ValidLens *causal,
                         BlockCache *cache)
{
    // x_mid = x + attention(ln_1(x)): queries, keys and values all ln_1(x), causal
    cache->h1 = layer_norm_tensor(x, block->ln1_weight, block->ln1_bias, &cache->mean1,
                                  &cache->rstd1);
    const AttentionLayer clear = CLEAR_ATTENTION;
    Tensor *attended = attention_layer_forward_masked(&clear, block->attn, cache->h1, cache->h1,
                                                      cache->h1, causal, &cache->attn, NULL);
    cache->x_mid = tensor_copy(x);
    residual_add(cache->x_mid, attended);
    tensor_free(attended);
    // out = x_mid + proj(gelu(fc(ln_2(x_mid))))
    cache->h2 = layer_norm_tensor(cache->x_mid, block->ln2_weight, block->ln2_bias,
                                  &cache->mean2, &cache->rstd2);
    cache->f = linear(cache->h2, block->fc_weight, block->fc_bias);
    cache->g = tensor_empty(cache->f->ndim, cache->f->shape);
    gelu_forward(cache->f->data, cache->g->data, cache->f->size);
    Tensor *out = linear(cache->g, block->proj_weight, block->proj_bias);
    return out;
}
