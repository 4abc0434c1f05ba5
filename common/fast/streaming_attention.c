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
 * and each block of Bc keys goes through four passes, one register tile
 * of FAST_MR queries at a time (so that its scores stay in the fastest
 * cache from the product that makes them to the one that reads them):
 *   pass 1: scores s = q k^T / sqrt(d), (FAST_MR, Bc), with the register-
 *           tile kernel of fast_matmul.c
 *   pass 2: per query, the new maximum, the rescale factor exp(m - m'),
 *           the weights exp(s - m') (0 for masked keys), l and m updated
 *   pass 3: o rescaled by exp(m - m')
 *   pass 4: o += weights @ values, the register-tile kernel again
 * After the last block, out = o / l.
 */
#include "fast/streaming_attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_exp.h"
#include "attention.h"
#include "softmax.h"
#include "fast/fast_matmul.h"
#include "fast/fast_vector.h"

/* ---- packing ---------------------------------------------------------------- */

void packed_kv_alloc(PackedKeysValues *kv, int num_keys, int key_size, int value_size)
{
    kv->num_keys = num_keys;
    kv->key_size = key_size;
    kv->value_size = value_size;
    kv->key_panels = fast_alloc_panels(fast_panels_size(key_size, num_keys));
    kv->value_panels = fast_alloc_panels(
                                         fast_panels_size(num_keys, value_size));
}

/* keys first_key .. first_key + count - 1 -> their places in the panels */
void packed_kv_fill(PackedKeysValues *kv, int first_key, int count,
                    const float *keys, size_t key_stride,
                    const float *values, size_t value_stride)
{
    const int K = kv->num_keys, d = kv->key_size, v = kv->value_size;
    if (first_key % FAST_NR != 0 || first_key < 0 || count < 0 || first_key + count > K)
        die("keys %d .. %d do not start a key panel inside 0 .. %d",
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
            const float *src = values + (size_t)r * value_stride + j * FAST_NR;
            if (width == FAST_NR) {
                /* a copy of known size: vector moves (of a size known only
                 * at run time, GCC makes it a slow string instruction) */
                memcpy(dst, src, FAST_NR * sizeof(float));
                continue;
            }
            memcpy(dst, src, (size_t)width * sizeof(float));
            for (int c = width; c < FAST_NR; c++)
                dst[c] = 0.0f;   /* padding columns give 0, never garbage */
        }
    }
}

void packed_kv_free(PackedKeysValues *kv)
{
    fast_free_panels(kv->key_panels);
    fast_free_panels(kv->value_panels);
    kv->key_panels = kv->value_panels = NULL;
}

/* ---- small row helpers ------------------------------------------------------ */

/* dst[0..n) = src[0..n) * factor (dst may be src), a vector at a time; the
 * compiler at -O2 leaves such a loop scalar when n is not known. */
static void scale_row(float *dst, const float *src, size_t n, float factor)
{
    size_t j = 0;
    for (; j + FAST_VEC <= n; j += FAST_VEC)
        store_vec(dst + j, load_vec(src + j) * factor);
    for (; j < n; j++)
        dst[j] = src[j] * factor;
}

/* The dot product of a[0..n) and b[0..n): a vector of partial sums, then
 * its lanes. */
static float dot_row(const float *a, const float *b, int n)
{
    vf sum = {0};
    int j = 0;
    for (; j + FAST_VEC <= n; j += FAST_VEC)
        sum += load_vec(a + j) * load_vec(b + j);
    float total = lanes_sum(sum);
    for (; j < n; j++)
        total += a[j] * b[j];
    return total;
}

/* ---- one block of queries ---------------------------------------------------- */

struct StreamingScratch {
    float *q;      /* (Br, d)  the block's queries, already divided by sqrt(d) */
    float *s;      /* (FAST_MR, Bc) scores, then weights, of one tile's queries */
    float *o;      /* (Br, v)  running output, not yet divided by l */
    float *m;      /* (Br,)    running maximum */
    float *l;      /* (Br,)    running sum of exponentials */
    int *len;      /* (Br,)    valid length of each query */
};
typedef struct StreamingScratch Scratch;

enum { BR = STREAM_BLOCK_QUERIES, BC = STREAM_BLOCK_KEYS };
_Static_assert((int)FAST_MR <= (int)STREAM_TILE_QUERIES, "a tile's scores fit in the scratch");
_Static_assert(BC % FAST_VEC == 0, "a row of scores is a whole number of vectors");

/* After the last block: out (rows, v) = o / l, and lse (rows,) when not
 * NULL. A query that saw no key (valid_len 0) has l = 0 and gets zeros,
 * like the clear version's all-zero weight row. (A NaN in a key or value
 * that a query reads makes its output NaN, as in the clear one. Unlike the
 * clear one, a value row past every valid length of a block of queries is
 * never read, so a NaN there stays unseen.) */
static void finish_rows(const Scratch *w, int rows, int v, float *out, size_t out_stride,
                        float *lse)
{
    for (int r = 0; r < rows; r++) {
        float *out_row = out + (size_t)r * out_stride;
        if (w->l[r] == 0.0f)
            memset(out_row, 0, (size_t)v * sizeof(float));
        else
            scale_row(out_row, w->o + (size_t)r * v, (size_t)v, 1.0f / w->l[r]);
        /* What the backward keeps of the row: log(sum_j exp(s_j)) =
         * m + log(l), so that exp(s_j - lse) is the weight itself; -inf
         * for a query with no key, all of whose weights are 0. */
        if (lse != NULL)
            lse[r] = w->l[r] == 0.0f ? -INFINITY : w->m[r] + logf(w->l[r]);
    }
}

/* Before the first block: the queries (rows, d) at query_stride, divided
 * by sqrt(d), into w->q; m = -inf, l = 0 and o = 0 for every row. Returns
 * the longest of the rows' lengths len (rows,): keys past it are never
 * read. */
static int start_rows(const Scratch *w, const float *queries, size_t query_stride, int rows,
                      const int *len, int d, int v)
{
    /* Dividing the queries by sqrt(d) once is the same as dividing every
     * score: (q / sqrt(d)) . k = (q . k) / sqrt(d), up to rounding, for d
     * divisions per query instead of K. */
    const float inv_sqrt_d = (float)(1.0 / sqrt((double)d));
    int longest = 0;
    for (int r = 0; r < rows; r++) {
        scale_row(w->q + (size_t)r * d, queries + (size_t)r * query_stride, d, inv_sqrt_d);
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
        if (len[r] > longest)
            longest = len[r];
    }
    memset(w->o, 0, (size_t)rows * v * sizeof(float));
    return longest;
}

/* Passes 2 and 3 for the tile of queries r0 .. r0 + tile_rows - 1 against
 * keys k0 .. k0 + tile_keys - 1: their scores in w->s become weights
 * exp(s - m') under each query's new maximum m', and what the earlier
 * blocks summed under the old maximum m (l and o) is scaled to m'. */
static void online_softmax_tile(const Scratch *w, int r0, int tile_rows, const int *len, int k0,
                                int tile_keys, int v)
{
    for (int r = r0; r < r0 + tile_rows; r++) {
        float *s_row = w->s + (size_t)(r - r0) * BC;
        /* The mask as a loop bound: keys k0 + j with j >= valid are
         * masked for this query. Their weights are set to exactly 0
         * (replaced, as in the clear masked_softmax). */
        int valid = len[r] - k0;
        valid = valid < 0 ? 0 : (valid > tile_keys ? tile_keys : valid);
        memset(s_row + valid, 0, (size_t)(tile_keys - valid) * sizeof(float));
        if (valid == 0)
            continue;   /* nothing new for this query: m, l, o unchanged */
        /* pass 2: the new maximum and the weights under it */
        /* s_row runs on to BC floats, a whole number of vectors: the
         * padded forms read the last vector whole */
        float m_new = fast_row_max_padded(s_row, (size_t)valid);
        if (w->m[r] > m_new)
            m_new = w->m[r];
        /* exp(m - m') <= 1 shrinks what was summed under the old maximum;
         * for the first block m = -inf and it is 0 (o and l are still 0
         * then, so nothing is lost). */
        float rescale = m_new == w->m[r]     ? 1.0f
                      : w->m[r] == -INFINITY ? 0.0f
                                             : fast_expf(w->m[r] - m_new);
        w->l[r] = w->l[r] * rescale + fast_exp_shift_sum_padded(s_row, (size_t)valid, m_new);
        w->m[r] = m_new;
        /* pass 3: o *= exp(m - m'), skipped when the maximum did not move */
        if (rescale != 1.0f)
            scale_row(w->o + (size_t)r * v, w->o + (size_t)r * v, v, rescale);
    }
}

/* queries (rows, d) at query_stride, len (rows,) -> out (rows, v) at
 * out_stride, and lse (rows,) when not NULL */
static void query_block(const PackedKeysValues *kv, const float *queries, size_t query_stride,
                        int rows, const int *len, float *out, size_t out_stride, float *lse,
                        const Scratch *w)
{
    const int d = kv->key_size, v = kv->value_size, K = kv->num_keys;
    const int longest = start_rows(w, queries, query_stride, rows, len, d, v);

    const size_t key_panel_stride = (size_t)d * FAST_NR;
    const size_t value_panel_stride = (size_t)K * FAST_NR;
    for (int k0 = 0; k0 < longest; k0 += BC) {
        const int block_keys = longest - k0 < BC ? longest - k0 : BC;
        /* The key panels start every FAST_NR keys, and BC is a multiple
         * of it; a value panel holds FAST_NR components for all K keys,
         * so this block's rows start k0 rows into each panel. */
        const float *key_panels = kv->key_panels + (size_t)(k0 / FAST_NR) * key_panel_stride;
        const float *value_panels = kv->value_panels + (size_t)k0 * FAST_NR;
        /* One register tile of FAST_MR queries at a time through all four
         * passes, so that its scores (FAST_MR x Bc floats) stay in the
         * fastest cache from the product that makes them to the one that
         * reads them; the block's key and value panels stay in the next
         * cache while the block's tiles pass over them. A tile stops at
         * the last key one of its queries sees: under a causal mask, of
         * the masked corner only the tiles' small triangles are computed. */
        for (int r0 = 0; r0 < rows; r0 += FAST_MR) {
            const int tile_rows = rows - r0 < FAST_MR ? rows - r0 : FAST_MR;
            int tile_keys = 0;   /* keys k0 .. k0 + tile_keys - 1 */
            for (int r = r0; r < r0 + tile_rows; r++)
                tile_keys = len[r] - k0 > tile_keys ? len[r] - k0 : tile_keys;
            if (tile_keys > block_keys)
                tile_keys = block_keys;
            if (tile_keys == 0)
                continue;   /* nothing new for these queries: m, l, o unchanged */

            /* pass 1: s = q @ k^T, with the register-tile kernel */
            fast_block(tile_rows, tile_keys, d, w->q + (size_t)r0 * d, (size_t)d, key_panels,
                       key_panel_stride, w->s, BC, false);

            // passes 2 and 3: the tile's scores become weights, and m, l, o follow
            online_softmax_tile(w, r0, tile_rows, len, k0, tile_keys, v);

            /* pass 4: o += weights (tile_rows, tile_keys) @ values (tile_keys, v) */
            fast_block(tile_rows, v, tile_keys, w->s, BC, value_panels, value_panel_stride,
                       w->o + (size_t)r0 * v, (size_t)v, true);
        }
    }

    finish_rows(w, rows, v, out, out_stride, lse);
}

static void scratch_alloc(Scratch *w, int d, int v)
{
    w->q = fast_alloc_panels((size_t)BR * d);
    w->s = fast_alloc_panels((size_t)STREAM_TILE_QUERIES * BC);
    w->o = fast_alloc_panels((size_t)BR * v);
    w->m = checked_malloc(BR, sizeof(float));
    w->l = checked_malloc(BR, sizeof(float));
    w->len = checked_malloc(BR, sizeof(int));
}

static void scratch_free(Scratch *w)
{
    fast_free_panels(w->q);
    fast_free_panels(w->s);
    fast_free_panels(w->o);
    free(w->m);
    free(w->l);
    free(w->len);
}

/* streaming_attention_rows with its scratch given: up to Br rows at a time */
static void rows_in_blocks(const PackedKeysValues *kv, const float *queries, size_t query_stride,
                           int num_queries, const ValidLens *valid_lens, int batch_index,
                           int first_query, float *out, size_t out_stride, float *logsumexp,
                           Scratch *w)
{
    for (int q0 = 0; q0 < num_queries; q0 += BR) {
        int rows = num_queries - q0 < BR ? num_queries - q0 : BR;
        for (int r = 0; r < rows; r++)
            w->len[r] = valid_lens ? valid_len_at(valid_lens, batch_index, first_query + q0 + r)
                                   : kv->num_keys;
        query_block(kv, queries + (size_t)q0 * query_stride, query_stride, rows, w->len,
                    out + (size_t)q0 * out_stride, out_stride,
                    logsumexp != NULL ? logsumexp + q0 : NULL, w);
    }
}

void streaming_attention_rows(const PackedKeysValues *kv, const float *queries,
                              size_t query_stride, int num_queries,
                              const ValidLens *valid_lens, int batch_index, int first_query,
                              float *out, size_t out_stride, float *logsumexp)
{
    if (num_queries <= 0)
        return;
    Scratch w;
    scratch_alloc(&w, kv->key_size, kv->value_size);
    rows_in_blocks(kv, queries, query_stride, num_queries, valid_lens, batch_index, first_query,
                   out, out_stride, logsumexp, &w);
    scratch_free(&w);
}

StreamingScratch *streaming_scratch_new(int key_size, int value_size)
{
    StreamingScratch *w = checked_malloc(1, sizeof *w);
    scratch_alloc(w, key_size, value_size);
    return w;
}

void streaming_scratch_free(StreamingScratch *scratch)
{
    if (scratch == NULL)
        return;
    scratch_free(scratch);
    free(scratch);
}

void streaming_attention_rows_scratch(const PackedKeysValues *kv, const float *queries,
                                      size_t query_stride, int num_queries,
                                      const ValidLens *valid_lens, int batch_index,
                                      int first_query, float *out, size_t out_stride,
                                      float *logsumexp, StreamingScratch *scratch)
{
    if (num_queries > 0)
        rows_in_blocks(kv, queries, query_stride, num_queries, valid_lens, batch_index,
                       first_query, out, out_stride, logsumexp, scratch);
}

/* ---- the tensor form ----------------------------------------------------------- */

/* The whole batch is one parallel loop, so the threads start and meet
 * once per call, not once per sequence: job j is query block
 * blocks - 1 - j % blocks of sequence j / blocks, each sequence's blocks
 * from the last to the first. Under a causal mask (valid_lens_causal)
 * block i reads i + 1 blocks of keys, so within a sequence the costliest
 * go first, and the cheap first blocks of the last sequence fill the
 * gaps at the end: the threads finish within about one small block of
 * each other. Jobs are handed out one at a time from a shared counter, so
 * a thread slowed down (by another program on its core) simply takes
 * fewer. Each thread packs the keys and values of the sequence its job
 * is in, into memory of its own that it reuses from sequence to sequence
 * (fresh memory costs a page fault per 4 KB, dearer than the packing).
 * A block's result is the same whichever thread takes it: the output
 * does not depend on the thread count. */
typedef struct {
    const Tensor *queries, *keys, *values;
    const ValidLens *valid_lens;
    Tensor *output;
    Tensor *logsumexp;        /* (B, T), or NULL */
    atomic_int next_block;
} ForwardJobs;

static void query_blocks(void *arg, int thread)
{
    (void)thread;
    ForwardJobs *jobs = arg;
    const int B = jobs->queries->shape[0], T = jobs->queries->shape[1];
    const int d = jobs->queries->shape[2], v = jobs->output->shape[2];
    const int K = jobs->keys->shape[1];
    const int blocks = (T + BR - 1) / BR;
    Scratch w;
    scratch_alloc(&w, d, v);
    PackedKeysValues kv;
    packed_kv_alloc(&kv, K, d, v);
    size_t packed = SIZE_MAX;   /* the sequence whose keys kv holds: none yet */
    for (int job = atomic_fetch_add(&jobs->next_block, 1); job < B * blocks;
         job = atomic_fetch_add(&jobs->next_block, 1)) {
        const size_t b = (size_t)(job / blocks);
        const int first = (blocks - 1 - job % blocks) * BR;
        const int rows = T - first < BR ? T - first : BR;
        if (b != packed)
            packed_kv_fill(&kv, 0, K, jobs->keys->data + b * K * d, (size_t)d,
                           jobs->values->data + b * K * v, (size_t)v);
        packed = b;
        float *lse = jobs->logsumexp ? jobs->logsumexp->data + b * T + (size_t)first : NULL;
        rows_in_blocks(&kv, jobs->queries->data + (b * T + (size_t)first) * d, (size_t)d, rows,
                       jobs->valid_lens, (int)b, first,
                       jobs->output->data + (b * T + (size_t)first) * v, (size_t)v, lse, &w);
    }
    packed_kv_free(&kv);
    scratch_free(&w);
}

/* queries (B, T, d), keys (B, K, d), values (B, K, v) -> output (B, T, v),
 * and logsumexp (B, T) when not NULL */
Tensor *streaming_attention_cache(const Tensor *queries, const Tensor *keys,
                                 const Tensor *values, const ValidLens *valid_lens,
                                 int num_threads, Tensor **logsumexp)
{
    /* the same shape rule as dot_product_attention, stated once */
    const AttentionSizes n = attention_check_shapes(queries, keys, values, valid_lens);
    const int B = n.batch_size, T = n.num_queries, v = n.v;

    /* every row of both is written (finish_rows) */
    Tensor *output = fast_tensor_empty(SHAPE(B, T, v));
    Tensor *lse = logsumexp != NULL ? fast_tensor_empty(SHAPE(B, T)) : NULL;
    ForwardJobs jobs = {queries, keys, values, valid_lens, output, lse, 0};
    atomic_init(&jobs.next_block, 0);
    /* a thread gets whole blocks, or nothing */
    const int blocks = B * ((T + BR - 1) / BR);
    num_threads = num_threads < 1 ? 1 : num_threads;
    fast_parallel(num_threads < blocks ? num_threads : blocks, query_blocks, &jobs);
    if (logsumexp != NULL)
        *logsumexp = lse;
    return output;
}

Tensor *streaming_attention(const Tensor *queries, const Tensor *keys,
                            const Tensor *values, const ValidLens *valid_lens,
                            int num_threads)
{
    return streaming_attention_cache(queries, keys, values, valid_lens, num_threads, NULL);
}

/* ==== backward ========================================================================= */
/*
 * Legend as above, and Bk x Bq = STREAM_BACKWARD_KEYS x STREAM_BACKWARD_QUERIES.
 *
 * The forward's passes run backwards for one block of Bk keys against each
 * block of Bq queries in turn. Scores and weights are recomputed, never
 * stored: the forward kept lse = log(sum_j exp(s_j)) per query, so the
 * weight of key j is exp(s_j - lse) at once, with no maximum or sum to
 * find again (and nothing of pass 3, the rescaling, to undo):
 *
 *   pass 1 again:     S^T = K_j Q_i^T / sqrt(d)                  (Bk, Bq)
 *   pass 2 again:     P^T = exp(S^T - lse), 0 where masked
 *   pass 4 backwards: dV_j += P^T dO_i;   dP^T = V_j dO_i^T
 *   pass 2 backwards: dS^T = P^T * (dP^T - delta)
 *   pass 1 backwards: dK_j += dS^T Q_i / sqrt(d);   dQ_i += dS K_j / sqrt(d)
 *
 * dP^T needs no weight, so it is computed first, beside S^T; then one
 * sweep turns S^T into P^T and dP^T into dS^T row by row, each row of P^T
 * used while it is still in the nearest cache.
 *
 * delta is the softmax backward's row sum, sum_j dP_j P_j, which would need
 * the whole row of keys. It is a dot product per query instead, computed
 * before any block: dP_j = dO . v_j, so
 *   sum_j dP_j P_j = dO . (sum_j P_j v_j) = dO . O,
 * with O the forward's output. (This is FlashAttention-2's backward.)
 *
 * Why keys as rows (S^T, not S): the register-tile kernel reads its left
 * operand by rows, and P^T and dS^T are the left operands of dV and dK;
 * computed transposed, they are rows already. dS, the left operand of dQ,
 * is dS^T read by columns (fast_block_at): nothing is ever transposed.
 */

enum { BQ = STREAM_BACKWARD_QUERIES, BK = STREAM_BACKWARD_KEYS };
_Static_assert(BQ % FAST_NR == 0, "a block of queries must start a transposed panel");

void streaming_backward_scratch_alloc(StreamingBackwardScratch *w, int num_queries,
                                      int key_size, int value_size)
{
    const int T = num_queries, d = key_size, v = value_size;
    w->num_queries = T;
    w->key_size = d;
    w->value_size = v;
    w->query_panels_t = fast_alloc_panels(fast_panels_size(d, T));
    w->query_panels = fast_alloc_panels(fast_panels_size(T, d));
    w->grad_output_panels_t = fast_alloc_panels(fast_panels_size(v, T));
    w->grad_output_panels = fast_alloc_panels(fast_panels_size(T, v));
    w->key_panels = fast_alloc_panels(fast_panels_size(BK, d));
    w->delta = checked_malloc((size_t)T, sizeof(float));
    w->len = checked_malloc((size_t)T, sizeof(int));
    w->p = fast_alloc_panels((size_t)BK * BQ);
    w->dp = fast_alloc_panels((size_t)BK * BQ);
    /* never read before written, but a skipped tile leaves what was there
     * (block_pair): let that be numbers from the start */
    memset(w->p, 0, (size_t)BK * BQ * sizeof(float));
    memset(w->dp, 0, (size_t)BK * BQ * sizeof(float));
}

void streaming_backward_scratch_free(StreamingBackwardScratch *w)
{
    fast_free_panels(w->query_panels_t);
    fast_free_panels(w->query_panels);
    fast_free_panels(w->grad_output_panels_t);
    fast_free_panels(w->grad_output_panels);
    fast_free_panels(w->key_panels);
    free(w->delta);
    free(w->len);
    fast_free_panels(w->p);
    fast_free_panels(w->dp);
    memset(w, 0, sizeof *w);
}

/* Everything of one sequence that every block pair reads, prepared once:
 * Q / sqrt(d) as panels both ways, dO as panels both ways, delta (T,) =
 * rowsum(dO * O) and the valid lengths. Returns the longest length: keys
 * from there on are seen by no query. */
static int prepare_sequence(const AttentionRowsBackward *a, StreamingBackwardScratch *w)
{
    const int T = a->num_queries, d = a->key_size, v = a->value_size;
    const float inv_sqrt_d = (float)(1.0 / sqrt((double)d));
    /* the same float q * (1 / sqrt(d)) as the forward's, so the recomputed
     * scores are the forward's bit for bit */
    fast_pack_panels(a->queries, a->query_stride, true, d, T, w->query_panels_t);
    scale_row(w->query_panels_t, w->query_panels_t, fast_panels_size(d, T), inv_sqrt_d);
    fast_pack_panels(a->queries, a->query_stride, false, T, d, w->query_panels);
    scale_row(w->query_panels, w->query_panels, fast_panels_size(T, d), inv_sqrt_d);
    fast_pack_panels(a->grad_output, a->grad_output_stride, true, v, T,
                     w->grad_output_panels_t);
    fast_pack_panels(a->grad_output, a->grad_output_stride, false, T, v, w->grad_output_panels);
    int longest = 0;
    for (int q = 0; q < T; q++) {
        const float *o_row = a->output + (size_t)q * a->output_stride;
        const float *go_row = a->grad_output + (size_t)q * a->grad_output_stride;
        w->delta[q] = dot_row(go_row, o_row, v);
        w->len[q] = a->valid_lens ? valid_len_at(a->valid_lens, a->batch_index, q)
                                  : a->num_keys;
        if (w->len[q] > longest)
            longest = w->len[q];
    }
    return longest;
}

/* The causal mask's savings, at the grain of the register tile. Under a
 * mask most of a block pair's corner is 0 (every weight and score
 * gradient of a key no query sees), and a product term whose factor is
 * exactly 0 changes no sum (an accumulator starts at +0, so it is never
 * -0, and x + 0 = x): leaving the term out gives the same bits. So:
 *
 * - S^T and dP^T (keys, queries): in the rows of one tile of keys, the
 *   panels of queries before the first that sees the tile's first key
 *   are not computed (weights_and_score_grads writes their 0s);
 * - dV += P^T dO and dK += dS^T Q, a sum over queries for each key: a tile
 *   of keys starts its sum at the first query that sees its first key;
 * - dQ += dS K, a sum over keys for each query: a tile of queries stops
 *   its sum after the last key one of them sees.
 *
 * first_seeing[k] is the first query of the block that sees key k0 + k,
 * counted in whole leading queries that do not (queries when none does). */
static void first_seeing_queries(const int *len, int keys, int queries, int k0,
                                 int *first_seeing)
{
    for (int k = 0; k < keys; k++) {
        int q = 0;
        while (q < queries && len[q] <= k0 + k)
            q++;
        first_seeing[k] = q;
    }
}

/* p (keys, queries) at row stride BQ: its first `seen` rows S^T become
 * P^T = exp(S^T - lse), lse one value per query (column), from the vector
 * that holds each row's first seeing query on (the columns before it are
 * masked). */
static void weights_of_scores(float *p, int seen, int queries, const float *lse,
                              const int *first_seeing)
{
    if (queries >= FAST_VEC) {
        for (int k = 0; k < seen; k++) {
            const int from = first_seeing[k] / FAST_VEC * FAST_VEC;
            float *row = p + (size_t)k * BQ + from;
            if (from < queries)
                fast_exp_sub(row, lse + from, row, (size_t)(queries - from));
        }
        return;
    }
    /* fewer queries than a vector has lanes (one query per sequence, say):
     * a vector exp per key would be mostly padding, so the block's scores
     * are gathered into one row, their exps taken in one pass and put back
     * (each lane's exp is its own: the same bits) */
    float x[BK * FAST_VEC], shift[BK * FAST_VEC];
    size_t n = 0;
    for (int k = 0; k < seen; k++)
        for (int q = 0; q < queries; q++, n++) {
            x[n] = p[(size_t)k * BQ + q];
            shift[n] = lse[q];
        }
    if (n > 0)
        fast_exp_sub(x, shift, x, n);
    n = 0;
    for (int k = 0; k < seen; k++)
        for (int q = 0; q < queries; q++, n++)
            p[(size_t)k * BQ + q] = x[n];
}

/* pass 2 again and pass 2 backwards, one block pair, in one sweep: p
 * (keys, queries) holds S^T and becomes P^T = exp(S^T - lse); dp holds
 * dP^T and becomes dS^T = P^T * (dP^T - delta), delta one value per query
 * (column). Key first_key + k is masked for query q when
 * first_key + k >= len[q]: its weight and its score gradient are set to
 * exactly 0 (replaced, as the forward's masked weights), whatever p and dp
 * held there: block_pair leaves the tiles that are wholly masked
 * uncomputed. The mask as loop bounds: rows below every length need none,
 * rows at or past every length are all 0. */
static void weights_and_score_grads(float *p, float *dp, int keys, int queries, int first_key,
                                    const float *lse, const float *delta, const int *len,
                                    const int *first_seeing)
{
    int shortest = len[0], longest = len[0];
    for (int q = 1; q < queries; q++) {
        shortest = len[q] < shortest ? len[q] : shortest;
        longest = len[q] > longest ? len[q] : longest;
    }
    /* keys from longest on are seen by no query of the block */
    int seen = longest - first_key;
    seen = seen < 0 ? 0 : seen > keys ? keys : seen;
    weights_of_scores(p, seen, queries, lse, first_seeing);
    for (int k = 0; k < keys; k++) {
        float *p_row = p + (size_t)k * BQ;
        float *dp_row = dp + (size_t)k * BQ;
        const int key = first_key + k;
        if (k >= seen) {
            memset(p_row, 0, (size_t)queries * sizeof(float));
            memset(dp_row, 0, (size_t)queries * sizeof(float));
            continue;
        }
        const bool masked = key >= shortest;
        int q = 0;
        for (; q + FAST_VEC <= queries; q += FAST_VEC) {
            vf x = load_vec(p_row + q);
            vf ds = x * (load_vec(dp_row + q) - load_vec(delta + q));
            if (masked) {
                /* lanes whose query's length is at most key become 0 */
                vi lens;
                memcpy(&lens, len + q, sizeof lens);
                const vi seen_by = lens > key;
                x = (vf)((vi)x & seen_by);
                ds = (vf)((vi)ds & seen_by);
                store_vec(p_row + q, x);
            }
            store_vec(dp_row + q, ds);
        }
        for (; q < queries; q++) {
            const bool seen_by = key < len[q];
            dp_row[q] = seen_by ? p_row[q] * (dp_row[q] - delta[q]) : 0.0f;
            p_row[q] = seen_by ? p_row[q] : 0.0f;
        }
    }
}

/* The products of one block pair before the weights: S^T and dP^T
 * (keys, queries), a register tile of keys at a time from the first panel
 * of queries that sees the tile's first key (see first_seeing_queries). */
static void score_tiles(const AttentionRowsBackward *a, StreamingBackwardScratch *w, int k0,
                        int keys, int q0, int queries, const int *first_seeing)
{
    const int d = a->key_size, v = a->value_size;
    /* A transposed panel starts every FAST_NR queries, and q0 is a
     * multiple of BQ, itself a multiple of FAST_NR. */
    const float *q_panels_t = w->query_panels_t + (size_t)(q0 / FAST_NR) * d * FAST_NR;
    const float *go_panels_t = w->grad_output_panels_t + (size_t)(q0 / FAST_NR) * v * FAST_NR;
    for (int i0 = 0; i0 < keys; i0 += FAST_MR) {
        const int rows = keys - i0 < FAST_MR ? keys - i0 : FAST_MR;
        const int from = first_seeing[i0] / FAST_NR * FAST_NR;   /* a whole panel */
        if (from >= queries)
            continue;
        const size_t key = (size_t)(k0 + i0);
        // pass 1 again: S^T = K_j (Q_i / sqrt(d))^T, (keys, queries)
        fast_block(rows, queries - from, d, a->keys + key * a->key_stride, a->key_stride,
                   q_panels_t + (size_t)from * d, (size_t)d * FAST_NR,
                   w->p + (size_t)i0 * BQ + from, BQ, false);
        // pass 4 backwards, its half that needs no weight: dP^T = V_j dO_i^T
        fast_block(rows, queries - from, v, a->values + key * a->value_stride, a->value_stride,
                   go_panels_t + (size_t)from * v, (size_t)v * FAST_NR,
                   w->dp + (size_t)i0 * BQ + from, BQ, false);
    }
}

/* The products of one block pair after the weights: dV_j += P^T dO_i and
 * dK_j += dS^T Q_i / sqrt(d), a tile of keys at a time from the first query
 * that sees its first key; dQ_i += dS K_j / sqrt(d), a tile of queries at a
 * time up to the last key one of them sees. */
static void gradient_tiles(const AttentionRowsBackward *a, StreamingBackwardScratch *w, int k0,
                           int keys, int q0, int queries, const int *first_seeing)
{
    const int T = a->num_queries, d = a->key_size, v = a->value_size;
    const int *len = w->len + q0;
    const size_t rows_stride = (size_t)T * FAST_NR;   /* a plain panel holds all T rows */
    for (int i0 = 0; i0 < keys; i0 += FAST_MR) {
        const int rows = keys - i0 < FAST_MR ? keys - i0 : FAST_MR;
        const int from = first_seeing[i0];
        if (from >= queries)
            continue;
        const size_t key = (size_t)(k0 + i0);
        // pass 4 backwards, the other half: dV_j += P^T dO_i
        fast_block(rows, v, queries - from, w->p + (size_t)i0 * BQ + from, BQ,
                   w->grad_output_panels + (size_t)(q0 + from) * FAST_NR, rows_stride,
                   a->grad_values + key * a->grad_value_stride, a->grad_value_stride, true);
        // pass 1 backwards: dK_j += dS^T Q_i / sqrt(d)
        fast_block(rows, d, queries - from, w->dp + (size_t)i0 * BQ + from, BQ,
                   w->query_panels + (size_t)(q0 + from) * FAST_NR, rows_stride,
                   a->grad_keys + key * a->grad_key_stride, a->grad_key_stride, true);
    }
    for (int i0 = 0; i0 < queries; i0 += FAST_MR) {
        const int rows = queries - i0 < FAST_MR ? queries - i0 : FAST_MR;
        int seen = 0;
        for (int q = i0; q < i0 + rows; q++)
            seen = len[q] - k0 > seen ? len[q] - k0 : seen;
        seen = seen > keys ? keys : seen;
        // pass 1 backwards: dQ_i += dS K_j / sqrt(d)
        if (seen > 0)
            fast_block_at(rows, d, seen, w->dp + i0, BQ, w->key_panels, (size_t)keys * FAST_NR,
                          a->grad_queries + (size_t)(q0 + i0) * a->grad_query_stride,
                          a->grad_query_stride, true);
    }
}

/* The five products of one block pair: keys k0 .. k0 + keys - 1 against
 * queries q0 .. q0 + queries - 1, with the masked corner skipped. */
static void block_pair(const AttentionRowsBackward *a, StreamingBackwardScratch *w,
                       int k0, int keys, int q0, int queries)
{
    int first_seeing[BK];
    first_seeing_queries(w->len + q0, keys, queries, k0, first_seeing);
    score_tiles(a, w, k0, keys, q0, queries, first_seeing);
    // pass 2 again: P^T = exp(S^T - lse), masked; pass 2 backwards: dS^T = P^T * (dP^T - delta)
    weights_and_score_grads(w->p, w->dp, keys, queries, k0, a->logsumexp + q0, w->delta + q0,
                            w->len + q0, first_seeing);
    gradient_tiles(a, w, k0, keys, q0, queries, first_seeing);
}

void streaming_attention_backward_rows(const AttentionRowsBackward *a, int first_key,
                                       int last_key, StreamingBackwardScratch *w)
{
    const int T = a->num_queries, d = a->key_size;
    if (T > w->num_queries || d != w->key_size || a->value_size != w->value_size)
        die("scratch made for T %d, d %d, v %d, "
            "used for T %d, d %d, v %d", w->num_queries, w->key_size, w->value_size,
            T, d, a->value_size);
    if (T <= 0)
        return;
    const int longest = prepare_sequence(a, w);
    if (last_key > longest)
        last_key = longest;   /* keys no query sees get exactly zero gradients */
    const float inv_sqrt_d = (float)(1.0 / sqrt((double)d));

    for (int k0 = first_key; k0 < last_key; k0 += BK) {
        const int keys = last_key - k0 < BK ? last_key - k0 : BK;
        /* K_j / sqrt(d) as panels, the right operand of dQ_i += dS K_j */
        fast_pack_panels(a->keys + (size_t)k0 * a->key_stride, a->key_stride, false, keys, d,
                         w->key_panels);
        scale_row(w->key_panels, w->key_panels, fast_panels_size(keys, d), inv_sqrt_d);
        for (int q0 = 0; q0 < T; q0 += BQ) {
            const int queries = T - q0 < BQ ? T - q0 : BQ;
            int block_longest = 0;   /* a block of queries that sees none of these keys */
            for (int q = q0; q < q0 + queries; q++)
                block_longest = w->len[q] > block_longest ? w->len[q] : block_longest;
            if (block_longest > k0)
                block_pair(a, w, k0, keys, q0, queries);
        }
    }
}

/* ---- the tensor form of the backward ---------------------------------------------- */

/* Job j is sequence j / parts, keys share j % parts of it. Each part
 * owns its keys' dK and dV outright; dQ gets a share from every part, so
 * part 0 adds into dQ itself and parts 1, 2, ... each into a dQ of their
 * own, added in part order at the end: the answer depends on the number
 * of parts, never on which thread ran what. */
typedef struct {
    const Tensor *queries, *keys, *values, *output, *logsumexp, *grad_output;
    const ValidLens *valid_lens;
    Tensor *grad_queries, *grad_keys, *grad_values;
    float *partial_grad_queries;   /* (B, parts - 1, T, d): parts 1, 2, ... */
    int parts;
    StreamingBackwardScratch *scratch;   /* one per thread */
    atomic_int next_job;
} BackwardJobs;

/* Keys first .. last - 1 of sequence b: the whole key blocks that part
 * `part` of `parts` takes. The parts get about the same number of block
 * pairs, not of keys: key block j is paired with every query block that
 * sees one of its keys, and under a causal mask the first keys are seen
 * by every query, the last by few. (The split depends on the lengths and
 * on parts alone, never on which thread runs what.) */
static void part_key_range(const ValidLens *valid_lens, int b, int T, int K, int part,
                           int parts, int *first, int *last)
{
    const int key_blocks = (K + BK - 1) / BK, query_blocks = (T + BQ - 1) / BQ;
    int *longest = checked_calloc((size_t)query_blocks,
                                  sizeof(int));
    for (int q = 0; q < T; q++) {
        const int len = valid_lens ? valid_len_at(valid_lens, b, q) : K;
        longest[q / BQ] = len > longest[q / BQ] ? len : longest[q / BQ];
    }
    long total = 0;   /* block pairs in the whole sequence */
    for (int j = 0; j < key_blocks; j++)
        for (int i = 0; i < query_blocks; i++)
            total += longest[i] > j * BK;
    /* key block j goes to part (pairs before it) * parts / total, which
     * never decreases with j: each part is one run of blocks */
    long before = 0;
    *first = *last = 0;
    for (int j = 0; j < key_blocks; j++) {
        const long owner = total > 0 ? before * parts / total : 0;
        if (owner < part)
            *first = (j + 1) * BK;
        if (owner <= part)
            *last = (j + 1) * BK;
        for (int i = 0; i < query_blocks; i++)
            before += longest[i] > j * BK;
    }
    *first = *first < K ? *first : K;
    *last = *last < K ? *last : K;
    *last = *last > *first ? *last : *first;
    free(longest);
}

static void backward_worker(void *arg, int thread)
{
    BackwardJobs *jobs = arg;
    const int B = jobs->queries->shape[0], T = jobs->queries->shape[1];
    const int d = jobs->queries->shape[2], K = jobs->keys->shape[1], v = jobs->values->shape[2];
    for (int job = atomic_fetch_add(&jobs->next_job, 1); job < B * jobs->parts;
         job = atomic_fetch_add(&jobs->next_job, 1)) {
        const size_t b = (size_t)(job / jobs->parts);
        const int part = job % jobs->parts;
        float *grad_queries =
            part == 0 ? jobs->grad_queries->data + b * T * d
                      : jobs->partial_grad_queries + (b * (jobs->parts - 1) + part - 1) * T * d;
        /* the backward adds into its rows: each job zeroes those it fills,
         * on its own thread, just before (part 0 the sequence's dQ, every
         * part its own dQ and its keys' dK and dV) */
        memset(grad_queries, 0, (size_t)T * d * sizeof(float));
        AttentionRowsBackward a = {
            T, K, d, v,
            jobs->queries->data + b * T * d, (size_t)d,
            jobs->keys->data + b * K * d, (size_t)d,
            jobs->values->data + b * K * v, (size_t)v,
            jobs->output->data + b * T * v, (size_t)v,
            jobs->grad_output->data + b * T * v, (size_t)v,
            jobs->logsumexp->data + b * T, jobs->valid_lens, (int)b,
            grad_queries, (size_t)d,
            jobs->grad_keys->data + b * K * d, (size_t)d,
            jobs->grad_values->data + b * K * v, (size_t)v,
        };
        int first = 0, last = K;
        if (jobs->parts > 1)
            part_key_range(jobs->valid_lens, (int)b, T, K, part, jobs->parts, &first, &last);
        /* keys past every part's range (in blocks no query sees) get
         * zeros from the last part */
        const int zero_last = part == jobs->parts - 1 ? K : last;
        memset(a.grad_keys + (size_t)first * d, 0, (size_t)(zero_last - first) * d * sizeof(float));
        memset(a.grad_values + (size_t)first * v, 0,
               (size_t)(zero_last - first) * v * sizeof(float));
        streaming_attention_backward_rows(&a, first, last, &jobs->scratch[thread]);
    }
}

/* The dQ of parts 1 .. parts - 1 of every sequence, added to part 0's in
 * part order: jobs->grad_queries (B, T, d) += the partial ones. */
static void add_partial_grad_queries(const BackwardJobs *jobs, int B, int T, int d)
{
    const int parts = jobs->parts;
    for (int b = 0; b < B; b++)
        for (int part = 1; part < parts; part++) {
            const float *src =
                jobs->partial_grad_queries + ((size_t)b * (parts - 1) + part - 1) * T * d;
            float *dst = jobs->grad_queries->data + (size_t)b * T * d;
            for (size_t i = 0; i < (size_t)T * d; i++)
                dst[i] += src[i];
        }
}

/* Into how many parts each of B sequences of K keys is split, one job
 * each, for num_threads threads. Whole sequences are the cheapest jobs:
 * each part packs the sequence's queries and output gradient again and
 * adds a dQ of its own, work that whole sequences never do. So a
 * sequence's keys are split into parts only until there are
 * JOBS_PER_THREAD jobs per thread, as far as its key blocks go: with
 * fewer, one thread would wait for the other's last sequence. */
static int backward_parts(int B, int K, int num_threads)
{
    enum { JOBS_PER_THREAD = 2 };
    const int blocks = (K + BK - 1) / BK;
    int parts = num_threads == 1 ? 1 : (JOBS_PER_THREAD * num_threads + B - 1) / B;
    return parts > blocks ? blocks : parts;
}

void streaming_attention_backward(const Tensor *queries, const Tensor *keys,
                                  const Tensor *values, const ValidLens *valid_lens,
                                  const Tensor *output, const Tensor *logsumexp,
                                  const Tensor *grad_output, int num_threads,
                                  Tensor **grad_queries, Tensor **grad_keys,
                                  Tensor **grad_values)
{
    const AttentionSizes n = attention_check_shapes(queries, keys, values, valid_lens);
    const int B = n.batch_size, T = n.num_queries, K = n.num_keys, d = n.d, v = n.v;
    tensor_check_shape("output", output, SHAPE(B, T, v));
    tensor_check_shape("grad_output", grad_output, SHAPE(B, T, v));
    tensor_check_shape("logsumexp", logsumexp, SHAPE(B, T));
    if (num_threads < 1)
        num_threads = 1;

    const int parts = backward_parts(B, K, num_threads);
    const int threads = num_threads < B * parts ? num_threads : B * parts;

    BackwardJobs jobs = {queries, keys, values, output, logsumexp, grad_output, valid_lens,
                         fast_tensor_empty(SHAPE(B, T, d)),
                         fast_tensor_empty(SHAPE(B, K, d)),
                         fast_tensor_empty(SHAPE(B, K, v)), NULL, parts, NULL, 0};
    atomic_init(&jobs.next_job, 0);
    if (parts > 1)
        jobs.partial_grad_queries = fast_alloc_panels((size_t)B * (parts - 1) * T * d);
    jobs.scratch = checked_calloc((size_t)threads, sizeof *jobs.scratch);
    for (int t = 0; t < threads; t++)
        streaming_backward_scratch_alloc(&jobs.scratch[t], T, d, v);
    fast_parallel(threads, backward_worker, &jobs);
    for (int t = 0; t < threads; t++)
        streaming_backward_scratch_free(&jobs.scratch[t]);
    free(jobs.scratch);

    if (parts > 1) {
        add_partial_grad_queries(&jobs, B, T, d);
        fast_free_panels(jobs.partial_grad_queries);
    }
    /* a NULL pointer: that gradient is not wanted */
    tensor_keep_or_free(jobs.grad_queries, grad_queries);
    tensor_keep_or_free(jobs.grad_keys, grad_keys);
    tensor_keep_or_free(jobs.grad_values, grad_values);
}
