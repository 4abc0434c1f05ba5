/*
 * language_step.c - a share of a training step in memory laid out once.
 * See language_step.h.
 *
 * Legend: B = the share's windows, T = tokens of a window, R = B * T rows,
 * V = vocabulary, D = num_hiddens, H = num_heads, d = D / H, F = 4 D,
 * N = num_layers.
 *
 * Each step below names the call of the model's own step it stands for
 * (learn/gpt_block.c, fast/fast_multihead.c), whose bits it keeps.
 */
#include "language_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_exp.h"
#include "fast/fast_layer_norm.h"
#include "fast/fast_matmul.h"
#include "fast/streaming_attention.h"
#include "learn/embedding.h"
#include "learn/layer_norm.h"
#include "learn/loss.h"
#include "learn/optim.h"

/* ---- the weights, packed once a step ------------------------------------------------- */

/* Every product of the step reads a weight as panels (fast_matmul.h):
 * the forward W^T's (y = x W^T + b), the backward W's (grad_x = grad_y W).
 * Packed by each share, every weight would be packed once per share
 * and direction; here once a step, on the threads, for every share. */
enum {
    BLOCK_WEIGHTS = 6,   /* W_q, W_k, W_v, W_o, fc, proj */
    PACKS = 2 * (BLOCK_WEIGHTS * LM_MAX_LAYERS + 1),   /* and wte, the unembedding */
};

typedef struct {
    const float *weight;   /* (out, in) */
    int out, in;
    bool forward;          /* W^T's panels (k = in rows), or W's (k = out) */
    size_t size;           /* floats of the panels */
    float *panels;
} Pack;

/* pack[2 i] is weight i's forward panels, pack[2 i + 1] its backward
 * ones; weight 6 l + j is block l's j-th (BLOCK_WEIGHTS' order), then wte */
typedef struct {
    Pack pack[PACKS];
    int count, threads;
    size_t total;          /* floats of every pack */
    float *arena;
} PackedWeights;

static void packed_weights_free(void *memory)
{
    PackedWeights *p = memory;
    if (p != NULL)
        fast_free_panels(p->arena);
    free(p);
}

/* p's packs for m's weights in their order, laid out in p->arena when it
 * is not NULL (else only counted, into p->total) */
static void list_packs(const LanguageModel *m, PackedWeights *p)
{
    const Tensor *weights[BLOCK_WEIGHTS * LM_MAX_LAYERS + 1];
    int n = 0;
    for (int l = 0; l < m->num_layers; l++) {
        const Block *b = &m->blocks[l];
        const MultiHeadAttention *a = b->attn;
        const Tensor *own[BLOCK_WEIGHTS] = {a->W_q, a->W_k, a->W_v, a->W_o, b->fc_weight,
                                            b->proj_weight};
        for (int j = 0; j < BLOCK_WEIGHTS; j++)
            weights[n++] = own[j];
    }
    weights[n++] = m->wte;
    p->count = 2 * n;
    p->total = 0;
    for (int i = 0; i < p->count; i++) {
        const Tensor *w = weights[i / 2];
        const int out = w->shape[0], in = w->shape[1];
        const bool forward = i % 2 == 0;
        const size_t size = forward ? fast_panels_size(in, out) : fast_panels_size(out, in);
        p->pack[i] = (Pack){w->data, out, in, forward, size,
                            p->arena != NULL ? p->arena + p->total : NULL};
        p->total += size;
    }
}

/* thread t's packs: those that start in its part of all the floats */
static void pack_part(void *arg, int t)
{
    const PackedWeights *p = arg;
    size_t offset = 0;
    for (int i = 0; i < p->count; i++) {
        const Pack *k = &p->pack[i];
        if ((int)(offset * (size_t)p->threads / p->total) == t)
            fast_pack_panels(k->weight, (size_t)k->in, k->forward, k->forward ? k->in : k->out,
                             k->forward ? k->out : k->in, k->panels);
        offset += k->size;
    }
}

/* m's weights packed into *memory (made by the first call, freed with
 * free_memory), on threads threads by parallel */
static const PackedWeights *pack_weights(const LanguageModel *m, void **memory,
                                         void (**free_memory)(void *memory), int threads,
                                         void (*parallel)(int, void (*)(void *, int), void *))
{
    PackedWeights *p = *memory;
    if (p == NULL) {
        p = *memory = checked_calloc(1, sizeof *p);
        *free_memory = packed_weights_free;
        list_packs(m, p);
        p->arena = fast_alloc_panels(p->total);
    }
    list_packs(m, p);   /* the weights' addresses, read again each step */
    p->threads = threads < 1 ? 1 : threads;
    parallel(p->threads, pack_part, p);
    return p;
}

const void *language_prepare(LanguageModel *model, int threads)
{
    if (model->step_memory != NULL && model->step_memory_free != packed_weights_free)
        die("this model's step memory is a share's: prepare the whole model");
    return pack_weights(model, &model->step_memory, &model->step_memory_free, threads,
                        model->kernels.parallel);
}

typedef struct {
    float *x;                      /* (R, D) the stream coming in */
    float *h1, *mean1, *rstd1;     /* ln_1(x) and its (R,) statistics */
    float *q, *k, *v, *concat;     /* (R, D): the projections, the heads' outputs */
    float *logsumexp;              /* (B H, T) */
    float *x_mid;                  /* (R, D) the stream after attention */
    float *h2, *mean2, *rstd2;     /* ln_2(x_mid) */
    float *slope, *g;              /* (R, F) GELU's slope at fc's output, GELU's output */
} BlockMemory;

typedef struct {
    int batch_size, length;        /* B, T it was made for */
    float *arena;                  /* every float below, one allocation */
    int *inputs, *targets;         /* (R,) each */
    ValidLens *causal;
    BlockMemory blocks[LM_MAX_LAYERS];
    float *x_out;                  /* (R, D) after the last block */
    float *hf, *meanf, *rstdf;     /* ln_f(x_out) */
    float *logits, *grad_logits;   /* (R, V) */
    float *grad;                   /* (R, D) the stream's gradient */
    float *grad_h, *grad_q, *grad_k, *grad_v, *grad_x_k, *grad_x_v;   /* (R, D) */
    float *grad_f;                 /* (R, F) */
    float *h1_panels;              /* a block's ln_1(x) as panels, for the Q, K, V weights */
    PackedKeysValues kv;           /* a head's keys and values, packed */
    StreamingScratch *forward_scratch;
    StreamingBackwardScratch backward_scratch;
    FastGemmScratch gemm;
    const PackedWeights *weights;  /* this step's: the whole model's (prepared), or own */
    void *own;                     /* the share's own packs, made when none are prepared */
    void (*own_free)(void *memory);
} ShareMemory;

static void share_memory_free(void *memory)
{
    ShareMemory *s = memory;
    if (s == NULL)
        return;
    fast_free_panels(s->arena);
    free(s->inputs);
    valid_lens_free(s->causal);
    packed_kv_free(&s->kv);
    streaming_scratch_free(s->forward_scratch);
    streaming_backward_scratch_free(&s->backward_scratch);
    fast_gemm_scratch_free(&s->gemm);
    if (s->own_free != NULL)
        s->own_free(s->own);
    free(s);
}

/* the next count floats of the arena */
static float *take(float **next, size_t count)
{
    float *p = *next;
    *next += count;
    return p;
}

/* block memory b, its buffers taken from the arena (R rows, D wide, F
 * in the MLP, heads * T logsumexps) */
static void lay_out_block(BlockMemory *b, float **next, size_t R, size_t D, size_t F,
                          size_t logsumexps)
{
    b->x = take(next, R * D);
    b->h1 = take(next, R * D);
    b->mean1 = take(next, R);
    b->rstd1 = take(next, R);
    b->q = take(next, R * D);
    b->k = take(next, R * D);
    b->v = take(next, R * D);
    b->concat = take(next, R * D);
    b->logsumexp = take(next, logsumexps);
    b->x_mid = take(next, R * D);
    b->h2 = take(next, R * D);
    b->mean2 = take(next, R);
    b->rstd2 = take(next, R);
    b->slope = take(next, R * F);
    b->g = take(next, R * F);
}

/* Every buffer of a share of B windows of T tokens, in one arena. */
static ShareMemory *share_memory_new(const LanguageModel *m, int B, int T)
{
    const size_t R = (size_t)B * T, D = (size_t)m->num_hiddens, F = 4 * D;
    const size_t V = (size_t)m->vocab, H = (size_t)m->num_heads, d = D / H;
    const size_t per_block = 8 * R * D + 4 * R + 2 * R * F + (size_t)B * H * T;
    const size_t total = (size_t)m->num_layers * per_block + 2 * R * D + 2 * R + 2 * R * V +
                         7 * R * D + R * F + fast_panels_size((int)R, (int)D);
    ShareMemory *s = checked_calloc(1, sizeof *s);
    s->batch_size = B;
    s->length = T;
    s->arena = fast_alloc_panels(total);
    float *next = s->arena;
    for (int l = 0; l < m->num_layers; l++)
        lay_out_block(&s->blocks[l], &next, R, D, F, (size_t)B * H * T);
    s->x_out = take(&next, R * D);
    s->hf = take(&next, R * D);
    s->meanf = take(&next, R);
    s->rstdf = take(&next, R);
    s->logits = take(&next, R * V);
    s->grad_logits = take(&next, R * V);
    s->grad = take(&next, R * D);
    s->grad_h = take(&next, R * D);
    s->grad_q = take(&next, R * D);
    s->grad_k = take(&next, R * D);
    s->grad_v = take(&next, R * D);
    s->grad_x_k = take(&next, R * D);
    s->grad_x_v = take(&next, R * D);
    s->grad_f = take(&next, R * F);
    s->h1_panels = take(&next, fast_panels_size((int)R, (int)D));
    s->inputs = checked_malloc(2 * R, sizeof *s->inputs);
    s->targets = s->inputs + R;
    s->causal = valid_lens_causal(B, T);
    packed_kv_alloc(&s->kv, T, (int)d, (int)d);
    s->forward_scratch = streaming_scratch_new((int)d, (int)d);
    streaming_backward_scratch_alloc(&s->backward_scratch, T, (int)d, (int)d);
    fast_gemm_scratch_alloc(&s->gemm);
    return s;
}

/* x += y, n floats: a residual (gpt_block.c's residual_add) */
static void add_into(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* the weights in BLOCK_WEIGHTS' order, and the index of block l's j-th */
enum { W_Q, W_K, W_V, W_O, FC, PROJ };
#define WEIGHT(l, j) (BLOCK_WEIGHTS * (l) + (j))

/* y (R, out) = x (R, in) W^T + b, weight's forward panels (fast_linear_scratch) */
static void linear_packed(const ShareMemory *s, int weight, const float *x, const float *bias,
                          float *y)
{
    const Pack *w = &s->weights->pack[2 * weight];
    const int R = s->batch_size * s->length;
    fast_gemm_packed(R, w->out, w->in, x, (size_t)w->in, w->panels, bias, y, (size_t)w->out,
                     false, 1);
}

/* grad_x (R, in) = grad_y (R, out) W, on weight's backward panels; then
 * W's and b's gradients added, each when not NULL, from x (R, in)
 * (fast_linear_backward_scratch) */
static void linear_backward_packed(ShareMemory *s, int weight, const float *x,
                                   const float *grad_y, float *grad_x, float *grad_weight,
                                   float *grad_bias)
{
    const Pack *w = &s->weights->pack[2 * weight + 1];
    const int R = s->batch_size * s->length;
    fast_gemm_packed(R, w->in, w->out, grad_y, (size_t)w->out, w->panels, NULL, grad_x,
                     (size_t)w->in, false, 1);
    fast_linear_backward_scratch(R, w->in, w->out, x, w->weight, grad_y, NULL, grad_weight,
                                 grad_bias, &s->gemm);
}

/* ---- forward ----------------------------------------------------------------------- */

/* Attention of block l's Q, K, V, one (window, head) at a time in order,
 * into concat and logsumexp (fast_multihead.c's head_worker with its
 * projections cached) */
static void attention_heads(const LanguageModel *m, ShareMemory *s, const BlockMemory *b)
{
    const int B = s->batch_size, T = s->length, D = m->num_hiddens, H = m->num_heads;
    const int d = D / H;
    memset(b->logsumexp, 0, (size_t)B * H * T * sizeof(float));
    for (int job = 0; job < B * H; job++) {
        const size_t rows = (size_t)(job / H) * T * D + (size_t)(job % H) * d;
        packed_kv_fill(&s->kv, 0, T, b->k + rows, (size_t)D, b->v + rows, (size_t)D);
        streaming_attention_rows_scratch(&s->kv, b->q + rows, (size_t)D, T, s->causal, job / H,
                                         0, b->concat + rows, (size_t)D,
                                         b->logsumexp + (size_t)job * T, s->forward_scratch);
    }
}

/* block l: b->x (R, D) -> next (R, D) (block_forward) */
static void block_forward_share(const LanguageModel *m, ShareMemory *s, int l, float *next)
{
    const Block *w = &m->blocks[l];
    const MultiHeadAttention *a = w->attn;
    BlockMemory *b = &s->blocks[l];
    const int R = s->batch_size * s->length, D = m->num_hiddens, F = 4 * D;
    // step 1: x_mid = x + attention(ln_1(x))
    fast_layer_norm_forward(b->x, w->ln1_weight->data, w->ln1_bias->data, LAYER_NORM_EPS, b->h1,
                            b->mean1, b->rstd1, R, D);
    linear_packed(s, WEIGHT(l, W_Q), b->h1, a->b_q->data, b->q);
    linear_packed(s, WEIGHT(l, W_K), b->h1, a->b_k->data, b->k);
    linear_packed(s, WEIGHT(l, W_V), b->h1, a->b_v->data, b->v);
    attention_heads(m, s, b);
    linear_packed(s, WEIGHT(l, W_O), b->concat, a->b_o->data, b->x_mid);
    add_into(b->x_mid, b->x, (size_t)R * D);
    // step 2: out = x_mid + mlp(ln_2(x_mid))
    fast_layer_norm_forward(b->x_mid, w->ln2_weight->data, w->ln2_bias->data, LAYER_NORM_EPS,
                            b->h2, b->mean2, b->rstd2, R, D);
    linear_packed(s, WEIGHT(l, FC), b->h2, w->fc_bias->data, b->slope);
    fast_gelu_forward_slope(b->slope, b->g, (size_t)R * F);   /* fc's output -> the slope */
    linear_packed(s, WEIGHT(l, PROJ), b->g, w->proj_bias->data, next);
    add_into(next, b->x_mid, (size_t)R * D);
}

/* inputs (R,) -> logits (R, V) (language_model_forward) */
static void forward_share(const LanguageModel *m, ShareMemory *s)
{
    const int B = s->batch_size, T = s->length, R = B * T, D = m->num_hiddens;
    // step 1: wte[token] + wpe[t] (embed_tokens)
    float *x = m->num_layers > 0 ? s->blocks[0].x : s->x_out;
    for (int r = 0; r < R; r++) {
        const float *token = m->wte->data + (size_t)s->inputs[r] * D;
        const float *position = m->wpe->data + (size_t)(r % T) * D;
        for (int j = 0; j < D; j++)
            x[(size_t)r * D + j] = token[j] + position[j];
    }
    // step 2: the blocks, each writing the next one's stream
    for (int l = 0; l < m->num_layers; l++)
        block_forward_share(m, s, l, l + 1 < m->num_layers ? s->blocks[l + 1].x : s->x_out);
    // step 3: ln_f, then the tied unembedding (unembed)
    fast_layer_norm_forward(s->x_out, m->lnf_weight->data, m->lnf_bias->data, LAYER_NORM_EPS,
                            s->hf, s->meanf, s->rstdf, R, D);
    linear_packed(s, WEIGHT(m->num_layers, 0), s->hf, NULL, s->logits);   /* wte */
}

/* ---- backward ---------------------------------------------------------------------- */

/* concat's gradient in s->grad_h -> grad_q, grad_k, grad_v, one (window,
 * head) at a time (fast_multihead.c's head_backward_worker), each head's
 * columns read and written in place, at the stream's stride */
static void attention_heads_backward(const LanguageModel *m, ShareMemory *s,
                                     const BlockMemory *b)
{
    const int B = s->batch_size, T = s->length, D = m->num_hiddens, H = m->num_heads;
    const int d = D / H;
    const size_t stride = (size_t)D;
    /* the heads add into their columns, which start at 0 */
    memset(s->grad_q, 0, (size_t)B * T * D * sizeof(float));
    memset(s->grad_k, 0, (size_t)B * T * D * sizeof(float));
    memset(s->grad_v, 0, (size_t)B * T * D * sizeof(float));
    for (int job = 0; job < B * H; job++) {
        const size_t rows = (size_t)(job / H) * T * D + (size_t)(job % H) * d;
        AttentionRowsBackward head = {
            T, T, d, d,
            b->q + rows, stride,
            b->k + rows, stride,
            b->v + rows, stride,
            b->concat + rows, stride,
            s->grad_h + rows, stride,
            b->logsumexp + (size_t)job * T, s->causal, job / H,
            s->grad_q + rows, stride,
            s->grad_k + rows, stride,
            s->grad_v + rows, stride,
        };
        streaming_attention_backward_rows(&head, 0, T, &s->backward_scratch);
    }
}

/* s->grad (R, D), the gradient of block l's output -> of its input, in
 * place; the block's parameter gradients added (block_backward) */
static void block_backward_share(LanguageModel *m, ShareMemory *s, int l)
{
    const Block *w = &m->blocks[l];
    BlockGrads *gr = &m->grads[l];
    MultiHeadGrads *ga = gr->attn;
    const BlockMemory *b = &s->blocks[l];
    const int R = s->batch_size * s->length, D = m->num_hiddens, F = 4 * D;
    // step 2 backwards: proj, GELU, fc (mlp_backward), then ln_2
    linear_backward_packed(s, WEIGHT(l, PROJ), b->g, s->grad, s->grad_f, gr->proj_weight->data,
                           gr->proj_bias->data);
    for (size_t i = 0; i < (size_t)R * F; i++)   /* fast_gelu_backward, its slope kept */
        s->grad_f[i] *= b->slope[i];
    linear_backward_packed(s, WEIGHT(l, FC), b->h2, s->grad_f, s->grad_h, gr->fc_weight->data,
                           gr->fc_bias->data);
    fast_layer_norm_backward(s->grad_h, b->x_mid, w->ln2_weight->data, b->mean2, b->rstd2, s->grad,
                             gr->ln2_weight->data, gr->ln2_bias->data, R, D);
    // step 1 backwards: W_o, the heads, the three projections (fast_multihead_backward)
    linear_backward_packed(s, WEIGHT(l, W_O), b->concat, s->grad, s->grad_h, ga->W_o->data,
                           ga->b_o->data);
    attention_heads_backward(m, s, b);
    // the three read ln_1(x): packed once for their weights' gradients
    fast_pack_panels(b->h1, (size_t)D, false, R, D, s->h1_panels);
    const float *grads_y[3] = {s->grad_q, s->grad_k, s->grad_v};
    float *grads_x[3] = {s->grad_h, s->grad_x_k, s->grad_x_v};
    float *grads_w[3] = {ga->W_q->data, ga->W_k->data, ga->W_v->data};
    float *grads_b[3] = {ga->b_q->data, ga->b_k->data, ga->b_v->data};
    for (int i = 0; i < 3; i++) {
        linear_backward_packed(s, WEIGHT(l, W_Q + i), b->h1, grads_y[i], grads_x[i], NULL,
                               grads_b[i]);
        fast_weight_grad_packed(R, D, D, s->h1_panels, grads_y[i], grads_w[i], &s->gemm);
    }
    // ln_1(x) was read three times: its gradient is the three summed, then ln_1
    for (size_t i = 0; i < (size_t)R * D; i++)   /* (q + k) + v, in one pass */
        s->grad_h[i] = s->grad_h[i] + s->grad_x_k[i] + s->grad_x_v[i];
    fast_layer_norm_backward(s->grad_h, b->x, w->ln1_weight->data, b->mean1, b->rstd1, s->grad,
                             gr->ln1_weight->data, gr->ln1_bias->data, R, D);
}

/* grad_logits (R, V) -> every parameter's gradient added (language_model_backward) */
static void backward_share(LanguageModel *m, ShareMemory *s)
{
    const int B = s->batch_size, T = s->length, R = B * T, D = m->num_hiddens;
    // step 3 backwards: the unembedding (wte's first part), then ln_f
    linear_backward_packed(s, WEIGHT(m->num_layers, 0), s->hf, s->grad_logits, s->grad_h,
                           m->grad_wte->data, NULL);
    memset(s->grad, 0, (size_t)R * D * sizeof(float));
    fast_layer_norm_backward(s->grad_h, s->x_out, m->lnf_weight->data, s->meanf, s->rstdf, s->grad,
                             m->grad_lnf_weight->data, m->grad_lnf_bias->data, R, D);
    // step 2 backwards, from the last block
    for (int l = m->num_layers - 1; l >= 0; l--)
        block_backward_share(m, s, l);
    // step 1 backwards: each row's gradient into its token's row of wte and
    // its position's row of wpe (embed_tokens_backward)
    Tensor grad = {.data = s->grad, .ndim = 3, .shape = {B, T, D}, .size = (size_t)R * D};
    embed_tokens_backward(&grad, s->inputs, m->grad_wte, m->grad_wpe);
}

/* ---- the step ---------------------------------------------------------------------- */

/* ---- the end of the step ------------------------------------------------------------ */

/* The shares' gradients summed with weights into model's (sum_shares'
 * numbers: 0, then each share's added in turn), and each sum's
 * squares_sum, on the threads: thread t takes the parameters that start
 * in its part of all the floats, whole, so every parameter's numbers are
 * the same on any number of threads. */
typedef struct {
    const LanguageModel *model;
    const float *weights;         /* (LM_SHARES,) */
    size_t total;                 /* floats in all parameters */
    int threads;
    double squares[LM_MAX_PARAMS];
} SumParts;

static void sum_part(void *arg, int t)
{
    SumParts *p = arg;
    const LanguageModel *m = p->model;
    size_t offset = 0;
    for (int i = 0; i < m->num_params; i++) {
        float *grad = m->params[i].grad->data;
        const size_t size = m->params[i].grad->size;
        const int owner = (int)(offset * (size_t)p->threads / p->total);
        offset += size;
        if (owner != t)
            continue;
        memset(grad, 0, size * sizeof *grad);   /* each sum starts at 0 */
        for (int s = 0; s < LM_SHARES; s++) {
            const float weight = p->weights[s], *share = m->shares[s]->params[i].grad->data;
            if (weight != 0.0f)   /* the test out of the loop: it runs in vectors */
                for (size_t j = 0; j < size; j++)
                    grad[j] += weight * share[j];
        }
        p->squares[i] = squares_sum(grad, size);
    }
}

typedef struct {
    const Adam *adam;
    float coef;       /* the clip's factor, or 1: none */
    int threads;
} UpdateParts;

/* thread t's part of every parameter (adam_update_part's): scaled by the
 * clip's factor, then AdamW's step */
static void update_part(void *arg, int t)
{
    const UpdateParts *u = arg;
    for (int i = 0; u->coef < 1.0f && i < u->adam->count; i++) {
        const Tensor *grad = u->adam->params[i].grad;
        const size_t start = grad->size * (size_t)t / (size_t)u->threads;
        const size_t end = grad->size * (size_t)(t + 1) / (size_t)u->threads;
        for (size_t j = start; j < end; j++)
            grad->data[j] *= u->coef;
    }
    adam_update_part(u->adam, t, u->threads);
}

void language_update(LanguageModel *model, Adam *adam, const float *weights, double max_norm,
                     int threads)
{
    if (adam->params != model->params || adam->count != model->num_params)
        die("adam must hold the model's own parameters");
    // the shares summed, and parameters_clip_grad_norm's factor from their norm
    SumParts sums = {model, weights, parameters_count(model->params, model->num_params),
                     threads < 1 ? 1 : threads, {0}};
    model->kernels.parallel(sums.threads, sum_part, &sums);
    double square_sum = 0.0;
    for (int i = 0; i < model->num_params; i++)   /* in parameter order */
        square_sum += sums.squares[i];
    const double norm = sqrt(square_sum);
    const double coef = max_norm / (norm + 1e-6);
    UpdateParts parts = {adam, coef < 1.0 ? (float)coef : 1.0f, threads < 1 ? 1 : threads};
    model->kernels.parallel(parts.threads, update_part, &parts);
}

double language_share_step(LanguageModel *share, const int *tokens, int batch_size)
{
    LanguageModel *m = share;
    const int B = batch_size, T = m->context, R = B * T;
    if (m->parts.bigram || !block_parts_whole(m->parts.block))
        die("the whole model only, not a rung of the build-up");
    if (m->step_memory != NULL && m->step_memory_free != share_memory_free)
        die("this model's step memory is a whole model's packed weights: run the step on a "
            "share (language_model_train_step)");
    ShareMemory *s = m->step_memory;
    if (s == NULL || s->batch_size != B) {
        share_memory_free(s);
        s = m->step_memory = share_memory_new(m, B, T);
        m->step_memory_free = share_memory_free;
    }
    // the weights as the products read them: packed for every share by
    // language_prepare, or here
    s->weights = m->prepared != NULL
                     ? m->prepared
                     : pack_weights(m, &s->own, &s->own_free, 1, shares_in_turn);
    for (int b = 0; b < B; b++)   /* split_tokens */
        for (int t = 0; t < T; t++) {
            s->inputs[b * T + t] = tokens[b * (T + 1) + t];
            s->targets[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
    parameters_zero_grad(m->params, m->num_params);
    forward_share(m, s);
    // the loss and its gradient (cross_entropy_with_grad)
    const double loss =
        cross_entropy_backward_rows(s->logits, s->targets, R, m->vocab, 1.0f, s->grad_logits);
    backward_share(m, s);
    return loss;
}
