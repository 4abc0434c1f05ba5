/*
 * fast_multihead.c - the multi-head layer's fast forward and backward
 * passes. See fast_multihead.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value input sizes.
 *
 * Why one head at a time works: head h of the projected queries is
 * columns h*d .. h*d+d-1 of queries @ W_q^T, and those columns come from
 * rows h*d .. h*d+d-1 of W_q alone:
 *
 *     queries (T, Dq) @ W_q^T (Dq, D)  ->  Q (T, D) = [ Q_0 | Q_1 | ... ]
 *                                                     d cols each
 *     Q_h = queries @ (W_q[h*d : h*d+d, :])^T  + b_q[h*d : h*d+d]
 *
 * so the (B*H, T, d) tensors of transpose_qkv are never built: each job
 * computes its own Q_h (T, d), and K_h, V_h 256 keys at a time, copied
 * straight into the packed layout streaming attention reads. The head
 * outputs land side by side in concat (B, T, D), the layout
 * transpose_output would produce. A forward that keeps a cache for the
 * backward keeps Q, K, V whole, and so projects them whole first (see
 * forward()).
 */
#include "fast/fast_multihead.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_matmul.h"
#include "fast/streaming_attention.h"
#include "heads.h"

/* One of the three input projections. When d is a multiple of the panel
 * width FAST_NR (16, or 32 with AVX-512), every head's d rows of W start
 * on a panel boundary, so W^T is packed once for all heads and all jobs
 * (panels not NULL); otherwise each job packs its head's rows itself. */
typedef struct {
    const Tensor *weight;     /* (D, in), PyTorch's layout */
    const Tensor *bias;       /* (D,) or NULL */
    float *panels;            /* W^T (in, D) as panels, or NULL */
} Projection;

/* Projections that read the same input, stacked: in self-attention the
 * keys and values (and often the queries) are one tensor, so a head's
 * K_h and V_h (and Q_h) come out of one product of 2d (3d) columns,
 *
 *     rows (n, in) @ [ W_q[h] ; W_k[h] ; W_v[h] ]^T  ->  (n, 3d) = [ Q_h | K_h | V_h ]
 *
 * Three products of d columns each read a group of rows of the input for
 * every d / FAST_NR panels; the stacked one reads it once for all 3d / FAST_NR,
 * so the register tiles run longer on what is already loaded. Each output
 * is still the same sum over the input's columns, in the same order. */
typedef struct {
    int parts;                /* 0: nothing stacked; 2: K, V; 3: Q, K, V */
    float *panels;            /* head h: parts * d columns as panels, from h * parts * d * in */
    float *bias;              /* (H, parts * d), or NULL when the layer has none */
} Stacked;

typedef struct {
    const MultiHeadAttention *layer;
    const Tensor *queries, *keys, *values;
    const ValidLens *valid_lens;
    Projection proj_q, proj_k, proj_v;
    Stacked stacked;
    Tensor *concat;           /* (B, T, D) */
    FastMultiHeadCache *cache;      /* NULL: keep nothing */
    struct Workspace *workspaces;   /* one per thread */
    atomic_int next_job;      /* jobs b * H + h are taken in this order */
} HeadJobs;

/* What one thread needs for one head, reused from job to job. Allocated by
 * the calling thread before the others start: memory that worker threads
 * allocate and free goes to per-thread malloc arenas and tends to stay
 * resident, raising the peak for nothing. */
enum { KEY_CHUNK = 256 };   /* keys projected at a time, a multiple of FAST_NR */
typedef struct Workspace {
    float *q_head;            /* (T, d) this head's queries */
    float *chunk;             /* (KEY_CHUNK, d) keys then (KEY_CHUNK, d) values on their way
                               * into kv, or one (KEY_CHUNK, parts * d) when stacked */
    PackedKeysValues kv;      /* this head's K keys and values, packed */
} Workspace;

/* rows (n, in) @ panels (in, width) + bias (width,) -> out (n, width) at
 * row stride ldo; bias NULL: none */
static void project_packed(const float *rows, int n, int in, const float *panels,
                           const float *bias, int width, float *out, size_t ldo)
{
    fast_gemm_packed(n, width, in, rows, (size_t)in, panels, bias, out, ldo, false, 1);
}

/* rows (n, in) @ W[h*d : h*d + d, :]^T + bias[h*d : h*d + d] -> out (n, d)
 * at row stride ldo (d for a buffer of its own, D for the head's columns
 * of a (n, D) matrix) */
static void project_head(const float *rows, int n, const Projection *proj, int h, int d,
                         float *out, size_t ldo)
{
    const int in = proj->weight->shape[1];
    const int first_row = h * d;
    const float *bias = proj->bias != NULL ? proj->bias->data + first_row : NULL;
    if (proj->panels != NULL) {
        const float *head_panels = proj->panels + (size_t)(first_row / FAST_NR) * in * FAST_NR;
        project_packed(rows, n, in, head_panels, bias, d, out, ldo);
        return;
    }
    for (int t = 0; bias != NULL && t < n; t++)
        memcpy(out + (size_t)t * ldo, bias, (size_t)d * sizeof(float));
    fast_gemm(n, d, in, rows, (size_t)in, false, proj->weight->data + (size_t)first_row * in,
              (size_t)in, true, out, ldo, bias != NULL, 1);
}

/* wanted false: the jobs will not project (a cached forward has done it
 * already), so there is nothing to pack */
static Projection projection_new(const Tensor *weight, const Tensor *bias, int d, bool wanted)
{
    Projection proj = {weight, bias, NULL};
    if (wanted && d % FAST_NR == 0) {
        const int D = weight->shape[0], in = weight->shape[1];
        proj.panels = fast_alloc_panels(fast_panels_size(in, D));
        fast_pack_panels(weight->data, (size_t)in, true, in, D, proj.panels);
    }
    return proj;
}

/* Stacks K and V when keys and values are one tensor (the same pointer),
 * and Q too when the queries are that tensor as well; nothing when the
 * jobs will not project (wanted false), when d is not whole panels, or
 * when the biases are not all there or all absent. */
static Stacked stacked_new(const MultiHeadAttention *layer, const Tensor *queries,
                           const Tensor *keys, const Tensor *values, bool wanted)
{
    Stacked stacked = {0, NULL, NULL};
    const int H = layer->num_heads, D = layer->num_hiddens, d = D / H;
    const bool biases_alike = (layer->b_q == NULL) == (layer->b_k == NULL) &&
                              (layer->b_k == NULL) == (layer->b_v == NULL);
    if (!wanted || keys != values || d % FAST_NR != 0 || !biases_alike)
        return stacked;
    /* the same tensor: Dq = Dk = Dv and T = K */
    const bool with_queries = queries == keys;
    const Tensor *weights[3] = {layer->W_q, layer->W_k, layer->W_v};
    const Tensor *biases[3] = {layer->b_q, layer->b_k, layer->b_v};
    const int first = with_queries ? 0 : 1, parts = 3 - first, in = layer->key_size;
    stacked.parts = parts;
    stacked.panels = fast_alloc_panels(fast_panels_size(in, parts * D));
    if (layer->b_k != NULL)
        stacked.bias = checked_malloc((size_t)parts * D, sizeof(float));
    for (int h = 0; h < H; h++)
        for (int part = 0; part < parts; part++) {
            const int which = first + part;
            const size_t slot = (size_t)h * parts + part;   /* d columns each */
            fast_pack_panels(weights[which]->data + (size_t)h * d * in, (size_t)in, true, in, d,
                             stacked.panels + slot * d * in);
            if (stacked.bias != NULL)
                memcpy(stacked.bias + slot * d, biases[which]->data + (size_t)h * d,
                       (size_t)d * sizeof(float));
        }
    return stacked;
}

/* ---- memory from one call to the next ------------------------------------------------
 * A training step, or the bench, frees a cache and makes the next one of
 * the same sizes at once; the forward's concatenated heads, and the
 * backward's gradients on their way to the inputs, are made and freed in
 * every call. These tensors are written whole before they are read, so
 * their memory can be the last call's: already mapped, where fresh memory
 * costs a page clear by the kernel on its first write (about a
 * millisecond for 8 MB here). So can the output and the input gradients,
 * when the caller gives them back (fast_multihead_give_back). Up to KEPT
 * tensors are kept, the newest: the nine of a forward + backward of
 * self-attention, and a few more; one is taken when its size is the one
 * wanted. */
enum { KEPT = 12 };
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static Tensor *kept[KEPT];   /* oldest first; NULL past the last */

/* A tensor of this shape, its contents unspecified: a kept one, or new. */
static Tensor *reused_or_empty(int ndim, const int *shape)
{
    size_t size = 1;
    for (int i = 0; i < ndim; i++)
        size *= (size_t)shape[i];
    Tensor *found = NULL;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEPT && kept[i] != NULL && found == NULL; i++)
        if (kept[i]->size == size) {
            found = kept[i];
            memmove(&kept[i], &kept[i + 1], (size_t)(KEPT - 1 - i) * sizeof kept[0]);
            kept[KEPT - 1] = NULL;
        }
    pthread_mutex_unlock(&kept_lock);
    return found != NULL ? tensor_reshape(found, ndim, shape)
                         : fast_tensor_empty(ndim, shape);
}

/* x (or NULL) is no longer needed: kept for the next call, the oldest kept
 * one freed to make room */
static void keep_for_reuse(Tensor *x)
{
    if (x == NULL)
        return;
    Tensor *dropped = NULL;
    pthread_mutex_lock(&kept_lock);
    int count = 0;
    while (count < KEPT && kept[count] != NULL)
        count++;
    if (count == KEPT) {
        dropped = kept[0];
        memmove(&kept[0], &kept[1], (KEPT - 1) * sizeof kept[0]);
        count--;
    }
    kept[count] = x;
    pthread_mutex_unlock(&kept_lock);
    tensor_free(dropped);
}

void fast_multihead_give_back(Tensor *x)
{
    keep_for_reuse(x);
}

void fast_multihead_release_memory(void)
{
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEPT; i++) {
        tensor_free(kept[i]);
        kept[i] = NULL;
    }
    pthread_mutex_unlock(&kept_lock);
}

/* Pass 1 of job (b, h): head h's keys and values of sequence b, KEY_CHUNK
 * keys at a time, projected and packed into w->kv; with the queries
 * stacked too (parts 3, T = K), head h's queries into q_dst at row stride
 * ld on the way. */
static void project_head_keys_values(const HeadJobs *jobs, Workspace *w, int b, int h,
                                     float *q_dst, size_t ld)
{
    const MultiHeadAttention *layer = jobs->layer;
    const int d = layer->num_hiddens / layer->num_heads, K = jobs->keys->shape[1];
    const int Dk = layer->key_size, Dv = layer->value_size;
    const float *keys_b = jobs->keys->data + (size_t)b * K * Dk;
    const float *values_b = jobs->values->data + (size_t)b * K * Dv;
    const Stacked *stacked = &jobs->stacked;
    const int parts = stacked->parts, width = parts * d;
    for (int k0 = 0; k0 < K; k0 += KEY_CHUNK) {
        const int count = K - k0 < KEY_CHUNK ? K - k0 : KEY_CHUNK;
        if (parts == 0) {
            float *k_chunk = w->chunk, *v_chunk = w->chunk + (size_t)KEY_CHUNK * d;
            project_head(keys_b + (size_t)k0 * Dk, count, &jobs->proj_k, h, d, k_chunk, ld);
            project_head(values_b + (size_t)k0 * Dv, count, &jobs->proj_v, h, d, v_chunk, ld);
            packed_kv_fill(&w->kv, k0, count, k_chunk, ld, v_chunk, ld);
            continue;
        }
        /* one product for the stacked parts, rows [ (Q_h) | K_h | V_h ] */
        project_packed(keys_b + (size_t)k0 * Dk, count, Dk,
                       stacked->panels + (size_t)h * width * Dk,
                       stacked->bias != NULL ? stacked->bias + (size_t)h * width : NULL,
                       width, w->chunk, (size_t)width);
        const float *k_part = w->chunk + (size_t)(parts - 2) * d;
        packed_kv_fill(&w->kv, k0, count, k_part, (size_t)width, k_part + d, (size_t)width);
        for (int t = 0; parts == 3 && t < count; t++)   /* here T = K */
            memcpy(q_dst + (size_t)(k0 + t) * ld, w->chunk + (size_t)t * width,
                   (size_t)d * sizeof(float));
    }
}

/* The jobs (b, h) of one thread, until none is left: pass 1 and 2 project
 * the head's keys, values and queries (unless a cache holds them
 * projected), pass 3 streams the head's attention into concat. */
static void head_worker(void *arg, int thread)
{
    HeadJobs *jobs = arg;
    Workspace *w = &jobs->workspaces[thread];
    const MultiHeadAttention *layer = jobs->layer;
    const int H = layer->num_heads, D = layer->num_hiddens, d = D / H;
    const int B = jobs->queries->shape[0], T = jobs->queries->shape[1];
    const int K = jobs->keys->shape[1], Dq = layer->query_size;

    /* Jobs are handed out one at a time from a shared counter, so a thread
     * that finishes early (short valid_lens, a busy core) takes the next. */
    for (int job = atomic_fetch_add(&jobs->next_job, 1); job < B * H;
         job = atomic_fetch_add(&jobs->next_job, 1)) {
        const int b = job / H, h = job % H;
        /* Where this head's Q, K, V go: the cached (B, T, D) tensors, in
         * the head's columns (row stride D), or the workspace (stride d). */
        FastMultiHeadCache *cache = jobs->cache;
        float *q_dst = w->q_head, *lse = NULL;
        size_t ld = (size_t)d;
        if (cache != NULL) {   /* projected already (see forward): this head's columns */
            const float *k_rows = cache->K->data + (size_t)b * K * D + (size_t)h * d;
            const float *v_rows = cache->V->data + (size_t)b * K * D + (size_t)h * d;
            packed_kv_fill(&w->kv, 0, K, k_rows, (size_t)D, v_rows, (size_t)D);
            q_dst = cache->Q->data + (size_t)b * T * D + (size_t)h * d;
            lse = cache->logsumexp->data + (size_t)job * T;
            ld = (size_t)D;
        }
        // pass 1: this head's keys and values, a chunk at a time, into kv
        if (cache == NULL)
            project_head_keys_values(jobs, w, b, h, q_dst, ld);
        // pass 2: this head's queries, unless stacked with the keys
        if (cache == NULL && jobs->stacked.parts != 3)
            project_head(jobs->queries->data + (size_t)b * T * Dq, T, &jobs->proj_q, h, d,
                         q_dst, ld);

        // pass 3: streaming attention, written into the head's columns of concat
        float *head_out = jobs->concat->data + (size_t)b * T * D + (size_t)h * d;
        streaming_attention_rows(&w->kv, q_dst, ld, T, jobs->valid_lens, b, 0,
                                 head_out, (size_t)D, lse);
    }
}

/* The forward's multiply-adds, counted as 2 FLOPs each: the four
 * projections and the two products of attention. */
static double layer_flops(const MultiHeadAttention *layer, int B, int T, int K)
{
    const double D = layer->num_hiddens;
    const double inputs = (double)T * layer->query_size + (double)K * layer->key_size +
                          (double)K * layer->value_size;
    return 2.0 * B * (inputs * D + (double)T * D * D + 2.0 * (double)T * K * D);
}

/* Stops (die) unless queries (B, T, Dq), keys (B, K, Dk), values
 * (B, K, Dv) and valid_lens fit the layer, whose heads split D and are not
 * shared (G = H). */
static void check_forward_inputs(const MultiHeadAttention *layer, const Tensor *queries,
                                 const Tensor *keys, const Tensor *values,
                                 const ValidLens *valid_lens)
{
    const int H = layer->num_heads;
    tensor_check_shape("queries", queries, SHAPE(-1, -1, layer->query_size));
    const int B = queries->shape[0], T = queries->shape[1];
    tensor_check_shape("keys", keys, SHAPE(B, -1, layer->key_size));
    const int K = keys->shape[1];
    tensor_check_shape("values", values, SHAPE(B, K, layer->value_size));
    valid_lens_check(valid_lens, B, T, K);
    head_size(layer->num_hiddens, H);   /* dies unless H splits D */
    if (layer->num_kv_heads != H)
        die("num_kv_heads %d: the fast layer is multi-head attention, num_kv_heads = "
            "num_heads = %d (grouped layers decode with fast_decode.h)", layer->num_kv_heads, H);
}

/* One Workspace for each of count threads, for heads of size d over T
 * queries and K keys, with parts projections stacked (Stacked) */
static Workspace *workspaces_new(int count, int T, int K, int d, int parts)
{
    Workspace *workspaces = checked_calloc((size_t)count, sizeof *workspaces);
    /* K then V, or the stacked parts side by side: 2d or 3d floats a row */
    const int chunk_width = (parts == 3 ? 3 : 2) * d;
    for (int t = 0; t < count; t++) {
        workspaces[t].q_head = checked_malloc((size_t)T * d, sizeof(float));
        workspaces[t].chunk = checked_malloc((size_t)KEY_CHUNK * chunk_width,
                                             sizeof(float));
        packed_kv_alloc(&workspaces[t].kv, K, d, d);
    }
    return workspaces;
}

/* What the jobs held: the packed projections and the threads' workspaces
 * (count of them) */
static void head_jobs_free(HeadJobs *jobs, int count)
{
    fast_free_panels(jobs->proj_q.panels);
    fast_free_panels(jobs->proj_k.panels);
    fast_free_panels(jobs->proj_v.panels);
    fast_free_panels(jobs->stacked.panels);
    free(jobs->stacked.bias);
    for (int t = 0; t < count; t++) {
        free(jobs->workspaces[t].q_head);
        free(jobs->workspaces[t].chunk);
        packed_kv_free(&jobs->workspaces[t].kv);
    }
    free(jobs->workspaces);
}

/* Passes 1 and 2 for every head at once when Q, K, V are cached: they
 * are kept whole anyway, so each is one large product with its rows split
 * across threads, faster than B * H small ones when T or K is short (a
 * training batch of few keys); each output is the same sum over the
 * input's columns as project_head's, and tests/test_fast.c checks that the
 * outputs are the same bits. cache gets the inputs (borrowed), Q (B, T, D),
 * K and V (B, K, D) and a zeroed logsumexp (B*H, T); concat comes later. */
static void project_into_cache(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, int num_threads,
                               FastMultiHeadCache *cache)
{
    const int H = layer->num_heads, D = layer->num_hiddens;
    const int B = queries->shape[0], T = queries->shape[1], K = keys->shape[1];
    *cache = (FastMultiHeadCache){queries, keys, values, valid_lens,
                                  reused_or_empty(SHAPE(B, T, D)),
                                  reused_or_empty(SHAPE(B, K, D)),
                                  reused_or_empty(SHAPE(B, K, D)),
                                  NULL, fast_tensor_zeros(SHAPE(B * H, T))};
    fast_linear_into(queries, layer->W_q, layer->b_q, cache->Q, num_threads);
    fast_linear_into(keys, layer->W_k, layer->b_k, cache->K, num_threads);
    fast_linear_into(values, layer->W_v, layer->b_v, cache->V, num_threads);
}

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv) -> output (B, T, D),
 * and what the backward needs in cache when not NULL */
static Tensor *forward(const MultiHeadAttention *layer, const Tensor *queries,
                       const Tensor *keys, const Tensor *values, const ValidLens *valid_lens,
                       int num_threads, FastMultiHeadCache *cache)
{
    check_forward_inputs(layer, queries, keys, values, valid_lens);
    const int H = layer->num_heads, D = layer->num_hiddens;
    const int B = queries->shape[0], T = queries->shape[1], K = keys->shape[1];
    /* a thread per FAST_FLOPS_PER_THREAD (fast_threads.h): d2l's toy and
     * the training page's default batch run on one */
    num_threads = fast_threads_worth(num_threads, layer_flops(layer, B, T, K));
    if (cache != NULL)   /* passes 1 and 2 for every head at once */
        project_into_cache(layer, queries, keys, values, valid_lens, num_threads, cache);

    // passes 1 to 3, per (sequence, head) job: projections and attention
    const int d = D / H;
    /* a thread without a job would only cost memory; pass 4 splits rows, not
     * heads, so it still gets every thread asked for */
    const int head_threads = num_threads < B * H ? num_threads : B * H;
    const Stacked stacked = stacked_new(layer, queries, keys, values, cache == NULL);
    Workspace *workspaces = workspaces_new(head_threads, T, K, d, stacked.parts);
    /* every (sequence, head) job writes all its rows: nothing to zero */
    Tensor *concat = reused_or_empty(SHAPE(B, T, D));
    const bool project_q = cache == NULL && stacked.parts != 3;
    const bool project_kv = cache == NULL && stacked.parts == 0;
    HeadJobs jobs = {layer, queries, keys, values, valid_lens,
                     projection_new(layer->W_q, layer->b_q, d, project_q),
                     projection_new(layer->W_k, layer->b_k, d, project_kv),
                     projection_new(layer->W_v, layer->b_v, d, project_kv), stacked, concat,
                     cache, workspaces, 0};
    atomic_init(&jobs.next_job, 0);
    fast_parallel(head_threads, head_worker, &jobs);
    head_jobs_free(&jobs, head_threads);

    // pass 4: mix the heads, output = concat W_o^T + b_o, rows split across threads
    Tensor *output = reused_or_empty(SHAPE(B, T, D));
    fast_linear_into(concat, layer->W_o, layer->b_o, output, num_threads);
    if (cache != NULL)
        cache->concat = concat;
    else
        keep_for_reuse(concat);
    return output;
}

Tensor *fast_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, int num_threads)
{
    return forward(layer, queries, keys, values, valid_lens, num_threads, NULL);
}

Tensor *fast_multihead_forward_cache(const MultiHeadAttention *layer, const Tensor *queries,
                                    const Tensor *keys, const Tensor *values,
                                    const ValidLens *valid_lens, int num_threads,
                                    FastMultiHeadCache *cache)
{
    return forward(layer, queries, keys, values, valid_lens, num_threads, cache);
}

void fast_multihead_cache_free(FastMultiHeadCache *cache)
{
    keep_for_reuse(cache->Q);
    keep_for_reuse(cache->K);
    keep_for_reuse(cache->V);
    keep_for_reuse(cache->concat);
    tensor_free(cache->logsumexp);
    memset(cache, 0, sizeof *cache);
}

/* ==== backward ======================================================================== */

/* Pass 3 backwards, one (sequence, head) job at a time: the streaming
 * backward of head h, reading its columns of the cached Q, concat (the
 * head's output) and grad_concat in place. Its keys and values are first
 * copied into rows of their own, and its gradients summed in rows of
 * their own, then copied into its columns of grad_Q, grad_K, grad_V. Read
 * and added into in place, among the other heads' columns (d of every
 * D-float row), this pass ran about 10% slower on two threads than with
 * the copies, at (8, 512, 512, 8); on one thread the two were alike. The
 * sums are the same, in the same order: the same bits. */
typedef struct {
    const FastMultiHeadCache *cache;
    int num_heads;
    const Tensor *grad_concat;               /* (B, T, D) */
    Tensor *grad_Q, *grad_K, *grad_V;        /* (B, T, D), (B, K, D) x2 */
    StreamingBackwardScratch *scratch;       /* one per thread */
    float **rows;                            /* per thread: a head's K, V (K, d), dQ (T, d),
                                              * dK, dV (K, d), contiguous */
    atomic_int next_job;
} HeadBackwardJobs;

/* rows (count, d) at stride ld <-> contiguous (count, d) */
static void gather_rows(float *dst, const float *src, size_t ld, int count, int d)
{
    for (int r = 0; r < count; r++)
        memcpy(dst + (size_t)r * d, src + (size_t)r * ld, (size_t)d * sizeof(float));
}

static void scatter_rows(float *dst, size_t ld, const float *src, int count, int d)
{
    for (int r = 0; r < count; r++)
        memcpy(dst + (size_t)r * ld, src + (size_t)r * d, (size_t)d * sizeof(float));
}

static void head_backward_worker(void *arg, int thread)
{
    HeadBackwardJobs *jobs = arg;
    const FastMultiHeadCache *cache = jobs->cache;
    const int H = jobs->num_heads, B = cache->Q->shape[0], T = cache->Q->shape[1];
    const int K = cache->K->shape[1], D = cache->Q->shape[2], d = D / H;
    for (int job = atomic_fetch_add(&jobs->next_job, 1); job < B * H;
         job = atomic_fetch_add(&jobs->next_job, 1)) {
        const size_t b = (size_t)(job / H), h = (size_t)(job % H);
        const size_t query_rows = b * T * D + h * d, key_rows = b * K * D + h * d;
        float *k_rows = jobs->rows[thread], *v_rows = k_rows + (size_t)K * d;
        float *dq = v_rows + (size_t)K * d, *dk = dq + (size_t)T * d, *dv = dk + (size_t)K * d;
        gather_rows(k_rows, cache->K->data + key_rows, (size_t)D, K, d);
        gather_rows(v_rows, cache->V->data + key_rows, (size_t)D, K, d);
        memset(dq, 0, (size_t)(T + 2 * K) * d * sizeof(float));
        AttentionRowsBackward head = {
            T, K, d, d,
            cache->Q->data + query_rows, (size_t)D,
            k_rows, (size_t)d,
            v_rows, (size_t)d,
            cache->concat->data + query_rows, (size_t)D,
            jobs->grad_concat->data + query_rows, (size_t)D,
            cache->logsumexp->data + (size_t)job * T, cache->valid_lens, (int)b,
            dq, (size_t)d,
            dk, (size_t)d,
            dv, (size_t)d,
        };
        streaming_attention_backward_rows(&head, 0, K, &jobs->scratch[thread]);
        scatter_rows(jobs->grad_Q->data + query_rows, (size_t)D, dq, T, d);
        scatter_rows(jobs->grad_K->data + key_rows, (size_t)D, dk, K, d);
        scatter_rows(jobs->grad_V->data + key_rows, (size_t)D, dv, K, d);
    }
}

/* grad_concat (B, T, D) -> grad_Q (B, T, D), grad_K, grad_V (B, K, D), new */
static void attention_backward(const FastMultiHeadCache *cache, int num_heads,
                               const Tensor *grad_concat, int num_threads,
                               Tensor **grad_Q, Tensor **grad_K, Tensor **grad_V)
{
    const int B = cache->Q->shape[0], T = cache->Q->shape[1], D = cache->Q->shape[2];
    const int K = cache->K->shape[1], d = D / num_heads;
    const int threads = num_threads < B * num_heads ? num_threads : B * num_heads;
    /* each job writes its head's columns whole (head_backward_worker): nothing to zero */
    HeadBackwardJobs jobs = {cache, num_heads, grad_concat, reused_or_empty(SHAPE(B, T, D)),
                             reused_or_empty(SHAPE(B, K, D)),
                             reused_or_empty(SHAPE(B, K, D)),
                             checked_calloc((size_t)threads, sizeof(StreamingBackwardScratch)),
                             checked_calloc((size_t)threads, sizeof(float *)), 0};
    atomic_init(&jobs.next_job, 0);
    for (int t = 0; t < threads; t++) {
        streaming_backward_scratch_alloc(&jobs.scratch[t], T, d, d);
        jobs.rows[t] = fast_alloc_panels((size_t)(T + 4 * K) * d);
    }
    fast_parallel(threads, head_backward_worker, &jobs);
    for (int t = 0; t < threads; t++) {
        streaming_backward_scratch_free(&jobs.scratch[t]);
        fast_free_panels(jobs.rows[t]);
    }
    free(jobs.scratch);
    free(jobs.rows);
    *grad_Q = jobs.grad_Q;
    *grad_K = jobs.grad_K;
    *grad_V = jobs.grad_V;
}

/* One projection backwards: x (rows, in), grad_y (rows, D) -> grad_x
 * (rows, in) returned when wanted (NULL otherwise), weight and bias
 * gradients added into when grads is not NULL. spare is a tensor the
 * caller no longer needs (or NULL), taken over here: grad_x is written
 * into its memory when it has x's size, for one fresh tensor less (the
 * first write to fresh memory costs the kernel a page clear), and it is
 * kept for the next call otherwise. */
static Tensor *projection_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                                   Tensor *grad_weight, Tensor *grad_bias, bool want_grad_x,
                                   Tensor *spare, int num_threads)
{
    const int in = weight->shape[1], out = weight->shape[0];
    const int rows = (int)(x->size / (size_t)in);
    Tensor *grad_x = NULL;   /* written whole, not added into */
    if (want_grad_x && spare != NULL && spare->size == x->size && x->size > 0) {
        grad_x = tensor_reshape(spare, x->ndim, x->shape);
        spare = NULL;
    } else if (want_grad_x) {
        grad_x = reused_or_empty(x->ndim, x->shape);
    }
    keep_for_reuse(spare);
    fast_linear_backward_raw(rows, in, out, x->data, weight->data, grad_y->data,
                             grad_x ? grad_x->data : NULL, grad_weight ? grad_weight->data : NULL,
                             grad_bias ? grad_bias->data : NULL, num_threads);
    return grad_x;
}

void fast_multihead_backward(const MultiHeadAttention *layer, const FastMultiHeadCache *cache,
                             const Tensor *grad_output, MultiHeadGrads *grads,
                             Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                             int num_threads)
{
    if (cache == NULL || cache->concat == NULL)
        die("nothing cached: run fast_multihead_forward_cache first");
    const int B = cache->Q->shape[0], T = cache->Q->shape[1], D = layer->num_hiddens;
    tensor_check_shape("grad_output", grad_output, SHAPE(B, T, D));
    /* the backward does about twice the forward's work */
    num_threads =
        fast_threads_worth(num_threads, 2.0 * layer_flops(layer, B, T, cache->K->shape[1]));
#define GRAD(name) (grads != NULL ? grads->name : NULL)

    // pass 4 backwards: grad_concat = grad_output W_o, grad_W_o += grad_output^T concat,
    // grad_b_o += the sum of grad_output's rows
    Tensor *grad_concat = projection_backward(cache->concat, layer->W_o, grad_output, GRAD(W_o),
                                              GRAD(b_o), true, NULL, num_threads);

    // pass 3 backwards: attention, per (sequence, head), into grad_Q, grad_K, grad_V
    Tensor *grad_Q, *grad_K, *grad_V;
    attention_backward(cache, layer->num_heads, grad_concat, num_threads, &grad_Q, &grad_K,
                       &grad_V);

    // passes 2 and 1 backwards: the three projections, each gradient of an
    // input written over a gradient no longer needed (the same size in
    // self-attention): grad_concat, then grad_Q, then grad_K
    Tensor *gq = projection_backward(cache->queries, layer->W_q, grad_Q, GRAD(W_q), GRAD(b_q),
                                     grad_queries != NULL, grad_concat, num_threads);
    Tensor *gk = projection_backward(cache->keys, layer->W_k, grad_K, GRAD(W_k), GRAD(b_k),
                                     grad_keys != NULL, grad_Q, num_threads);
    Tensor *gv = projection_backward(cache->values, layer->W_v, grad_V, GRAD(W_v), GRAD(b_v),
                                     grad_values != NULL, grad_K, num_threads);
#undef GRAD
    keep_for_reuse(grad_V);
    if (grad_queries != NULL)
        *grad_queries = gq;
    if (grad_keys != NULL)
        *grad_keys = gk;
    if (grad_values != NULL)
        *grad_values = gv;
}
