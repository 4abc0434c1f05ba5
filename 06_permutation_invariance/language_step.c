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
#include "fast/fast_matmul.h"
#include "fast/streaming_attention.h"
#include "learn/embedding.h"
#include "learn/layer_norm.h"
#include "learn/loss.h"
#include "learn/optim.h"

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
    layer_norm_forward_grouped(b->x, w->ln1_weight->data, w->ln1_bias->data, b->h1, b->mean1,
                               b->rstd1, R, D);
    fast_linear_scratch(R, D, D, b->h1, a->W_q->data, a->b_q->data, b->q, &s->gemm);
    fast_linear_scratch(R, D, D, b->h1, a->W_k->data, a->b_k->data, b->k, &s->gemm);
    fast_linear_scratch(R, D, D, b->h1, a->W_v->data, a->b_v->data, b->v, &s->gemm);
    attention_heads(m, s, b);
    fast_linear_scratch(R, D, D, b->concat, a->W_o->data, a->b_o->data, b->x_mid, &s->gemm);
    add_into(b->x_mid, b->x, (size_t)R * D);
    // step 2: out = x_mid + mlp(ln_2(x_mid))
    layer_norm_forward_grouped(b->x_mid, w->ln2_weight->data, w->ln2_bias->data, b->h2,
                               b->mean2, b->rstd2, R, D);
    fast_linear_scratch(R, D, F, b->h2, w->fc_weight->data, w->fc_bias->data, b->slope,
                        &s->gemm);
    fast_gelu_forward_slope(b->slope, b->g, (size_t)R * F);   /* fc's output -> the slope */
    fast_linear_scratch(R, F, D, b->g, w->proj_weight->data, w->proj_bias->data, next,
                        &s->gemm);
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
    layer_norm_forward_grouped(s->x_out, m->lnf_weight->data, m->lnf_bias->data, s->hf,
                               s->meanf, s->rstdf, R, D);
    fast_linear_scratch(R, D, m->vocab, s->hf, m->wte->data, NULL, s->logits, &s->gemm);
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
    const MultiHeadAttention *a = w->attn;
    BlockGrads *gr = &m->grads[l];
    MultiHeadGrads *ga = gr->attn;
    const BlockMemory *b = &s->blocks[l];
    const int R = s->batch_size * s->length, D = m->num_hiddens, F = 4 * D;
    // step 2 backwards: proj, GELU, fc (mlp_backward), then ln_2
    fast_linear_backward_scratch(R, F, D, b->g, w->proj_weight->data, s->grad, s->grad_f,
                                 gr->proj_weight->data, gr->proj_bias->data, &s->gemm);
    for (size_t i = 0; i < (size_t)R * F; i++)   /* fast_gelu_backward, its slope kept */
        s->grad_f[i] *= b->slope[i];
    fast_linear_backward_scratch(R, D, F, b->h2, w->fc_weight->data, s->grad_f, s->grad_h,
                                 gr->fc_weight->data, gr->fc_bias->data, &s->gemm);
    layer_norm_backward_grouped(s->grad_h, b->x_mid, w->ln2_weight->data, b->mean2, b->rstd2,
                                s->grad, gr->ln2_weight->data, gr->ln2_bias->data, R, D);
    // step 1 backwards: W_o, the heads, the three projections (fast_multihead_backward)
    fast_linear_backward_scratch(R, D, D, b->concat, a->W_o->data, s->grad, s->grad_h,
                                 ga->W_o->data, ga->b_o->data, &s->gemm);
    attention_heads_backward(m, s, b);
    // the three read ln_1(x): packed once for their weights' gradients
    fast_pack_panels(b->h1, (size_t)D, false, R, D, s->h1_panels);
    const float *weights[3] = {a->W_q->data, a->W_k->data, a->W_v->data};
    const float *grads_y[3] = {s->grad_q, s->grad_k, s->grad_v};
    float *grads_x[3] = {s->grad_h, s->grad_x_k, s->grad_x_v};
    float *grads_w[3] = {ga->W_q->data, ga->W_k->data, ga->W_v->data};
    float *grads_b[3] = {ga->b_q->data, ga->b_k->data, ga->b_v->data};
    for (int i = 0; i < 3; i++) {
        fast_linear_backward_scratch(R, D, D, b->h1, weights[i], grads_y[i], grads_x[i], NULL,
                                     grads_b[i], &s->gemm);
        fast_weight_grad_packed(R, D, D, s->h1_panels, grads_y[i], grads_w[i], &s->gemm);
    }
    // ln_1(x) was read three times: its gradient is the three summed, then ln_1
    for (size_t i = 0; i < (size_t)R * D; i++)   /* (q + k) + v, in one pass */
        s->grad_h[i] = s->grad_h[i] + s->grad_x_k[i] + s->grad_x_v[i];
    layer_norm_backward_grouped(s->grad_h, b->x, w->ln1_weight->data, b->mean1, b->rstd1,
                                s->grad, gr->ln1_weight->data, gr->ln1_bias->data, R, D);
}

/* grad_logits (R, V) -> every parameter's gradient added (language_model_backward) */
static void backward_share(LanguageModel *m, ShareMemory *s)
{
    const int B = s->batch_size, T = s->length, R = B * T, D = m->num_hiddens;
    // step 3 backwards: the unembedding (wte's first part), then ln_f
    fast_linear_backward_scratch(R, D, m->vocab, s->hf, m->wte->data, s->grad_logits, s->grad_h,
                                 m->grad_wte->data, NULL, &s->gemm);
    memset(s->grad, 0, (size_t)R * D * sizeof(float));
    layer_norm_backward_grouped(s->grad_h, s->x_out, m->lnf_weight->data, s->meanf, s->rstdf,
                                s->grad, m->grad_lnf_weight->data, m->grad_lnf_bias->data, R, D);
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
        die("language_update: adam must hold the model's own parameters");
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
        die("language_share_step: the whole model only, not a rung of the build-up");
    ShareMemory *s = m->step_memory;
    if (s == NULL || s->batch_size != B) {
        share_memory_free(s);
        s = m->step_memory = share_memory_new(m, B, T);
        m->step_memory_free = share_memory_free;
    }
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
