/*
 * streaming_attention.c - attention over blocks of keys with an online
 * softmax. See streaming_attention.h for the idea and the update rule.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, d = query and key
 * size, v = value size; Br = STREAM_BLOCK_QUERIES, Bc = STREAM_BLOCK_KEYS.
 *
 * For one block of Br queries, the running state is
 *   m (Br,)    the largest score seen so far per query (-inf before any)
 *   l (Br,)    sum of exp(score - m) over the keys seen so far
 *   o (Br, v)  sum of exp(score - m) * value over the keys seen so far
 * and each block of Bc keys goes through four passes:
 *   pass 1: scores s = q k^T / sqrt(d), (Br, Bc), with the register-tile
 *           kernel of fast_matmul.c
 *   pass 2: per query, the new maximum, the rescale factor exp(m - m'),
 *           the weights exp(s - m') (0 for masked keys), l and m updated
 *   pass 3: o rescaled by exp(m - m')
 *   pass 4: o += weights @ values, the register-tile kernel again
 * After the last block, out = o / l.
 */
#include "fast/streaming_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_exp.h"
#include "attention.h"
#include "softmax.h"
#include "fast/fast_matmul.h"

/* vectors as wide as the register-tile kernel's (fast_matmul.h) */
typedef float vf __attribute__((vector_size(FAST_VEC * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(FAST_VEC * sizeof(int32_t))));

/* ---- packing ---------------------------------------------------------------- */

void packed_kv_alloc(PackedKeysValues *kv, int num_keys, int key_size, int value_size)
{
    kv->num_keys = num_keys;
    kv->key_size = key_size;
    kv->value_size = value_size;
    kv->key_panels = fast_alloc_panels("packed_kv_alloc", fast_panels_size(key_size, num_keys));
    kv->value_panels = fast_alloc_panels("packed_kv_alloc",
                                         fast_panels_size(num_keys, value_size));
}

/* keys first_key .. first_key + count - 1 -> their places in the panels */
void packed_kv_fill(PackedKeysValues *kv, int first_key, int count,
                    const float *keys, size_t key_stride,
                    const float *values, size_t value_stride)
{
    const int K = kv->num_keys, d = kv->key_size, v = kv->value_size;
    if (first_key % FAST_NR != 0 || first_key < 0 || count < 0 || first_key + count > K)
        die("packed_kv_fill", "keys %d .. %d do not start a key panel inside 0 .. %d",
            first_key, first_key + count - 1, K - 1);
    /* keys (K, d) are B^T for the product q @ k^T: panel j holds keys
     * j*NR .. j*NR + NR-1 (NR = FAST_NR, 16 or 32), one row of NR per
     * component of d, so the keys of this call fill whole panels,
     * starting at panel first_key / NR */
    fast_pack_panels(keys, key_stride, true, d, count,
                     kv->key_panels + (size_t)(first_key / FAST_NR) * d * FAST_NR);
    /* values (K, v) are B for weights @ values: panel j holds value
     * components j*NR .. j*NR + NR-1, one row of NR per key, all K keys in
     * a panel; this call's keys are rows first_key .. of every panel */
    for (int j = 0; j * FAST_NR < v; j++) {
        const int width = v - j * FAST_NR < FAST_NR ? v - j * FAST_NR : FAST_NR;
        float *panel = kv->value_panels + ((size_t)j * K + first_key) * FAST_NR;
        for (int r = 0; r < count; r++) {
            float *dst = panel + (size_t)r * FAST_NR;
            memcpy(dst, values + (size_t)r * value_stride + j * FAST_NR,
                   (size_t)width * sizeof(float));
            for (int c = width; c < FAST_NR; c++)
                dst[c] = 0.0f;   /* padding columns give 0, never garbage */
        }
    }
}

void packed_kv_init(PackedKeysValues *kv, const float *keys, size_t key_stride,
                    const float *values, size_t value_stride,
                    int num_keys, int key_size, int value_size)
{
    packed_kv_alloc(kv, num_keys, key_size, value_size);
    packed_kv_fill(kv, 0, num_keys, keys, key_stride, values, value_stride);
}

void packed_kv_free(PackedKeysValues *kv)
{
    free(kv->key_panels);
    free(kv->value_panels);
    kv->key_panels = kv->value_panels = NULL;
}

/* ---- small row helpers ------------------------------------------------------ */

/* Lane by lane: the larger of a and b (b where either is NaN). */
static inline vf max_vec(vf a, vf b)
{
    vi a_bigger = a > b;
    return (vf)((a_bigger & (vi)a) | (~a_bigger & (vi)b));
}

/* Largest of row[0..n), n >= 1. Four running maxima of a vector each: one
 * alone would make every step wait for the previous comparison. */
static float row_max(const float *row, int n)
{
    enum { V = FAST_VEC };
    float best = row[0];
    int j = 0;
    if (n >= 4 * V) {
        vf m0, m1, m2, m3;
        memcpy(&m0, row, sizeof m0);
        m1 = m2 = m3 = m0;
        for (; j + 4 * V <= n; j += 4 * V) {
            vf x0, x1, x2, x3;
            memcpy(&x0, row + j, sizeof x0);
            memcpy(&x1, row + j + V, sizeof x1);
            memcpy(&x2, row + j + 2 * V, sizeof x2);
            memcpy(&x3, row + j + 3 * V, sizeof x3);
            m0 = max_vec(x0, m0);
            m1 = max_vec(x1, m1);
            m2 = max_vec(x2, m2);
            m3 = max_vec(x3, m3);
        }
        vf lanes = max_vec(max_vec(m0, m1), max_vec(m2, m3));
        for (int lane = 0; lane < V; lane++)
            if (lanes[lane] > best)
                best = lanes[lane];
    }
    for (; j < n; j++)
        if (row[j] > best)
            best = row[j];
    return best;
}

/* dst[0..n) = src[0..n) * factor (dst may be src), a vector at a time; the
 * compiler at -O2 leaves such a loop scalar when n is not known. */
static void scale_row(float *dst, const float *src, int n, float factor)
{
    int j = 0;
    for (; j + FAST_VEC <= n; j += FAST_VEC) {
        vf x;
        memcpy(&x, src + j, sizeof x);
        x *= factor;
        memcpy(dst + j, &x, sizeof x);
    }
    for (; j < n; j++)
        dst[j] = src[j] * factor;
}

/* ---- one block of queries ---------------------------------------------------- */

typedef struct {
    float *q;      /* (Br, d)  the block's queries, already divided by sqrt(d) */
    float *s;      /* (Br, Bc) scores, then weights, of one key block */
    float *o;      /* (Br, v)  running output, not yet divided by l */
    float *m;      /* (Br,)    running maximum */
    float *l;      /* (Br,)    running sum of exponentials */
    int *len;      /* (Br,)    valid length of each query */
} Scratch;

enum { BR = STREAM_BLOCK_QUERIES, BC = STREAM_BLOCK_KEYS };

/* queries (rows, d) at query_stride, len (rows,) -> out (rows, v) at out_stride */
static void query_block(const PackedKeysValues *kv, const float *queries, size_t query_stride,
                        int rows, const int *len, float *out, size_t out_stride,
                        const Scratch *w)
{
    const int d = kv->key_size, v = kv->value_size, K = kv->num_keys;
    /* Dividing the queries by sqrt(d) once is the same as dividing every
     * score: (q / sqrt(d)) . k = (q . k) / sqrt(d), up to rounding, for d
     * divisions per query instead of K. */
    const float inv_sqrt_d = (float)(1.0 / sqrt((double)d));
    int longest = 0;   /* keys past every query's valid_len are never read */
    for (int r = 0; r < rows; r++) {
        scale_row(w->q + (size_t)r * d, queries + (size_t)r * query_stride, d, inv_sqrt_d);
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
        if (len[r] > longest)
            longest = len[r];
    }
    memset(w->o, 0, (size_t)rows * v * sizeof(float));

    for (int k0 = 0; k0 < longest; k0 += BC) {
        const int block_keys = longest - k0 < BC ? longest - k0 : BC;

        /* pass 1: s = q @ k^T for keys k0 .. k0 + block_keys - 1. The key
         * panels start every FAST_NR keys, and BC is a multiple of it. */
        const size_t key_panel_stride = (size_t)d * FAST_NR;
        fast_block(rows, block_keys, d, w->q, (size_t)d,
                   kv->key_panels + (size_t)(k0 / FAST_NR) * key_panel_stride, key_panel_stride,
                   w->s, BC, false);

        for (int r = 0; r < rows; r++) {
            float *s_row = w->s + (size_t)r * BC;
            /* The mask as a loop bound: keys k0 + j with j >= valid are
             * masked for this query. Their weights are set to exactly 0
             * (replaced, as in the clear masked_softmax). */
            int valid = len[r] - k0;
            valid = valid < 0 ? 0 : (valid > block_keys ? block_keys : valid);
            if (valid == 0) {
                memset(s_row, 0, (size_t)block_keys * sizeof(float));
                continue;   /* nothing new for this query: m, l, o unchanged */
            }
            /* pass 2: the new maximum and the weights under it */
            float m_new = row_max(s_row, valid);
            if (w->m[r] > m_new)
                m_new = w->m[r];
            /* exp(m - m') <= 1 shrinks what was summed under the old
             * maximum; for the first block m = -inf and it is 0 (o and l
             * are still 0 then, so nothing is lost). */
            float rescale = m_new == w->m[r]     ? 1.0f
                          : w->m[r] == -INFINITY ? 0.0f
                                                 : fast_expf(w->m[r] - m_new);
            float block_sum = fast_exp_shift_sum(s_row, (size_t)valid, m_new);
            memset(s_row + valid, 0, (size_t)(block_keys - valid) * sizeof(float));
            w->l[r] = w->l[r] * rescale + block_sum;
            w->m[r] = m_new;
            /* pass 3: o *= exp(m - m'), skipped when the maximum did not move */
            if (rescale != 1.0f)
                scale_row(w->o + (size_t)r * v, w->o + (size_t)r * v, v, rescale);
        }

        /* pass 4: o += weights (rows, block_keys) @ values (block_keys, v).
         * A value panel holds FAST_NR components for all K keys, so this block's
         * rows start k0 rows into each panel. */
        const size_t value_panel_stride = (size_t)K * FAST_NR;
        fast_block(rows, v, block_keys, w->s, BC,
                   kv->value_panels + (size_t)k0 * FAST_NR, value_panel_stride,
                   w->o, (size_t)v, true);
    }

    /* out = o / l; a query that saw no key (valid_len 0) has l = 0 and
     * gets zeros, like the clear version's all-zero weight row. (A NaN in
     * a key or value that a query reads makes its output NaN, as in the
     * clear one. Unlike the clear one, a value row past every valid length
     * of a block of queries is never read, so a NaN there stays unseen.) */
    for (int r = 0; r < rows; r++) {
        float *out_row = out + (size_t)r * out_stride;
        const float *o_row = w->o + (size_t)r * v;
        if (w->l[r] == 0.0f)
            memset(out_row, 0, (size_t)v * sizeof(float));
        else
            scale_row(out_row, o_row, v, 1.0f / w->l[r]);
    }
}

void streaming_attention_rows(const PackedKeysValues *kv, const float *queries,
                              size_t query_stride, int num_queries,
                              const ValidLens *valid_lens, int batch_index, int first_query,
                              float *out, size_t out_stride)
{
    if (num_queries <= 0)
        return;
    const int d = kv->key_size, v = kv->value_size;
    Scratch w;
    w.q = fast_alloc_panels("streaming_attention", (size_t)BR * d);
    w.s = fast_alloc_panels("streaming_attention", (size_t)BR * BC);
    w.o = fast_alloc_panels("streaming_attention", (size_t)BR * v);
    w.m = checked_malloc("streaming_attention", BR, sizeof(float));
    w.l = checked_malloc("streaming_attention", BR, sizeof(float));
    w.len = checked_malloc("streaming_attention", BR, sizeof(int));

    for (int q0 = 0; q0 < num_queries; q0 += BR) {
        int rows = num_queries - q0 < BR ? num_queries - q0 : BR;
        for (int r = 0; r < rows; r++)
            w.len[r] = valid_lens ? valid_len_at(valid_lens, batch_index, first_query + q0 + r)
                                  : kv->num_keys;
        query_block(kv, queries + (size_t)q0 * query_stride, query_stride, rows, w.len,
                    out + (size_t)q0 * out_stride, out_stride, &w);
    }
    free(w.q);
    free(w.s);
    free(w.o);
    free(w.m);
    free(w.l);
    free(w.len);
}

/* ---- the tensor form ----------------------------------------------------------- */

typedef struct {
    const PackedKeysValues *kv;
    const Tensor *queries;
    const ValidLens *valid_lens;
    Tensor *output;
    int batch_index, num_threads;
} SequenceJob;

/* Thread t takes a contiguous share of the sequence's query blocks. */
static void sequence_rows(void *arg, int thread)
{
    const SequenceJob *job = arg;
    const int T = job->queries->shape[1], d = job->queries->shape[2];
    const int v = job->output->shape[2];
    const int blocks = (T + BR - 1) / BR;
    const int first = (int)((long)blocks * thread / job->num_threads) * BR;
    int last = (int)((long)blocks * (thread + 1) / job->num_threads) * BR;
    if (last > T)
        last = T;
    if (first >= last)
        return;
    const size_t b = (size_t)job->batch_index;
    streaming_attention_rows(job->kv, job->queries->data + (b * T + (size_t)first) * d, (size_t)d,
                             last - first, job->valid_lens, job->batch_index, first,
                             job->output->data + (b * T + (size_t)first) * v, (size_t)v);
}

/* queries (B, T, d), keys (B, K, d), values (B, K, v) -> output (B, T, v) */
Tensor *streaming_attention(const Tensor *queries, const Tensor *keys,
                            const Tensor *values, const ValidLens *valid_lens,
                            int num_threads)
{
    /* the same shape rule as dot_product_attention, stated once */
    const AttentionSizes n = attention_check_shapes("streaming_attention", queries, keys,
                                                    values, valid_lens);
    const int batch_size = n.batch_size, num_queries = n.num_queries, num_keys = n.num_keys;
    const int d = n.d, v = n.v;

    Tensor *output = tensor_zeros(SHAPE(batch_size, num_queries, v));
    int blocks = (num_queries + BR - 1) / BR;
    if (num_threads > blocks)
        num_threads = blocks;   /* a thread gets whole blocks or nothing */
    if (num_threads < 1)
        num_threads = 1;
    for (int b = 0; b < batch_size; b++) {
        /* pack this sequence's keys and values once; every thread reads them */
        PackedKeysValues kv;
        packed_kv_init(&kv, keys->data + (size_t)b * num_keys * d, (size_t)d,
                       values->data + (size_t)b * num_keys * v, (size_t)v, num_keys, d, v);
        SequenceJob job = {&kv, queries, valid_lens, output, b, num_threads};
        fast_parallel(num_threads, sequence_rows, &job);
        packed_kv_free(&kv);
    }
    return output;
}
