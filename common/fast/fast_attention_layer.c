/*
 * fast_attention_layer.c - the fast multi-head layer as the pair of
 * functions a model runs (chapter 05's training page). See
 * fast_attention_layer.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, D = num_hiddens.
 */
#include "fast/fast_attention_layer.h"

#include <stdlib.h>

#include "error.h"
#include "fast/fast_matmul.h"
#include "fast/fast_multihead.h"
#include "memory.h"

static void fast_cache_free(void *other)
{
    fast_multihead_cache_free(other);
    free(other);
}

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv) -> output (B, T, D),
 * a FastMultiHeadCache in cache->other */
static Tensor *fast_forward(const MultiHeadAttention *layer, const Tensor *queries,
                            const Tensor *keys, const Tensor *values,
                            const ValidLens *valid_lens, bool training, Rng *rng,
                            int num_threads, LayerCache *cache)
{
    (void)rng;   /* dropout's coins: the fast layer has no dropout */
    if (training && layer->dropout > 0.0f)
        die("dropout %g in training mode: the fast layer has no "
            "dropout; train with the clear layer", (double)layer->dropout);
    FastMultiHeadCache *fast = checked_malloc(1, sizeof *fast);
    *cache = (LayerCache){.other = fast, .other_free = fast_cache_free};
    return fast_multihead_forward_cache(layer, queries, keys, values, valid_lens, num_threads,
                                        fast);
}

/* grad_output (B, T, D) -> parameter gradients added, input gradients new */
static void fast_backward(const MultiHeadAttention *layer, const LayerCache *cache,
                          const Tensor *grad_output, MultiHeadGrads *grads,
                          Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                          Tensor **grad_concat, int num_threads)
{
    if (cache->other == NULL) {   /* the forward asked for weights, and ran the clear layer */
        clear_attention_backward(layer, cache, grad_output, grads, grad_queries, grad_keys,
                                 grad_values, grad_concat, num_threads);
        return;
    }
    if (grad_concat != NULL)
        die("grad_concat (the head gates' gradient) comes from the "
            "clear layer: run CLEAR_ATTENTION");
    fast_multihead_backward(layer, cache->other, grad_output, grads, grad_queries, grad_keys,
                            grad_values, num_threads);
}

/* the model's linear layers on the fast kernel, on as many of the
 * layer's threads as their work is worth (fast_threads.h): a default
 * batch's readout is far too small to share */
static Tensor *linear_forward(const Tensor *x, const Tensor *weight, const Tensor *bias,
                              int num_threads)
{
    const double flops = 2.0 * (double)x->size * weight->shape[0];
    return fast_linear(x, weight, bias, fast_threads_worth(num_threads, flops));
}

static Tensor *linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                               Tensor *grad_weight, Tensor *grad_bias, int num_threads)
{
    const double flops = 4.0 * (double)x->size * weight->shape[0];   /* two products */
    return fast_linear_backward(x, weight, grad_y, grad_weight, grad_bias,
                                fast_threads_worth(num_threads, flops));
}

AttentionLayer fast_attention_layer(int num_threads)
{
    if (num_threads < 1)
        die("num_threads %d: at least 1", num_threads);
    return (AttentionLayer){fast_forward, fast_backward, num_threads, linear_forward,
                            linear_backward};
}
