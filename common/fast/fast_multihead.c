/*
 * fast_multihead.c - the multi-head layer's fast forward pass. See
 * fast_multihead.h.
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
 * transpose_output would produce.
 */
#include "fast/fast_multihead.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_matmul.h"
#include "fast/streaming_attention.h"

/* One of the three input projections. When d is a multiple of the panel
 * width FAST_NR (16, or 32 with AVX-512), every head's d rows of W start
 * on a panel boundary, so W^T is packed once for all heads and all jobs
 * (panels not NULL); otherwise each job packs its head's rows itself. */
typedef struct {
    const Tensor *weight;     /* (D, in), PyTorch's layout */
    const Tensor *bias;       /* (D,) or NULL */
    float *panels;            /* W^T (in, D) as panels, or NULL */
} Projection;

typedef struct {
    const MultiHeadAttention *layer;
    const Tensor *queries, *keys, *values;
    const ValidLens *valid_lens;
    Projection proj_q, proj_k, proj_v;
    Tensor *concat;           /* (B, T, D) */
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
    float *k_chunk, *v_chunk; /* (KEY_CHUNK, d) keys and values on their way into kv */
    PackedKeysValues kv;      /* this head's K keys and values, packed */
} Workspace;

/* rows (n, in) @ W[h*d : h*d + d, :]^T + bias[h*d : h*d + d] -> out (n, d) */
static void project_head(const float *rows, int n, const Projection *proj, int h, int d,
                         float *out)
{
    const int in = proj->weight->shape[1];
    const int first_row = h * d;
    /* start from the bias and let the product accumulate onto it */
    if (proj->bias != NULL)
        for (int t = 0; t < n; t++)
            memcpy(out + (size_t)t * d, proj->bias->data + first_row, (size_t)d * sizeof(float));
    bool accumulate = proj->bias != NULL;
    if (proj->panels != NULL) {
        const float *head_panels = proj->panels + (size_t)(first_row / FAST_NR) * in * FAST_NR;
        fast_gemm_packed(n, d, in, rows, (size_t)in, head_panels, out, (size_t)d, accumulate, 1);
    } else {
        fast_gemm(n, d, in, rows, (size_t)in, proj->weight->data + (size_t)first_row * in,
                  (size_t)in, true, out, (size_t)d, accumulate, 1);
    }
}

static Projection projection_new(const Tensor *weight, const Tensor *bias, int d)
{
    Projection proj = {weight, bias, NULL};
    if (d % FAST_NR == 0) {
        const int D = weight->shape[0], in = weight->shape[1];
        proj.panels = fast_alloc_panels("fast_multihead_forward", fast_panels_size(in, D));
        fast_pack_panels(weight->data, (size_t)in, true, in, D, proj.panels);
    }
    return proj;
}

static void head_worker(void *arg, int thread)
{
    HeadJobs *jobs = arg;
    Workspace *w = &jobs->workspaces[thread];
    const MultiHeadAttention *layer = jobs->layer;
    const int H = layer->num_heads, D = layer->num_hiddens, d = D / H;
    const int B = jobs->queries->shape[0], T = jobs->queries->shape[1];
    const int K = jobs->keys->shape[1];
    const int Dq = layer->query_size, Dk = layer->key_size, Dv = layer->value_size;

    /* Jobs are handed out one at a time from a shared counter, so a thread
     * that finishes early (short valid_lens, a busy core) takes the next. */
    for (int job = atomic_fetch_add(&jobs->next_job, 1); job < B * H;
         job = atomic_fetch_add(&jobs->next_job, 1)) {
        const int b = job / H, h = job % H;
        // pass 1: this head's keys and values, a chunk at a time, into kv
        const float *keys_b = jobs->keys->data + (size_t)b * K * Dk;
        const float *values_b = jobs->values->data + (size_t)b * K * Dv;
        for (int k0 = 0; k0 < K; k0 += KEY_CHUNK) {
            const int count = K - k0 < KEY_CHUNK ? K - k0 : KEY_CHUNK;
            project_head(keys_b + (size_t)k0 * Dk, count, &jobs->proj_k, h, d, w->k_chunk);
            project_head(values_b + (size_t)k0 * Dv, count, &jobs->proj_v, h, d, w->v_chunk);
            packed_kv_fill(&w->kv, k0, count, w->k_chunk, (size_t)d, w->v_chunk, (size_t)d);
        }
        // pass 2: this head's queries
        project_head(jobs->queries->data + (size_t)b * T * Dq, T, &jobs->proj_q, h, d, w->q_head);

        // pass 3: streaming attention, written into the head's columns of concat
        float *head_out = jobs->concat->data + (size_t)b * T * D + (size_t)h * d;
        streaming_attention_rows(&w->kv, w->q_head, (size_t)d, T, jobs->valid_lens, b, 0,
                                 head_out, (size_t)D, NULL);
    }
}

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv) -> output (B, T, D) */
Tensor *fast_multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, int num_threads)
{
    const char *func = "fast_multihead_forward";
    const int H = layer->num_heads, D = layer->num_hiddens;
    tensor_check_shape(func, "queries", queries, SHAPE(-1, -1, layer->query_size));
    const int B = queries->shape[0], T = queries->shape[1];
    tensor_check_shape(func, "keys", keys, SHAPE(B, -1, layer->key_size));
    const int K = keys->shape[1];
    tensor_check_shape(func, "values", values, SHAPE(B, K, layer->value_size));
    valid_lens_check(func, valid_lens, B, T, K);
    if (H < 1 || D % H != 0)
        die(func, "num_hiddens %d does not divide by num_heads %d", D, H);
    if (num_threads < 1)
        num_threads = 1;

    // passes 1 to 3, per (sequence, head) job: projections and attention
    const int d = D / H;
    /* a thread without a job would only cost memory; pass 4 splits rows, not
     * heads, so it still gets every thread asked for */
    const int head_threads = num_threads < B * H ? num_threads : B * H;
    Workspace *workspaces = checked_calloc(func, (size_t)head_threads, sizeof *workspaces);
    for (int t = 0; t < head_threads; t++) {
        workspaces[t].q_head = checked_malloc(func, (size_t)T * d, sizeof(float));
        workspaces[t].k_chunk = checked_malloc(func, (size_t)KEY_CHUNK * d, sizeof(float));
        workspaces[t].v_chunk = checked_malloc(func, (size_t)KEY_CHUNK * d, sizeof(float));
        packed_kv_alloc(&workspaces[t].kv, K, d, d);
    }
    Tensor *concat = tensor_zeros(SHAPE(B, T, D));
    HeadJobs jobs = {layer, queries, keys, values, valid_lens,
                     projection_new(layer->W_q, layer->b_q, d),
                     projection_new(layer->W_k, layer->b_k, d),
                     projection_new(layer->W_v, layer->b_v, d), concat, workspaces, 0};
    atomic_init(&jobs.next_job, 0);
    fast_parallel(head_threads, head_worker, &jobs);
    free(jobs.proj_q.panels);
    free(jobs.proj_k.panels);
    free(jobs.proj_v.panels);
    for (int t = 0; t < head_threads; t++) {
        free(workspaces[t].q_head);
        free(workspaces[t].k_chunk);
        free(workspaces[t].v_chunk);
        packed_kv_free(&workspaces[t].kv);
    }
    free(workspaces);

    // pass 4: mix the heads, output = concat W_o^T + b_o, rows split across threads
    Tensor *output = fast_linear(concat, layer->W_o, layer->b_o, num_threads);
    tensor_free(concat);
    return output;
}
