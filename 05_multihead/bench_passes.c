/*
 * bench_passes.c - the passes the benchmark times. See bench_passes.h.
 */
#include "bench_passes.h"

#include <stdlib.h>

#include "attention.h"
#include "fast/fast_multihead.h"
#include "fast/streaming_attention.h"
#include "memory.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

const char *const BENCH_PASS_NAMES[] = {"forward", "fwd+bwd", "attn fwd", "attn f+b", "attn bwd"};

bool bench_is_attention_alone(const BenchConfig *c)
{
    return c->pass == BENCH_ATTENTION_FORWARD || c->pass == BENCH_ATTENTION_FB ||
           c->pass == BENCH_ATTENTION_BACKWARD;
}

double bench_flops(const BenchConfig *c)
{
    const double B = c->batch, T = c->num_queries, K = c->num_keys, D = c->num_hiddens;
    double projections = 2.0 * B * T * D * D * 2.0 + 2.0 * B * K * D * D * 2.0;   /* Q, O and K, V */
    double attention = 2.0 * B * T * K * D * 2.0;   /* Q K^T and weights @ V, over all heads */
    if (c->causal)
        attention *= (T + 1.0) / (2.0 * T);
    const double factor[] = {1.0, 3.0, 1.0, 3.0, 2.0};   /* per pass, as BENCH_PASS_NAMES */
    return factor[c->pass] * (bench_is_attention_alone(c) ? attention : projections + attention);
}

/* ---- memory, checked before any line runs ------------------------------------ */

/* Bytes one line's tensors hold at their peak, counted from what it
 * allocates (and rounded up): the fast forward keeps the inputs, the
 * concatenated heads and the output (about 6 (B, n, D) tensors with
 * scratch); the clear forward also holds the projections split into heads
 * (about 10); forward + backward adds the cached projections and every
 * gradient (about 16); attention alone has the heads' q, k, v, output,
 * gradients (about 10). The clear layer adds its (B*H, T, K) weights:
 * once forward, three times (weights, their gradient, the scores') with
 * the backward. Measured resident peaks against this (with memory_check's
 * 16 MB for the program): (8, 512, 512, 8) clear forward 132 MB (171 MB),
 * fast forward + backward 108 MB (159 MB); (2, 2048, 64, 8) clear forward
 * 277 MB (295 MB), clear forward + backward 820 MB (838 MB), fast forward
 * + backward 21 MB (33 MB). */
double bench_line_bytes(const BenchConfig *c, bool clear)
{
    const double rows = (double)c->batch * (c->num_queries > c->num_keys ? c->num_queries
                                                                         : c->num_keys);
    const double D = c->num_hiddens;
    const double per_row = c->pass == BENCH_FORWARD ? (clear ? 10.0 : 6.0)
                           : c->pass == BENCH_FORWARD_BACKWARD ? 16.0 : 10.0;
    const double params = (c->pass == BENCH_FORWARD ? 4.0 : 8.0) * D * D;
    const double weights = (double)c->batch * c->num_heads * c->num_queries * c->num_keys;
    return 4.0 * (per_row * rows * D + params + (clear ? (c->pass == BENCH_FORWARD ? 1 : 3) * weights
                                                       : 0.0));
}

/* ---- one line's work, built in its child process ------------------------------ */

/* Self-attention: the same tensor is queries, keys and values, as in a
 * NumPy or PyTorch layer timed the same way; the toy has its own keys. */
typedef struct {
    const BenchConfig *c;
    bool fast;
    int threads;
    MultiHeadAttention *layer;
    Tensor *queries, *keys, *grad_output;
    ValidLens *valid_lens;
    MultiHeadGrads *grads;
    /* attention alone: the heads' tensors (B*H, n, d); for its backward
     * alone, what the forward returned, made once */
    Tensor *head_q, *head_k, *head_v, *head_out, *head_lse, *head_grad;
    AttentionCache head_cache;
} Work;

static void *work_new(const void *spec_arg)
{
    const BenchLineSpec *spec = spec_arg;
    const BenchConfig *c = spec->c;
    Rng rng = rng_new(spec->seed);
    const float s = (float)spec->scale;
    const int D = c->num_hiddens, B = c->batch, H = c->num_heads, n = c->num_queries;
    Work *w = checked_calloc(1, sizeof *w);
    *w = (Work){.c = c, .fast = spec->fast, .threads = spec->threads};
    if (bench_is_attention_alone(c)) {
        const int d = D / H;
        w->head_q = tensor_normal(&rng, 0.0f, s, SHAPE(B * H, n, d));
        w->head_k = tensor_normal(&rng, 0.0f, s, SHAPE(B * H, n, d));
        w->head_v = tensor_normal(&rng, 0.0f, s, SHAPE(B * H, n, d));
        w->head_grad = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B * H, n, d));
        w->valid_lens = c->causal ? valid_lens_causal(B * H, n) : NULL;
        if (c->pass == BENCH_ATTENTION_BACKWARD)
            w->head_out = w->fast ? streaming_attention_cache(w->head_q, w->head_k, w->head_v,
                                                             w->valid_lens, w->threads, &w->head_lse)
                                  : dot_product_attention_cache(w->head_q, w->head_k, w->head_v,
                                                               w->valid_lens, NULL, &w->head_cache);
        return w;
    }
    w->layer = multihead_new(D, D, D, D, H, 0.0f, true, &rng);
    w->queries = tensor_normal(&rng, 0.0f, s, SHAPE(B, c->num_queries, D));
    w->keys = c->num_keys == c->num_queries
                  ? w->queries
                  : tensor_normal(&rng, 0.0f, s, SHAPE(B, c->num_keys, D));
    w->valid_lens = c->toy_mask ? valid_lens_1d((const int[]){3, 2}, 2) : NULL;
    if (c->pass == BENCH_FORWARD_BACKWARD) {
        w->grad_output = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, c->num_queries, D));
        w->grads = multihead_grads_new(w->layer);
    }
    return w;
}

static void work_free(void *arg)
{
    Work *w = arg;
    if (w->keys != w->queries)
        tensor_free(w->keys);
    TENSOR_FREE(w->queries, w->grad_output, w->head_q, w->head_k, w->head_v, w->head_out,
                w->head_lse, w->head_grad);
    valid_lens_free(w->valid_lens);
    multihead_grads_free(w->grads);
    if (w->layer != NULL)
        multihead_free(w->layer);
    attention_cache_free(&w->head_cache);
    if (w->fast)
        fast_multihead_release_memory();
    free(w);
}

/* One timed pass; every tensor it makes is freed before it returns, or
 * given back to the fast layer for the next pass (fast_multihead.h). The
 * parameter gradients accumulate from pass to pass, as without zero_grad.
 * With check, the results are looked at first: false when one holds a NaN
 * or an infinity (float32 overflowed: multihead.h). */
static bool run_pass(void *arg, bool check)
{
    Work *w = arg;
    const Tensor *q = w->queries, *k = w->keys;
    const ValidLens *lens = w->valid_lens;
    Tensor *out = NULL, *gq = NULL, *gk = NULL, *gv = NULL, *lse = NULL;
    const BenchPassKind pass = w->c->pass;
    if (pass == BENCH_FORWARD) {
        out = w->fast ? fast_multihead_forward(w->layer, q, k, k, lens, w->threads)
                      : multihead_forward(w->layer, q, k, k, lens, false, NULL, NULL);
    } else if (pass == BENCH_FORWARD_BACKWARD && w->fast) {
        FastMultiHeadCache cache;
        out = fast_multihead_forward_cache(w->layer, q, k, k, lens, w->threads, &cache);
        fast_multihead_backward(w->layer, &cache, w->grad_output, w->grads, &gq, &gk, &gv,
                                w->threads);
        fast_multihead_cache_free(&cache);
    } else if (pass == BENCH_FORWARD_BACKWARD) {
        MultiHeadCache cache;
        out = multihead_forward_cache(w->layer, q, k, k, lens, false, NULL, &cache);
        multihead_backward(w->layer, &cache, w->grad_output, w->grads, &gq, &gk, &gv, NULL);
        multihead_cache_free(&cache);
    } else if (pass == BENCH_ATTENTION_FORWARD || pass == BENCH_ATTENTION_FB) {
        out = streaming_attention_cache(w->head_q, w->head_k, w->head_v, lens, w->threads,
                                        pass == BENCH_ATTENTION_FB ? &lse : NULL);
        if (pass == BENCH_ATTENTION_FB)
            streaming_attention_backward(w->head_q, w->head_k, w->head_v, lens, out, lse,
                                         w->head_grad, w->threads, &gq, &gk, &gv);
    } else if (w->fast) {
        streaming_attention_backward(w->head_q, w->head_k, w->head_v, lens, w->head_out,
                                     w->head_lse, w->head_grad, w->threads, &gq, &gk, &gv);
    } else {
        dot_product_attention_backward(w->head_q, w->head_k, w->head_v, &w->head_cache,
                                       w->head_grad, &gq, &gk, &gv);
    }
    bool finite = true;
    Tensor *const results[] = {out, gq, gk, gv};
    for (int i = 0; check && i < 4; i++)
        finite = finite && (results[i] == NULL || tensor_first_non_finite(results[i]) == SIZE_MAX);
    /* the fast layer's results are given back for the next pass to write
     * into, as a training loop would (fast_multihead.h) */
    const bool layer = pass == BENCH_FORWARD || pass == BENCH_FORWARD_BACKWARD;
    for (int i = 0; i < 4; i++) {
        if (layer && w->fast)
            fast_multihead_give_back(results[i]);
        else
            tensor_free(results[i]);
    }
    tensor_free(lse);
    return finite;
}

const BenchPass BENCH_LAYER_PASS = {work_new, run_pass, work_free};

