/*
 * gpt_block.h - one transformer block of the character-level GPT, forward
 * and backward, and the kernels it runs (introduced in chapter 06's page
 * "A language model").
 *
 * Legend: B = batch_size, T = tokens of a sequence, D = num_hiddens,
 * H = num_heads, d = D / H, F = 4 D.
 *
 *     x_mid = x + attention(ln_1(x))        causal: query t sees keys 0 .. t
 *     out   = x_mid + mlp(ln_2(x_mid))      D -> F, GELU, F -> D (mlp.h)
 *
 * nanoGPT's Block.forward, two lines. Each half reads the stream through a
 * layer norm and adds what it computes back into it (the residual), so the
 * backward passes the stream's gradient on unchanged and adds what flows
 * back through each half.
 *
 * Every piece a block runs is a function of another file (layer_norm.h,
 * attention_layer.h, ops.h's linear through the kernels, mlp.h's GELU), so
 * that each can be the learner's (make 06_permutation_invariance
 * EXERCISE=...).
 */
#ifndef GPT_BLOCK_H
#define GPT_BLOCK_H

#include <stdbool.h>

#include "attention_layer.h"
#include "learn/language_kernels.h"
#include "learn/mlp.h"
#include "multihead.h"
#include "tensor.h"
#include "valid_lens.h"

typedef struct {
    Tensor *ln1_weight, *ln1_bias;       /* (D,) */
    MultiHeadAttention *attn;            /* D -> D, H heads, biases */
    Tensor *ln2_weight, *ln2_bias;       /* (D,) */
    Tensor *fc_weight, *fc_bias;         /* (F, D), (F,) */
    Tensor *proj_weight, *proj_bias;     /* (D, F), (D,) */
} Block;

typedef struct {
    Tensor *ln1_weight, *ln1_bias;
    MultiHeadGrads *attn;
    Tensor *ln2_weight, *ln2_bias, *fc_weight, *fc_bias, *proj_weight, *proj_bias;
} BlockGrads;

/* What a block's forward keeps for its backward. */
typedef struct {
    Tensor *x;                        /* (B, T, D) the stream coming in */
    Tensor *h1, *mean1, *rstd1;       /* ln_1(x) (B, T, D), its (B*T,) statistics */
    LayerCache attn;
    Tensor *x_mid;                    /* (B, T, D) the stream after attention */
    Tensor *h2, *mean2, *rstd2;       /* ln_2(x_mid) */
    Tensor *f, *g;                    /* (B, T, F): the MLP's hidden layer before and after GELU */
} BlockCache;

/* What a rung of the build-up leaves out of its blocks (chapter 06's page
 * "Building the GPT"); all false, {0}: the block above.
 *   no_layer_norm  no ln_1, ln_2 (their tensors NULL): each half reads x as it is
 *   no_residual    x_mid = attention(x), out = mlp(x_mid): each half's output
 *                  replaces the stream instead of adding to it
 *   no_mlp         the block ends after attention: out = x_mid (fc, proj NULL) */
typedef struct {
    bool no_layer_norm, no_residual, no_mlp;
} BlockParts;

/* The MLP of a block, through the kernels: h (B, T, D) -> proj(gelu(fc(h)))
 * (B, T, D) (new), f = fc(h) and g = gelu(f) (B, T, F) (new), kept for
 * the backward; and back: grad_out (B, T, D) -> grad_h (B, T, D) (new),
 * from cache's h2, f and g, the four parameters' gradients added into
 * grads. */
Tensor *mlp_forward(const Block *block, const LanguageKernels *kernels, const Tensor *h,
                    Tensor **f, Tensor **g);
Tensor *mlp_backward(const Block *block, BlockGrads *grads, const LanguageKernels *kernels,
                     const BlockCache *cache, const Tensor *grad_out);

/* x (B, T, D) -> the stream after the block (new), through the kernels.
 * causal: valid_lens_causal(B, T). weights, when not NULL, receives the
 * block's attention weights (B, H, T, T) (new; the clear layer computes
 * them). cache, when not NULL, is filled for block_backward and keeps x
 * (the caller hands it over); with cache NULL everything else the block
 * made is freed and x stays the caller's. */
Tensor *block_forward(const Block *block, const LanguageKernels *kernels, Tensor *x,
                      const ValidLens *causal, Tensor **weights, BlockCache *cache);
/* grad (B, T, D), the gradient of the block's output -> the gradient of
 * its input, in place; every parameter's gradient added into grads. */
void block_backward(const Block *block, BlockGrads *grads, const LanguageKernels *kernels,
                    const BlockCache *cache, Tensor *grad);
/* block_forward and block_backward for a rung of the build-up: the same
 * steps with parts left out, the same arguments and cache (what a part left
 * out would keep stays NULL). With parts {0} they are block_forward and
 * block_backward themselves. */
/* true when parts leaves nothing out: the page's whole block */
bool block_parts_whole(BlockParts parts);
Tensor *block_forward_parts(const Block *block, BlockParts parts,
                            const LanguageKernels *kernels, Tensor *x, const ValidLens *causal,
                            Tensor **weights, BlockCache *cache);
void block_backward_parts(const Block *block, BlockParts parts, BlockGrads *grads,
                          const LanguageKernels *kernels, const BlockCache *cache,
                          Tensor *grad);
/* layer_norm_tensor, or on a rung without layer norm (weight NULL) x
 * itself (a copy) and no statistics (mean and rstd NULL); and its
 * backward, which then adds all of grad_h into grad_x. */
Tensor *norm_or_copy(const Tensor *x, const Tensor *weight, const Tensor *bias, Tensor **mean,
                     Tensor **rstd);
void norm_or_copy_backward(const Tensor *grad_h, const Tensor *x, const Tensor *weight,
                           const Tensor *mean, const Tensor *rstd, Tensor *grad_x,
                           Tensor *grad_weight, Tensor *grad_bias);
/* Frees what a block's forward kept; the struct is the caller's. */
void block_cache_free(BlockCache *cache);

/* x (B, T, D) -> ln(x) (new), mean and rstd (B*T,) (new): layer_norm_forward
 * on a tensor's rows */
Tensor *layer_norm_tensor(const Tensor *x, const Tensor *weight, const Tensor *bias,
                          Tensor **mean, Tensor **rstd);
/* grad_h (B, T, D), the gradient of ln(x) -> grad_x (B, T, D) += its part,
 * grad_weight and grad_bias (D,) += theirs: layer_norm_backward on a
 * tensor's rows */
void layer_norm_tensor_backward(const Tensor *grad_h, const Tensor *x, const Tensor *weight,
                                const Tensor *mean, const Tensor *rstd, Tensor *grad_x,
                                Tensor *grad_weight, Tensor *grad_bias);
/* x += y, elementwise: a residual */
void residual_add(Tensor *x, const Tensor *y);

#endif
