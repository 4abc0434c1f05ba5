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
        die("dropout_inplace", "p must be in [0, 1), got %g", (double)dropout->p);
    /* p = 0 keeps every element and scales by 1: nothing to draw, so no
     * generator is needed (multihead_forward asks for one only when p > 0). */
    if (dropout->p == 0.0f)
        return;
    if (dropout->rng == NULL)
        die("dropout_inplace", "training mode needs a random generator (rng is NULL)");
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

AttentionSizes attention_check_shapes(const char *func, const Tensor *queries,
                                      const Tensor *keys, const Tensor *values,
                                      const ValidLens *valid_lens)
{
    AttentionSizes n;
    tensor_check_shape(func, "queries", queries, SHAPE(-1, -1, -1));
    n.batch_size = queries->shape[0];
    n.num_queries = queries->shape[1];
    n.d = queries->shape[2];
    /* A query is compared with every key by a dot product, so both have
     * size d; each key has one value, so keys and values agree on K. */
    tensor_check_shape(func, "keys", keys, SHAPE(n.batch_size, -1, n.d));
    n.num_keys = keys->shape[1];
    tensor_check_shape(func, "values", values, SHAPE(n.batch_size, n.num_keys, -1));
    n.v = values->shape[2];
    valid_lens_check(func, valid_lens, n.batch_size, n.num_queries, n.num_keys);
    return n;
}

/* queries (B, T, d), keys (B, K, d), values (B, K, v), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, v), attention_weights (B, T, K) */
Tensor *dot_product_attention(const Tensor *queries, const Tensor *keys,
                              const Tensor *values, const ValidLens *valid_lens,
                              const Dropout *dropout, Tensor **attention_weights)
{
    const AttentionSizes n = attention_check_shapes("dot_product_attention", queries, keys,
                                                    values, valid_lens);
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
    Tensor *weights = scores;

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
