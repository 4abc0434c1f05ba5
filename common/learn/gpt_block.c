/*
 * gpt_block.c - one transformer block of the character-level GPT, forward
 * and backward (introduced in chapter 06's page "A language model"). See
 * gpt_block.h.
 *
 * Legend: B = batch_size, T = tokens of a sequence, D = num_hiddens,
 * F = 4 D, R = B * T rows.
 */
#include "learn/gpt_block.h"

#include <string.h>

#include "learn/layer_norm.h"

Tensor *layer_norm_tensor(const Tensor *x, const Tensor *weight, const Tensor *bias,
                          Tensor **mean, Tensor **rstd)
{
    const int D = x->shape[x->ndim - 1], R = (int)(x->size / (size_t)D);
    Tensor *y = tensor_empty(x->ndim, x->shape);
    *mean = tensor_empty(SHAPE(R));
    *rstd = tensor_empty(SHAPE(R));
    layer_norm_forward_grouped(x->data, weight->data, bias->data, y->data, (*mean)->data,
                       (*rstd)->data, R, D);
    return y;
}

void layer_norm_tensor_backward(const Tensor *grad_h, const Tensor *x, const Tensor *weight,
                                const Tensor *mean, const Tensor *rstd, Tensor *grad_x,
                                Tensor *grad_weight, Tensor *grad_bias)
{
    const int D = x->shape[x->ndim - 1], R = (int)(x->size / (size_t)D);
    layer_norm_backward_grouped(grad_h->data, x->data, weight->data, mean->data, rstd->data,
                        grad_x->data, grad_weight->data, grad_bias->data, R, D);
}

void residual_add(Tensor *x, const Tensor *y)
{
    for (size_t i = 0; i < x->size; i++)
        x->data[i] += y->data[i];
}

Tensor *mlp_forward(const Block *block, const LanguageKernels *kernels, const Tensor *h,
                    Tensor **f, Tensor **g)
{
    const int threads = kernels->num_threads;
    *f = kernels->linear(h, block->fc_weight, block->fc_bias, threads);   /* (B, T, F) */
    *g = tensor_empty((*f)->ndim, (*f)->shape);
    kernels->gelu((*f)->data, (*g)->data, (*f)->size);
    return kernels->linear(*g, block->proj_weight, block->proj_bias, threads);
}

Tensor *mlp_backward(const Block *block, BlockGrads *grads, const LanguageKernels *kernels,
                     const BlockCache *cache, const Tensor *grad_out)
{
    const int threads = kernels->num_threads;
    // pass 2 backwards: proj, then GELU; pass 1 backwards: fc
    Tensor *grad_g = kernels->linear_backward(cache->g, block->proj_weight, grad_out,
                                              grads->proj_weight, grads->proj_bias, threads);
    kernels->gelu_backward(cache->f->data, grad_g->data, grad_g->data, grad_g->size);
    Tensor *grad_h = kernels->linear_backward(cache->h2, block->fc_weight, grad_g,
                                              grads->fc_weight, grads->fc_bias, threads);
    tensor_free(grad_g);
    return grad_h;
}

/* x (B, T, D) -> out (B, T, D) */
Tensor *block_forward(const Block *block, const LanguageKernels *kernels, Tensor *x,
                      const ValidLens *causal, Tensor **weights, BlockCache *cache)
{
    const Block *b = block;
    const AttentionLayer attend = language_attention(kernels);
    BlockCache local;
    BlockCache *k = cache != NULL ? cache : &local;
    *k = (BlockCache){.x = x};
    // step 1: x_mid = x + attention(ln_1(x)), queries, keys and values all ln_1(x)
    k->h1 = layer_norm_tensor(x, b->ln1_weight, b->ln1_bias, &k->mean1, &k->rstd1);
    k->x_mid = attention_layer_forward_masked(&attend, b->attn, k->h1, k->h1, k->h1, causal,
                                              &k->attn, weights);
    residual_add(k->x_mid, x);
    // step 2: out = x_mid + mlp(ln_2(x_mid)), the MLP proj(gelu(fc(.)))
    k->h2 = layer_norm_tensor(k->x_mid, b->ln2_weight, b->ln2_bias, &k->mean2, &k->rstd2);
    Tensor *out = mlp_forward(b, kernels, k->h2, &k->f, &k->g);
    residual_add(out, k->x_mid);
    if (cache == NULL) {
        k->x = NULL;   /* the caller's */
        block_cache_free(k);
    }
    return out;
}

/* grad (B, T, D): out's gradient in, x's gradient out */
void block_backward(const Block *block, BlockGrads *grads, const LanguageKernels *kernels,
                    const BlockCache *cache, Tensor *grad)
{
    const Block *b = block;
    BlockGrads *g = grads;
    const BlockCache *c = cache;
    // step 2 backwards: the MLP, then ln_2; grad becomes x_mid's gradient
    Tensor *grad_h2 = mlp_backward(b, g, kernels, c, grad);
    layer_norm_tensor_backward(grad_h2, c->x_mid, b->ln2_weight, c->mean2, c->rstd2, grad,
                               g->ln2_weight, g->ln2_bias);
    tensor_free(grad_h2);
    // step 1 backwards: attention read ln_1(x) three times, then ln_1
    Tensor *grad_q = NULL, *grad_k = NULL, *grad_v = NULL;
    kernels->attention_backward(b->attn, &c->attn, grad, g->attn, &grad_q, &grad_k, &grad_v,
                                NULL, kernels->num_threads);
    residual_add(grad_q, grad_k);
    residual_add(grad_q, grad_v);   /* the gradient of h1 */
    layer_norm_tensor_backward(grad_q, c->x, b->ln1_weight, c->mean1, c->rstd1, grad,
                               g->ln1_weight, g->ln1_bias);
    TENSOR_FREE(grad_q, grad_k, grad_v);
}

/* ---- the rungs of the build-up --------------------------------------------------- */

bool block_parts_whole(BlockParts parts)
{
    return !parts.no_layer_norm && !parts.no_residual && !parts.no_mlp;
}

Tensor *norm_or_copy(const Tensor *x, const Tensor *weight, const Tensor *bias, Tensor **mean,
                     Tensor **rstd)
{
    if (weight != NULL)
        return layer_norm_tensor(x, weight, bias, mean, rstd);
    *mean = *rstd = NULL;
    return tensor_copy(x);
}

void norm_or_copy_backward(const Tensor *grad_h, const Tensor *x, const Tensor *weight,
                           const Tensor *mean, const Tensor *rstd, Tensor *grad_x,
                           Tensor *grad_weight, Tensor *grad_bias)
{
    if (weight != NULL)
        layer_norm_tensor_backward(grad_h, x, weight, mean, rstd, grad_x, grad_weight,
                                   grad_bias);
    else
        residual_add(grad_x, grad_h);
}

Tensor *block_forward_parts(const Block *block, BlockParts parts,
                            const LanguageKernels *kernels, Tensor *x, const ValidLens *causal,
                            Tensor **weights, BlockCache *cache)
{
    if (block_parts_whole(parts))
        return block_forward(block, kernels, x, causal, weights, cache);
    const Block *b = block;
    const AttentionLayer attend = language_attention(kernels);
    BlockCache local;
    BlockCache *k = cache != NULL ? cache : &local;
    *k = (BlockCache){.x = x};
    // step 1: x_mid = x + attention(ln_1(x)), less what the rung leaves out
    k->h1 = norm_or_copy(x, b->ln1_weight, b->ln1_bias, &k->mean1, &k->rstd1);
    k->x_mid = attention_layer_forward_masked(&attend, b->attn, k->h1, k->h1, k->h1, causal,
                                              &k->attn, weights);
    if (!parts.no_residual)
        residual_add(k->x_mid, x);
    // step 2: out = x_mid + mlp(ln_2(x_mid)), or x_mid itself without the MLP
    Tensor *out;
    if (parts.no_mlp) {
        out = tensor_copy(k->x_mid);
    } else {
        k->h2 = norm_or_copy(k->x_mid, b->ln2_weight, b->ln2_bias, &k->mean2, &k->rstd2);
        out = mlp_forward(b, kernels, k->h2, &k->f, &k->g);
        if (!parts.no_residual)
            residual_add(out, k->x_mid);
    }
    if (cache == NULL) {
        k->x = NULL;   /* the caller's */
        block_cache_free(k);
    }
    return out;
}

/* grad (B, T, D): zeroed where a residual would have passed it on, so that
 * a half's input gets only what flows back through the half */
static void cut_residual(BlockParts parts, Tensor *grad)
{
    if (parts.no_residual)
        memset(grad->data, 0, grad->size * sizeof(float));
}

void block_backward_parts(const Block *block, BlockParts parts, BlockGrads *grads,
                          const LanguageKernels *kernels, const BlockCache *cache, Tensor *grad)
{
    if (block_parts_whole(parts)) {
        block_backward(block, grads, kernels, cache, grad);
        return;
    }
    const Block *b = block;
    BlockGrads *g = grads;
    const BlockCache *c = cache;
    // step 2 backwards, when there is an MLP: grad becomes x_mid's gradient
    if (!parts.no_mlp) {
        Tensor *grad_h2 = mlp_backward(b, g, kernels, c, grad);
        cut_residual(parts, grad);
        norm_or_copy_backward(grad_h2, c->x_mid, b->ln2_weight, c->mean2, c->rstd2, grad,
                              g->ln2_weight, g->ln2_bias);
        tensor_free(grad_h2);
    }
    // step 1 backwards: attention, then ln_1
    Tensor *grad_q = NULL, *grad_k = NULL, *grad_v = NULL;
    kernels->attention_backward(b->attn, &c->attn, grad, g->attn, &grad_q, &grad_k, &grad_v,
                                NULL, kernels->num_threads);
    residual_add(grad_q, grad_k);
    residual_add(grad_q, grad_v);
    cut_residual(parts, grad);
    norm_or_copy_backward(grad_q, c->x, b->ln1_weight, c->mean1, c->rstd1, grad, g->ln1_weight,
                          g->ln1_bias);
    TENSOR_FREE(grad_q, grad_k, grad_v);
}

void block_cache_free(BlockCache *cache)
{
    BlockCache *c = cache;
    layer_cache_free(&c->attn);
    TENSOR_FREE(c->x, c->h1, c->mean1, c->rstd1, c->x_mid, c->h2, c->mean2, c->rstd2, c->f,
                c->g);
    *c = (BlockCache){0};
}
