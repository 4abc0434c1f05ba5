/*
 * fast_decode.c - the decode step, fast. See fast_decode.h.
 *
 * Legend: B = batch_size, T = tokens cached, H = num_heads,
 * G = num_kv_heads, D = num_hiddens, d = D / H.
 */
#include "fast/fast_decode.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_exp.h"
#include "fast/fast_matmul.h"
#include "fast/fast_vector.h"
#include "heads.h"
#include "ops.h"

/* q_row . k_row over d floats, vector lanes first */
static inline float dot(const float *q_row, const float *k_row, int d)
{
    vf acc0 = {0}, acc1 = {0};
    int i = 0;
    for (; i + 2 * FAST_VEC <= d; i += 2 * FAST_VEC) {
        acc0 += load_vec(q_row + i) * load_vec(k_row + i);
        acc1 += load_vec(q_row + i + FAST_VEC) * load_vec(k_row + i + FAST_VEC);
    }
    for (; i + FAST_VEC <= d; i += FAST_VEC)
        acc0 += load_vec(q_row + i) * load_vec(k_row + i);
    float sum = lanes_sum(acc0 + acc1);
    for (; i < d; i++)
        sum += q_row[i] * k_row[i];
    return sum;
}

/* out_row += w * v_row over d floats */
static inline void add_scaled(float *out_row, float w, const float *v_row, int d)
{
    const vf wv = (vf){0} + w;
    int i = 0;
    for (; i + FAST_VEC <= d; i += FAST_VEC)
        store_vec(out_row + i, load_vec(out_row + i) + wv * load_vec(v_row + i));
    for (; i < d; i++)
        out_row[i] += w * v_row[i];
}

/* Pass 3 for a key-value head that one query head reads: values (T, d),
 * weights (T,) -> out (d,) = inv_sum * sum_t weights[t] values[t], out
 * zeroed. Four vectors of columns at a time, whose sums stay in registers
 * while the T rows stream past (with several query heads there are not
 * registers enough, and their outputs are added into row by row). */
static void single_head_values(const float *values, const float *weights, float inv_sum, int T,
                               int d, float *out)
{
    int c = 0;
    for (; c + 4 * FAST_VEC <= d; c += 4 * FAST_VEC) {
        vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int t = 0; t < T; t++) {
            const float *v = values + (size_t)t * d + c;
            const vf w = (vf){0} + weights[t];
            a0 += w * load_vec(v);
            a1 += w * load_vec(v + FAST_VEC);
            a2 += w * load_vec(v + 2 * FAST_VEC);
            a3 += w * load_vec(v + 3 * FAST_VEC);
        }
        const vf inv = (vf){0} + inv_sum;
        store_vec(out + c, a0 * inv);
        store_vec(out + c + FAST_VEC, a1 * inv);
        store_vec(out + c + 2 * FAST_VEC, a2 * inv);
        store_vec(out + c + 3 * FAST_VEC, a3 * inv);
    }
    for (int t = 0; c < d && t < T; t++)   /* the last columns, fewer than 4 vectors */
        add_scaled(out + c, weights[t] * inv_sum, values + (size_t)t * d + c, d - c);
}

/* The group of query heads that share key-value head g of sequence b:
 * q_heads (group, d) at stride d -> out_heads (group, d) at stride d;
 * scores (group, T) and inv_sum (group,) are room to work in. */
static void attend_group(const KVCache *cache, int b, int g, int group, const float *q_heads,
                         float *out_heads, float *scores, float *inv_sum)
{
    const int T = cache->length, d = cache->head_size;
    const float scale = (float)sqrt((double)d);

    // pass 1: one read of the keys, each row scored against every query of the group
    for (int t = 0; t < T; t++) {
        const float *k_row = kv_cache_key(cache, b, g, t);
        for (int j = 0; j < group; j++)
            scores[(size_t)j * T + t] = dot(q_heads + (size_t)j * d, k_row, d) / scale;
    }
    // pass 2: exponentials from the row maximum, and their sums
    for (int j = 0; j < group; j++) {
        float *row = scores + (size_t)j * T;
        float max = row[0];
        for (int t = 1; t < T; t++)
            max = row[t] > max ? row[t] : max;
        inv_sum[j] = 1.0f / fast_exp_shift_sum(row, (size_t)T, max);
    }
    // pass 3: one read of the values, each row added into every output of
    // the group, each weight divided by its softmax sum
    memset(out_heads, 0, (size_t)group * d * sizeof(float));
    if (group == 1) {
        single_head_values(kv_cache_value(cache, b, g, 0), scores, inv_sum[0], T, d, out_heads);
        return;
    }
    for (int t = 0; t < T; t++) {
        const float *v_row = kv_cache_value(cache, b, g, t);
        for (int j = 0; j < group; j++)
            add_scaled(out_heads + (size_t)j * d, scores[(size_t)j * T + t] * inv_sum[j],
                       v_row, d);
    }
}

/* q (B, D) -> concat (B, D) */
void fast_decode_attend(const KVCache *cache, int num_heads, const float *q, float *concat)
{
    const int B = cache->batch_size, G = cache->num_kv_heads, d = cache->head_size;
    const int H = num_heads, D = H * d;
    require_kv_heads(H, G);
    if (cache->length < 1)
        die("the cache is empty: append the token first");
    const int group = H / G;
    float *scores = checked_malloc((size_t)group * cache->length + group,
                                   sizeof(float));
    float *inv_sum = scores + (size_t)group * cache->length;
    for (int b = 0; b < B; b++)
        for (int g = 0; g < G; g++) {
            /* query heads g*group .. g*group + group-1 are contiguous in q
             * and in concat: d columns each, side by side */
            const size_t first = (size_t)b * D + (size_t)g * group * d;
            attend_group(cache, b, g, group, q + first, concat + first, scores, inv_sum);
        }
    free(scores);
}

/* x (B, in) -> x W^T + b (B, out): one dot product per weight row. For a
 * few tokens this reads the weight once, row after row, where fast_linear
 * would first copy it into panels, a cost that only many rows repay. */
static Tensor *project(const Tensor *x, const Tensor *weight, const Tensor *bias)
{
    int rows;
    Tensor *y = linear_output(x, weight, bias, &rows);
    const int in = weight->shape[1], out = weight->shape[0];
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++)
            y->data[(size_t)r * out + o] =
                dot(x->data + (size_t)r * in, weight->data + (size_t)o * in, in) +
                (bias ? bias->data[o] : 0.0f);
    return y;
}

/* token (B, D) -> output (B, D) */
Tensor *fast_decode_step(const MultiHeadAttention *layer, KVCache *cache, const Tensor *token)
{
    const int H = layer->num_heads, D = layer->num_hiddens, B = cache->batch_size;
    if (cache->num_kv_heads != layer->num_kv_heads || cache->head_size != D / H)
        die("the cache has %d heads of %d, the layer %d key-value heads of %d",
            cache->num_kv_heads, cache->head_size, layer->num_kv_heads, D / H);
    tensor_check_shape("token", token, SHAPE(B, D));

    // pass 1: project the new token (one thread: the step is memory-bound)
    Tensor *q = project(token, layer->W_q, layer->b_q);   /* (B, D) */
    Tensor *k = project(token, layer->W_k, layer->b_k);   /* (B, G*d) */
    Tensor *v = project(token, layer->W_v, layer->b_v);   /* (B, G*d) */
    // pass 2: into the cache
    kv_cache_append(cache, k, v);
    // pass 3: every head over the cache, one read of it
    Tensor *concat = tensor_zeros(SHAPE(B, D));
    fast_decode_attend(cache, H, q->data, concat->data);
    // pass 4: W_o
    Tensor *output = project(concat, layer->W_o, layer->b_o);
    TENSOR_FREE(q, k, v, concat);
    return output;
}

float fast_stream_read(const float *x, size_t n)
{
    /* four independent accumulators, so the adds do not wait on each other
     * and only the loads set the pace */
    vf acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
    size_t i = 0;
    for (; i + 4 * FAST_VEC <= n; i += 4 * FAST_VEC) {
        acc0 += load_vec(x + i);
        acc1 += load_vec(x + i + FAST_VEC);
        acc2 += load_vec(x + i + 2 * FAST_VEC);
        acc3 += load_vec(x + i + 3 * FAST_VEC);
    }
    float sum = lanes_sum(acc0 + acc1 + acc2 + acc3);
    for (; i < n; i++)
        sum += x[i];
    return sum;
}
