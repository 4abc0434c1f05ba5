/*
 * gpt_block.c - one transformer block of the character-level GPT, forward
 * and backward (introduced in chapter 06's page "A language model"). See
 * gpt_block.h.
 *
 * Legend: B = batch_size, T = tokens of a sequence, D = num_hiddens,
 * F = 4 D, R = B * T rows.
 */
#include "learn/gpt_block.h"

#include "learn/layer_norm.h"

Tensor *layer_norm_tensor(const Tensor *x, const Tensor *weight, const Tensor *bias,
                          Tensor **mean, Tensor **rstd)
{
    const int D = x->shape[x->ndim - 1], R = (int)(x->size / (size_t)D);
    Tensor *y = tensor_empty(x->ndim, x->shape);
    *mean = tensor_empty(SHAPE(R));
    *rstd = tensor_empty(SHAPE(R));
    layer_norm_forward(x->data, weight->data, bias->data, y->data, (*mean)->data,
                       (*rstd)->data, R, D);
    return y;
}

void layer_norm_tensor_backward(const Tensor *grad_h, const Tensor *x, const Tensor *weight,
                                const Tensor *mean, const Tensor *rstd, Tensor *grad_x,
                                Tensor *grad_weight, Tensor *grad_bias)
{
    const int D = x->shape[x->ndim - 1], R = (int)(x->size / (size_t)D);
    layer_norm_backward(grad_h->data, x->data, weight->data, mean->data, rstd->data,
                        grad_x->data, grad_weight->data, grad_bias->data, R, D);
}

void residual_add(Tensor *x, const Tensor *y)
{
    for (size_t i = 0; i < x->size; i++)
        x->data[i] += y->data[i];
}

/* x (B, T, D) -> out (B, T, D) */
Tensor *block_forward(const Block *block, const LanguageKernels *kernels, Tensor *x,
                      const ValidLens *causal, Tensor **weights, BlockCache *cache)
{
    const Block *b = block;
    const AttentionLayer *attend = &kernels->attend;
    BlockCache local;
    BlockCache *k = cache != NULL ? cache : &local;
    *k = (BlockCache){.x = x};
    // step 1: x_mid = x + attention(ln_1(x)), queries, keys and values all ln_1(x)
    k->h1 = layer_norm_tensor(x, b->ln1_weight, b->ln1_bias, &k->mean1, &k->rstd1);
    Tensor *attended = attention_layer_forward_masked(attend, b->attn, k->h1, k->h1, k->h1,
                                                      causal, &k->attn, weights);
    k->x_mid = tensor_copy(x);
    residual_add(k->x_mid, attended);
    tensor_free(attended);
    // step 2: out = x_mid + proj(gelu(fc(ln_2(x_mid))))
    k->h2 = layer_norm_tensor(k->x_mid, b->ln2_weight, b->ln2_bias, &k->mean2, &k->rstd2);
    k->f = attention_layer_linear(attend, k->h2, b->fc_weight, b->fc_bias);   /* (B, T, F) */
    k->g = tensor_empty(k->f->ndim, k->f->shape);
    kernels->gelu(k->f->data, k->g->data, k->f->size);
    Tensor *out = attention_layer_linear(attend, k->g, b->proj_weight, b->proj_bias);
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
    const AttentionLayer *attend = &kernels->attend;
    // step 2 backwards: the MLP, then ln_2; grad becomes x_mid's gradient
    Tensor *grad_g = attention_layer_linear_backward(attend, c->g, b->proj_weight, grad,
                                                     g->proj_weight, g->proj_bias);
    kernels->gelu_backward(c->f->data, grad_g->data, grad_g->data, grad_g->size);
    Tensor *grad_h2 = attention_layer_linear_backward(attend, c->h2, b->fc_weight, grad_g,
                                                      g->fc_weight, g->fc_bias);
    layer_norm_tensor_backward(grad_h2, c->x_mid, b->ln2_weight, c->mean2, c->rstd2, grad,
                               g->ln2_weight, g->ln2_bias);
    TENSOR_FREE(grad_g, grad_h2);
    // step 1 backwards: attention read ln_1(x) three times, then ln_1
    Tensor *grad_q = NULL, *grad_k = NULL, *grad_v = NULL;
    attention_layer_backward(attend, b->attn, &c->attn, grad, g->attn, &grad_q, &grad_k,
                             &grad_v, NULL);
    residual_add(grad_q, grad_k);
    residual_add(grad_q, grad_v);   /* the gradient of h1 */
    layer_norm_tensor_backward(grad_q, c->x, b->ln1_weight, c->mean1, c->rstd1, grad,
                               g->ln1_weight, g->ln1_bias);
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
