/*
 * attention.c - scaled dot-product attention, the clear version (introduced
 * in chapter 03). See attention.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (= number of
 * key-value pairs), d = query and key size, v = value size.
 */
#include "attention.h"

#include <math.h>

#include "ops.h"
#include "softmax.h"

/* x (any shape) -> x, in place */
void dropout_inplace(Tensor *x, const Dropout *dropout)
{
    if (dropout == NULL || !dropout->training)
        return;
    if (!(dropout->p >= 0.0f && dropout->p < 1.0f))
        die("p must be in [0, 1), got %g", (double)dropout->p);
    /* p = 0 keeps every element and scales by 1: nothing to draw, so no
     * generator is needed (multihead_forward asks for one only when p > 0). */
    if (dropout->p == 0.0f)
        return;
    if (dropout->rng == NULL)
        die("training mode needs a random generator (rng is NULL)");
    /* Scaling the survivors by 1 / (1 - p) keeps the expected value of
     * every element unchanged, so evaluation (no dropout, no scaling) sees
     * weights of the same size on average as training did. */
    const float keep_scale = 1.0f / (1.0f - dropout->p);
    for (size_t i = 0; i < x->size; i++) {
        if (rng_uniform(dropout->rng) < dropout->p)
            x->data[i] = 0.0f;
        else
            x->data[i] *= keep_scale;
    }
}

AttentionSizes attention_check_shapes(const Tensor *queries, const Tensor *keys,
                                      const Tensor *values, const ValidLens *valid_lens)
{
    AttentionSizes n;
    tensor_check_shape("queries", queries, SHAPE(-1, -1, -1));
    n.batch_size = queries->shape[0];
    n.num_queries = queries->shape[1];
    n.d = queries->shape[2];
    /* A query is compared with every key by a dot product, so both have
     * size d; each key has one value, so keys and values agree on K. */
    tensor_check_shape("keys", keys, SHAPE(n.batch_size, -1, n.d));
    n.num_keys = keys->shape[1];
    tensor_check_shape("values", values, SHAPE(n.batch_size, n.num_keys, -1));
    n.v = values->shape[2];
    valid_lens_check(valid_lens, n.batch_size, n.num_queries, n.num_keys);
    return n;
}

/* queries (B, T, d), keys (B, K, d), valid_lens NULL, (B,) or (B, T)
 * -> weights (B, T, K): passes 1 and 2 of the forward, which
 * dot_product_attention and dot_product_attention_cache share. */
static Tensor *attention_weights_of(const Tensor *queries, const Tensor *keys,
                                    const ValidLens *valid_lens, AttentionSizes n)
{
    const int batch_size = n.batch_size, num_queries = n.num_queries, num_keys = n.num_keys;
    const int d = n.d;

    /* pass 1: scores = queries @ keys^T / sqrt(d), (B, T, K). With entries
     * of variance 1, a dot product of d terms has variance d; dividing by
     * sqrt(d) brings it back to 1 whatever d is, so the softmax does not
     * saturate as d grows (chapter 03 measures this). */
    Tensor *scores = matmul_bt(queries, keys);
    const float scale = (float)sqrt((double)d);
    for (size_t i = 0; i < scores->size; i++)
        scores->data[i] /= scale;

    /* pass 2: each row of scores becomes a row of weights, in place, so
     * only one (T, K) matrix per sequence is ever held. Keys at or past
     * the row's valid_len get weight exactly 0 (see masked_softmax_row). */
    for (int b = 0; b < batch_size; b++)
        for (int q = 0; q < num_queries; q++) {
            float *row = scores->data + ((size_t)b * num_queries + (size_t)q) * num_keys;
            int valid_len = valid_lens ? valid_len_at(valid_lens, b, q) : num_keys;
            masked_softmax_row(row, num_keys, valid_len);
        }
    return scores;
}

/* queries (B, T, d), keys (B, K, d), values (B, K, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v), attention_weights (B, T, K) */
Tensor *dot_product_attention(const Tensor *queries, const Tensor *keys,
                              const Tensor *values, const ValidLens *valid_lens,
                              const Dropout *dropout, Tensor **attention_weights)
{
    const AttentionSizes n = attention_check_shapes(queries, keys,
                                                    values, valid_lens);

    /* passes 1 and 2: scaled scores, then masked softmax over each row */
    Tensor *weights = attention_weights_of(queries, keys, valid_lens, n);

    /* pass 3: dropout on the weights, in training mode only */
    dropout_inplace(weights, dropout);

    /* pass 4: weighted sum of values, (B, T, K) @ (B, K, v) -> (B, T, v).
     * A row of zero weights (valid_len 0) gives a zero output. */
    Tensor *output = matmul(weights, values);

    if (attention_weights != NULL)
        *attention_weights = weights;
    else
        tensor_free(weights);
    return output;
}

/* ---- backward -------------------------------------------------------------
 * The forward in four passes, and what each leaves for the backward:
 *   S = Q K^T / sqrt(d)       (B, T, K)   pass 1
 *   P = masked_softmax(S)     (B, T, K)   pass 2   kept: cache->weights
 *   A = P * M                 (B, T, K)   pass 3   kept: M = cache->dropout_scale
 *   O = A V                   (B, T, v)   pass 4
 * The backward runs them in reverse with the chain rule, one product of
 * matrices per step, so it costs about twice the forward. */

/* Dropout's coin flips for x's shape: 0 with probability p, else 1/(1-p),
 * drawn in dropout_inplace's order, so multiplying by them equals
 * dropout_inplace on the same generator. NULL when dropout does nothing. */
static Tensor *dropout_scale_draw(const Tensor *x, const Dropout *dropout)
{
    if (dropout == NULL || !dropout->training)
        return NULL;
    if (!(dropout->p >= 0.0f && dropout->p < 1.0f))
        die("p must be in [0, 1), got %g", (double)dropout->p);
    if (dropout->p == 0.0f)
        return NULL;   /* nothing drawn, as in dropout_inplace */
    if (dropout->rng == NULL)
        die(
            "training mode needs a random generator (rng is NULL)");
    const float keep_scale = 1.0f / (1.0f - dropout->p);
    Tensor *scale = tensor_zeros(x->ndim, x->shape);
    for (size_t i = 0; i < scale->size; i++)
        scale->data[i] = rng_uniform(dropout->rng) < dropout->p ? 0.0f : keep_scale;
    return scale;
}

/* x (any shape) *= scale (x's shape), in place: dropout_inplace's result
 * from the flips it drew (a dropped element is 0, even an infinite one) */
static void apply_dropout_scale(Tensor *x, const Tensor *scale)
{
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = scale->data[i] == 0.0f ? 0.0f : x->data[i] * scale->data[i];
}

/* queries (B, T, d), keys (B, K, d), values (B, K, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v); cache->weights (B, T, K), and
 * cache->dropout_scale (B, T, K) when dropout acts */
Tensor *dot_product_attention_cache(const Tensor *queries, const Tensor *keys,
                                   const Tensor *values, const ValidLens *valid_lens,
                                   const Dropout *dropout, AttentionCache *cache)
{
    const AttentionSizes n = attention_check_shapes(queries,
                                                    keys, values, valid_lens);
    /* passes 1 and 2, kept: P is all the softmax backward needs */
    cache->weights = attention_weights_of(queries, keys, valid_lens, n);

    /* pass 3: the mask drawn once and kept, so the backward sends the
     * gradient through exactly the weights that the forward used */
    cache->dropout_scale = dropout_scale_draw(cache->weights, dropout);
    if (cache->dropout_scale == NULL)
        return matmul(cache->weights, values);   /* pass 4 */

    /* pass 4: weighted sum of values, by the weights that dropout kept */
    Tensor *dropped = attention_cache_dropped(cache);
    Tensor *output = matmul(dropped, values);
    tensor_free(dropped);
    return output;
}

/* cached weights and dropout scale (B, T, K) -> weights after dropout (B, T, K) */
Tensor *attention_cache_dropped(const AttentionCache *cache)
{
    Tensor *dropped = tensor_copy(cache->weights);
    if (cache->dropout_scale != NULL)
        apply_dropout_scale(dropped, cache->dropout_scale);
    return dropped;
}

/* x (B, m, n) -> x^T (B, n, m), new */
static Tensor *transpose_last_two(const Tensor *x)
{
    return tensor_permute(x, (const int[]){0, 2, 1});
}

/* Stop with a message naming the backward unless the inputs, the cache
 * (B, T, K) and grad_output (B, T, v) fit together; returns the sizes. */
static AttentionSizes check_backward_shapes(const Tensor *queries, const Tensor *keys,
                                            const Tensor *values, const AttentionCache *cache,
                                            const Tensor *grad_output)
{
    const AttentionSizes n = attention_check_shapes(queries, keys, values, NULL);
    tensor_check_shape("cache weights", cache->weights,
                       SHAPE(n.batch_size, n.num_queries, n.num_keys));
    if (cache->dropout_scale != NULL)
        tensor_check_shape("cache dropout_scale", cache->dropout_scale,
                           SHAPE(n.batch_size, n.num_queries, n.num_keys));
    tensor_check_shape("grad_output", grad_output,
                       SHAPE(n.batch_size, n.num_queries, n.v));
    return n;
}

/* queries (B, T, d), keys (B, K, d), values (B, K, v), cached weights and
 * dropout scale (B, T, K), grad_output (B, T, v) -> grad_queries (B, T, d),
 * grad_keys (B, K, d), grad_values (B, K, v) */
void dot_product_attention_backward(const Tensor *queries, const Tensor *keys,
                                    const Tensor *values, const AttentionCache *cache,
                                    const Tensor *grad_output, Tensor **grad_queries,
                                    Tensor **grad_keys, Tensor **grad_values)
{
    const AttentionSizes n = check_backward_shapes(queries, keys, values, cache, grad_output);

    // pass 4 backwards: O = A V, so dV = A^T dO and dA = dO V^T
    if (grad_values != NULL) {
        Tensor *dropped_t = transpose_last_two(cache->weights);      /* A^T (B, K, T) */
        if (cache->dropout_scale != NULL) {
            Tensor *scale_t = transpose_last_two(cache->dropout_scale);
            apply_dropout_scale(dropped_t, scale_t);
            tensor_free(scale_t);
        }
        *grad_values = matmul(dropped_t, grad_output);              /* (B, K, v) */
        tensor_free(dropped_t);
    }
    if (grad_queries == NULL && grad_keys == NULL)
        return;   /* dV was all that was asked for */
    Tensor *grad_weights = matmul_bt(grad_output, values);           /* dA (B, T, K) */

    // pass 3 backwards: A = P * M elementwise, so dP = dA * M: a dropped
    // weight passed nothing forward and gets nothing back
    if (cache->dropout_scale != NULL)
        for (size_t i = 0; i < grad_weights->size; i++)
            grad_weights->data[i] *= cache->dropout_scale->data[i];

    // pass 2 backwards: dS = P * (dP - rowsum(dP * P)); masked keys and
    // rows with no valid key get exactly 0 (softmax.c)
    Tensor *grad_scores = masked_softmax_backward(cache->weights, grad_weights);
    tensor_free(grad_weights);

    // pass 1 backwards: S = Q K^T / sqrt(d). The scale divides every score,
    // so it divides their gradients too; then dQ = dS K, dK = dS^T Q.
    const float scale = (float)sqrt((double)n.d);
    for (size_t i = 0; i < grad_scores->size; i++)
        grad_scores->data[i] /= scale;
    if (grad_queries != NULL)
        *grad_queries = matmul(grad_scores, keys);                   /* (B, T, d) */
    if (grad_keys != NULL) {
        Tensor *grad_scores_t = transpose_last_two(grad_scores);    /* (B, K, T) */
        *grad_keys = matmul(grad_scores_t, queries);                 /* (B, K, d) */
        tensor_free(grad_scores_t);
    }
    tensor_free(grad_scores);
}

void attention_cache_free(AttentionCache *cache)
{
    if (cache == NULL)
        return;
    TENSOR_FREE(cache->weights, cache->dropout_scale);
    cache->weights = NULL;
    cache->dropout_scale = NULL;
}
