/*
 * language_model.c - a character-level GPT built from the chapters'
 * layer (introduced in chapter 06's page "A language model"). See
 * language_model.h.
 *
 * Legend: B = batch_size, T = tokens of a sequence, C = context,
 * V = vocabulary, D = num_hiddens, H = num_heads, d = D / H, F = 4 D,
 * N = num_layers, R = B * T rows.
 */
#include "learn/language_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/embedding.h"
#include "learn/loss.h"
#include "ops.h"


/* ---- the vocabulary ------------------------------------------------------------ */

int text_vocabulary(const unsigned char *text, size_t n, int *bytes)
{
    bool seen[LM_MAX_VOCAB] = {false};
    for (size_t i = 0; i < n; i++)
        seen[text[i]] = true;
    int V = 0;
    for (int c = 0; c < LM_MAX_VOCAB; c++)
        if (seen[c])
            bytes[V++] = c;
    return V;
}

size_t text_encode(const unsigned char *text, size_t n, const int *bytes, int vocab, int *ids)
{
    int token_of[LM_MAX_VOCAB];
    for (int c = 0; c < LM_MAX_VOCAB; c++)
        token_of[c] = -1;
    for (int i = 0; i < vocab; i++)
        token_of[bytes[i]] = i;
    for (size_t i = 0; i < n; i++) {
        ids[i] = token_of[text[i]];
        if (ids[i] < 0)
            return i;
    }
    return n;
}

/* ---- the parameters ------------------------------------------------------------ */

/* name "blocks.l.<what>", kept in the model so the lists can point at it */
static const char *block_name(LanguageModel *m, int *used, int l, const char *what)
{
    char *name = m->names[(*used)++];
    snprintf(name, LM_NAME_LEN, "blocks.%d.%s", l, what);
    return name;
}

/* parameter_table_add for a tensor the model has: a rung of the build-up
 * leaves some out (NULL) */
static void add_kept(ParameterTable *t, const char *name, Tensor *value, Tensor *grad)
{
    if (value != NULL)
        parameter_table_add(t, name, value, grad);
}

/* The model's parameters, listed once (learn/parameter_table.h), in the
 * order of the PyTorch module's state_dict. */
static void list_parameters(LanguageModel *m)
{
    ParameterTable t = parameter_table(m->params, LM_MAX_PARAMS, m->files, LM_MAX_FILES);
    int used = 0;
    parameter_table_add(&t, "wte.weight", m->wte, m->grad_wte);
    add_kept(&t, "wpe.weight", m->wpe, m->grad_wpe);
    for (int l = 0; l < m->num_layers; l++) {
        Block *b = &m->blocks[l];
        BlockGrads *g = &m->grads[l];
        char prefix[32];   /* "blocks.%d.attn." for any int: 7 + 11 + 6 + 1 */
        add_kept(&t, block_name(m, &used, l, "ln_1.weight"), b->ln1_weight, g->ln1_weight);
        add_kept(&t, block_name(m, &used, l, "ln_1.bias"), b->ln1_bias, g->ln1_bias);
        snprintf(prefix, sizeof prefix, "blocks.%d.attn.", l);
        parameter_table_layer(&t, prefix, m->layer_names[l], ATTENTION_STACKED, b->attn,
                              g->attn);
        add_kept(&t, block_name(m, &used, l, "ln_2.weight"), b->ln2_weight, g->ln2_weight);
        add_kept(&t, block_name(m, &used, l, "ln_2.bias"), b->ln2_bias, g->ln2_bias);
        add_kept(&t, block_name(m, &used, l, "mlp.fc.weight"), b->fc_weight, g->fc_weight);
        add_kept(&t, block_name(m, &used, l, "mlp.fc.bias"), b->fc_bias, g->fc_bias);
        add_kept(&t, block_name(m, &used, l, "mlp.proj.weight"), b->proj_weight,
                 g->proj_weight);
        add_kept(&t, block_name(m, &used, l, "mlp.proj.bias"), b->proj_bias, g->proj_bias);
    }
    add_kept(&t, "ln_f.weight", m->lnf_weight, m->grad_lnf_weight);
    add_kept(&t, "ln_f.bias", m->lnf_bias, m->grad_lnf_bias);
    parameter_table_ints(&t, "vocab", m->bytes, m->vocab);
    parameter_table_ints(&t, "num_heads", &m->saved_heads, 1);
    parameter_table_ints(&t, "num_layers", &m->saved_layers, 1);
    m->num_params = t.num_params;
    m->num_files = t.num_files;
}

static void fill_normal(Tensor *x, float std, Rng *rng)
{
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = std * rng_normal(rng);
}

/* (D,) ones or zeros, or NULL where the model leaves a layer norm out */
static Tensor *filled_kept(bool kept, int D, float value)
{
    return kept ? tensor_full(value, SHAPE(D)) : NULL;
}

/* a zero gradient of value's shape, or NULL where value is left out */
static Tensor *grad_of(const Tensor *value)
{
    return value != NULL ? tensor_zeros(value->ndim, value->shape) : NULL;
}

/* zero gradients for a block's parameters (NULL where it leaves one out) */
static BlockGrads block_grads_new(const Block *b)
{
    return (BlockGrads){.ln1_weight = grad_of(b->ln1_weight), .ln1_bias = grad_of(b->ln1_bias),
                        .attn = multihead_grads_new(b->attn),
                        .ln2_weight = grad_of(b->ln2_weight), .ln2_bias = grad_of(b->ln2_bias),
                        .fc_weight = grad_of(b->fc_weight), .fc_bias = grad_of(b->fc_bias),
                        .proj_weight = grad_of(b->proj_weight),
                        .proj_bias = grad_of(b->proj_bias)};
}

/* zero gradients for all of m's parameters, listed with them */
static void grads_new(LanguageModel *m)
{
    for (int l = 0; l < m->num_layers; l++)
        m->grads[l] = block_grads_new(&m->blocks[l]);
    m->grad_wte = grad_of(m->wte);
    m->grad_wpe = grad_of(m->wpe);
    m->grad_lnf_weight = grad_of(m->lnf_weight);
    m->grad_lnf_bias = grad_of(m->lnf_bias);
    list_parameters(m);
}

static void grads_free(LanguageModel *m)
{
    for (int l = 0; l < m->num_layers; l++) {
        BlockGrads *g = &m->grads[l];
        multihead_grads_free(g->attn);
        TENSOR_FREE(g->ln1_weight, g->ln1_bias, g->ln2_weight, g->ln2_bias, g->fc_weight,
                    g->fc_bias, g->proj_weight, g->proj_bias);
    }
    TENSOR_FREE(m->grad_wte, m->grad_wpe, m->grad_lnf_weight, m->grad_lnf_bias);
}

/* One block's parameters: attention drawn by
 * multihead_new, then every weight drawn again as nanoGPT draws it; what
 * the block leaves out (parts) neither drawn nor kept. */
static void block_new(Block *b, int D, int H, int N, BlockParts parts, Rng *rng)
{
    const int F = 4 * D;
    const float std = 0.02f, residual_std = 0.02f / sqrtf(2.0f * (float)N);
    const bool norm = !parts.no_layer_norm, mlp = !parts.no_mlp;
    b->ln1_weight = filled_kept(norm, D, 1.0f);
    b->ln1_bias = filled_kept(norm, D, 0.0f);
    b->attn = multihead_new(D, D, D, D, H, 0.0f, true, rng);
    Tensor *attn_weights[] = {b->attn->W_q, b->attn->W_k, b->attn->W_v};
    for (int i = 0; i < 3; i++)
        fill_normal(attn_weights[i], std, rng);
    fill_normal(b->attn->W_o, residual_std, rng);
    Tensor *attn_biases[] = {b->attn->b_q, b->attn->b_k, b->attn->b_v, b->attn->b_o};
    for (int i = 0; i < 4; i++)
        memset(attn_biases[i]->data, 0, attn_biases[i]->size * sizeof(float));
    b->ln2_weight = filled_kept(norm, D, 1.0f);
    b->ln2_bias = filled_kept(norm, D, 0.0f);
    b->fc_weight = mlp ? tensor_normal(rng, 0.0f, std, SHAPE(F, D)) : NULL;
    b->fc_bias = mlp ? tensor_zeros(SHAPE(F)) : NULL;
    b->proj_weight = mlp ? tensor_normal(rng, 0.0f, residual_std, SHAPE(D, F)) : NULL;
    b->proj_bias = mlp ? tensor_zeros(SHAPE(D)) : NULL;
}

LanguageModel *language_model_new(const int *bytes, int vocab, int context, int num_hiddens,
                                  int num_heads, int num_layers, Rng *rng)
{
    return language_model_new_parts(bytes, vocab, context, num_hiddens, num_heads, num_layers,
                                    (LanguageParts){0}, rng);
}

LanguageModel *language_model_new_parts(const int *bytes, int vocab, int context,
                                        int num_hiddens, int num_heads, int num_layers,
                                        LanguageParts parts, Rng *rng)
{
    if (vocab < 2 || vocab > LM_MAX_VOCAB || context < 1)
        die("the vocabulary must be in [2, %d] and the context positive, got %d and %d",
            LM_MAX_VOCAB, vocab, context);
    if (parts.bigram && (num_hiddens != vocab || num_layers != 0))
        die("the bigram is a (V, V) table without blocks: D = V = %d and N = 0, got "
            "D = %d and N = %d", vocab, num_hiddens, num_layers);
    if (!parts.bigram && (num_layers < 1 || num_layers > LM_MAX_LAYERS))
        die("num_layers must be in [1, %d], got %d", LM_MAX_LAYERS, num_layers);
    if (num_heads < 1 || num_heads > LM_MAX_HEADS)
        die("num_heads must be in [1, %d], got %d", LM_MAX_HEADS, num_heads);
    for (int i = 0; i < vocab; i++)
        if (bytes[i] < 0 || bytes[i] > 255 || (i > 0 && bytes[i] <= bytes[i - 1]))
            die("the vocabulary's bytes must increase within [0, 255]: token %d is %d", i,
                bytes[i]);
    LanguageModel *m = checked_calloc(1, sizeof *m);
    const int V = vocab, C = context, D = num_hiddens;
    *m = (LanguageModel){.vocab = V, .context = C, .num_hiddens = D, .num_heads = num_heads,
                         .num_layers = num_layers, .saved_heads = num_heads,
                         .saved_layers = num_layers, .parts = parts,
                         .kernels = CLEAR_LANGUAGE_KERNELS};
    memcpy(m->bytes, bytes, (size_t)V * sizeof *bytes);
    // drawn in a fixed order, so a seed names one model; the bigram is wte alone
    const bool norm = !parts.bigram && !parts.block.no_layer_norm;
    m->wte = tensor_normal(rng, 0.0f, 0.02f, SHAPE(V, D));
    m->wpe = parts.bigram ? NULL : tensor_normal(rng, 0.0f, 0.02f, SHAPE(C, D));
    for (int l = 0; l < num_layers; l++)
        block_new(&m->blocks[l], D, num_heads, num_layers, parts.block, rng);
    m->lnf_weight = filled_kept(norm, D, 1.0f);
    m->lnf_bias = filled_kept(norm, D, 0.0f);
    grads_new(m);
    return m;
}

void language_model_free(LanguageModel *model)
{
    if (model == NULL)
        return;
    for (int s = 0; s < LM_SHARES; s++)
        if (model->shares[s] != NULL) {   /* its gradients; the parameters are model's */
            if (model->shares[s]->step_memory_free != NULL)
                model->shares[s]->step_memory_free(model->shares[s]->step_memory);
            grads_free(model->shares[s]);
            free(model->shares[s]);
        }
    if (model->step_memory_free != NULL)
        model->step_memory_free(model->step_memory);
    for (int l = 0; l < model->num_layers; l++) {
        Block *b = &model->blocks[l];
        multihead_free(b->attn);
        TENSOR_FREE(b->ln1_weight, b->ln1_bias, b->ln2_weight, b->ln2_bias, b->fc_weight,
                    b->fc_bias, b->proj_weight, b->proj_bias);
    }
    grads_free(model);
    TENSOR_FREE(model->wte, model->wpe, model->lnf_weight, model->lnf_bias);
    free(model);
}

size_t language_model_size(const LanguageModel *model)
{
    return parameters_count(model->params, model->num_params);
}

/* ---- forward --------------------------------------------------------------------- */

/* language_model_forward through the given kernels */
static Tensor *forward_on(const LanguageModel *model, const LanguageKernels *kernels,
                          const int *tokens, int batch_size, int length, Tensor **weights,
                          LanguageCache *cache)
{
    const int B = batch_size, T = length;
    if (T < 1 || T > model->context)
        die("a sequence of %d tokens: the context holds 1 to %d", T, model->context);
    if (model->parts.bigram) {   /* the first rung of the build-up: each token's row of scores */
        if (cache != NULL)
            *cache = (LanguageCache){.tokens = tokens, .batch_size = B, .length = T};
        return embedding_forward(model->wte, tokens, SHAPE(B, T));
    }
    // step 1: the stream starts as each token's vector plus its position's
    Tensor *x = embed_tokens(model->wte, model->wpe, tokens, B, T);
    ValidLens *causal = valid_lens_causal(B, T);   /* query t sees keys 0 .. t */
    if (cache != NULL)
        *cache = (LanguageCache){.tokens = tokens, .batch_size = B, .length = T,
                                 .causal = causal};
    // step 2: the blocks, each reading the stream and adding to it
    for (int l = 0; l < model->num_layers; l++) {
        // the whole block through block_forward itself, a call into another
        // file, so that a learner's block_forward is the one that runs
        Tensor **block_weights = weights != NULL ? &weights[l] : NULL;
        BlockCache *block_cache = cache != NULL ? &cache->blocks[l] : NULL;
        Tensor *next = block_parts_whole(model->parts.block)
                           ? block_forward(&model->blocks[l], kernels, x, causal,
                                           block_weights, block_cache)
                           : block_forward_parts(&model->blocks[l], model->parts.block,
                                                 kernels, x, causal, block_weights,
                                                 block_cache);
        if (cache == NULL)
            tensor_free(x);
        x = next;
    }
    // step 3: the last layer norm, then every character's score, through wte
    Tensor *mean, *rstd;
    Tensor *hf = norm_or_copy(x, model->lnf_weight, model->lnf_bias, &mean, &rstd);
    Tensor *logits = unembed(kernels, hf, model->wte);
    if (cache != NULL) {
        cache->x_out = x;
        cache->hf = hf;
        cache->meanf = mean;
        cache->rstdf = rstd;
    } else {
        TENSOR_FREE(x, hf, mean, rstd);
        valid_lens_free(causal);
    }
    return logits;
}

Tensor *language_model_forward(const LanguageModel *model, const int *tokens, int batch_size,
                               int length, Tensor **weights, LanguageCache *cache)
{
    return forward_on(model, &model->kernels, tokens, batch_size, length, weights, cache);
}

/* ---- backward -------------------------------------------------------------------- */

void language_model_backward(LanguageModel *model, const LanguageCache *cache,
                             const Tensor *grad_logits)
{
    const int B = cache->batch_size, T = cache->length, D = model->num_hiddens;
    tensor_check_shape("grad_logits", grad_logits,
                       SHAPE(B, T, model->vocab));
    if (model->parts.bigram) {   /* each token's row gets its position's gradient */
        embedding_backward(model->grad_wte, cache->tokens, grad_logits);
        return;
    }
    // step 3 backwards: the unembedding (wte's first gradient), then ln_f
    Tensor *grad_hf = unembed_backward(&model->kernels, cache->hf, model->wte, grad_logits,
                                       model->grad_wte);
    Tensor *grad = tensor_zeros(SHAPE(B, T, D));
    norm_or_copy_backward(grad_hf, cache->x_out, model->lnf_weight, cache->meanf, cache->rstdf,
                          grad, model->grad_lnf_weight, model->grad_lnf_bias);
    tensor_free(grad_hf);
    // step 2 backwards, from the last block
    for (int l = model->num_layers - 1; l >= 0; l--)
        block_backward_parts(&model->blocks[l], model->parts.block, &model->grads[l],
                             &model->kernels, &cache->blocks[l], grad);
    // step 1 backwards: x_0 = wte[token] + wpe[t], each row gets x_0's gradient
    // (wte's second part, added to the unembedding's)
    embed_tokens_backward(grad, cache->tokens, model->grad_wte, model->grad_wpe);
    tensor_free(grad);
}

void language_cache_free(LanguageCache *cache)
{
    for (int l = 0; l < LM_MAX_LAYERS; l++)
        block_cache_free(&cache->blocks[l]);
    TENSOR_FREE(cache->x_out, cache->hf, cache->meanf, cache->rstdf);
    valid_lens_free(cache->causal);
    *cache = (LanguageCache){0};
}

/* ---- loss and training ----------------------------------------------------------- */

/* tokens (B, T + 1) -> inputs (B, T) and targets (B, T), one new array */
static int *split_tokens(const int *tokens, int B, int T, int **targets)
{
    int *inputs = checked_calloc(2 * (size_t)B * T, sizeof *inputs);
    *targets = inputs + (size_t)B * T;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tokens[b * (T + 1) + t];
            (*targets)[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
    return inputs;
}

/* ---- a batch in shares (language_model_train_step) ---- */

/* the windows of share s of a batch of B: first .. first + count - 1 */
static int share_windows(int B, int s, int *first)
{
    *first = B * s / LM_SHARES;
    return B * (s + 1) / LM_SHARES - *first;
}

/* the threads the shares run on: one each, or all on one */
static int share_threads(const LanguageModel *model)
{
    return model->kernels.num_threads >= LM_SHARES ? LM_SHARES : 1;
}

/* the mean loss of B windows from each share's, weighted by its windows,
 * summed in share order */
static double shares_mean(const double *losses, int B)
{
    double loss = 0.0;
    for (int s = 0; s < LM_SHARES; s++) {
        int first;
        loss += losses[s] * share_windows(B, s, &first) / B;
    }
    return loss;
}

/* tokens (B, T + 1) -> their loss through kernels, no gradient */
static double loss_on(const LanguageModel *model, const LanguageKernels *kernels,
                      const int *tokens, int batch_size, int length)
{
    int *targets;
    int *inputs = split_tokens(tokens, batch_size, length, &targets);
    Tensor *logits = forward_on(model, kernels, inputs, batch_size, length, NULL, NULL);
    const double loss = cross_entropy(logits, targets);
    tensor_free(logits);
    free(inputs);
    return loss;
}

typedef struct {
    const LanguageModel *model;
    const int *tokens;                /* (B, T + 1) */
    int batch_size, length, threads;  /* B, T, the threads the shares run on */
    double losses[LM_SHARES];
} LossShares;

/* thread t runs shares t, t + threads, ...: the loss of its windows, its
 * kernels on one thread */
static void loss_shares(void *arg, int t)
{
    LossShares *st = arg;
    LanguageKernels one = st->model->kernels;
    one.num_threads = 1;
    for (int s = t; s < LM_SHARES; s += st->threads) {
        int first;
        const int count = share_windows(st->batch_size, s, &first);
        const int *windows = st->tokens + (size_t)first * (st->length + 1);
        st->losses[s] = count == 0 ? 0.0
                                   : loss_on(st->model, &one, windows, count, st->length);
    }
}

double language_model_loss(const LanguageModel *model, const int *tokens, int batch_size,
                           int length)
{
    LossShares st = {model, tokens, batch_size, length, share_threads(model), {0}};
    model->kernels.parallel(st.threads, loss_shares, &st);
    return shares_mean(st.losses, batch_size);
}

double language_model_loss_grad(LanguageModel *model, const int *tokens, int batch_size,
                                int length)
{
    int *targets;
    int *inputs = split_tokens(tokens, batch_size, length, &targets);
    parameters_zero_grad(model->params, model->num_params);
    LanguageCache cache;
    Tensor *logits = language_model_forward(model, inputs, batch_size, length, NULL, &cache);
    Tensor *grad_logits;
    const double loss = cross_entropy_with_grad(logits, targets, NULL, &grad_logits);
    language_model_backward(model, &cache, grad_logits);
    TENSOR_FREE(grad_logits, logits);
    language_cache_free(&cache);
    free(inputs);
    return loss;
}

Adam *language_adamw_new(const LanguageModel *model, const LanguageTraining *t)
{
    Adam *adam = adam_new(model->params, model->num_params, (float)t->lr);
    adam->beta2 = 0.99f;
    adam->weight_decay = (float)t->weight_decay;
    return adam;
}

void text_batch_draw(const int *ids, size_t n, int batch_size, int context, Rng *rng,
                     int *tokens)
{
    if (n <= (size_t)context)
        die("a text of %zu tokens has no window of %d + 1", n, context);
    for (int b = 0; b < batch_size; b++) {
        const size_t start = (size_t)rng_below(rng, (uint32_t)(n - (size_t)context));
        memcpy(tokens + (size_t)b * (context + 1), ids + start,
               (size_t)(context + 1) * sizeof *ids);
    }
}

/* share s of the step: model's parameters and kernels (read now, for a
 * program may hand the model other kernels between steps), the share's
 * kernels on one thread, its own gradients made by the first step */
static LanguageModel *share_of(LanguageModel *model, int s)
{
    LanguageModel *share = model->shares[s];
    if (share == NULL) {
        share = model->shares[s] = checked_malloc(1, sizeof *share);
        *share = *model;
        for (int i = 0; i < LM_SHARES; i++)
            share->shares[i] = NULL;
        share->step_memory = NULL;
        share->step_memory_free = NULL;
        share->prepared = NULL;
        grads_new(share);
    }
    share->wte = model->wte;
    share->wpe = model->wpe;
    memcpy(share->blocks, model->blocks, sizeof model->blocks);
    share->lnf_weight = model->lnf_weight;
    share->lnf_bias = model->lnf_bias;
    share->kernels = model->kernels;
    share->kernels.num_threads = 1;
    return share;
}

typedef struct {
    LanguageModel *model;
    const int *tokens;                /* (B, C + 1) */
    int batch_size, threads;          /* B, the threads the shares run on */
    double losses[LM_SHARES];
} StepShares;

/* thread t runs shares t, t + threads, ...: the forward and backward of
 * its windows, into the share's gradients */
static void step_shares(void *arg, int t)
{
    StepShares *st = arg;
    const int C = st->model->context;
    for (int s = t; s < LM_SHARES; s += st->threads) {
        int first;
        const int count = share_windows(st->batch_size, s, &first);
        LanguageModel *share = st->model->shares[s];
        const int *windows = st->tokens + (size_t)first * (C + 1);
        // in one pass over the share's own memory when the kernels offer it
        // and the model is whole, else the pieces one by one: the same bits
        const bool whole = !share->parts.bigram && block_parts_whole(share->parts.block);
        st->losses[s] = count == 0 ? 0.0
                        : share->kernels.share_step != NULL && whole
                            ? share->kernels.share_step(share, windows, count)
                            : language_model_loss_grad(share, windows, count, C);
    }
}

typedef struct {
    LanguageModel *model;
    float weights[LM_SHARES];         /* B_s / B */
    int threads;
} SumShares;

/* thread t's part of every gradient: the shares' gradients weighted and
 * summed, share 0 first, each number the same whichever thread sums it */
static void sum_shares(void *arg, int t)
{
    const SumShares *sum = arg;
    const LanguageModel *m = sum->model;
    for (int i = 0; i < m->num_params; i++) {
        const size_t n = m->params[i].grad->size;
        const size_t start = n * (size_t)t / (size_t)sum->threads;
        const size_t end = n * (size_t)(t + 1) / (size_t)sum->threads;
        float *grad = m->params[i].grad->data;
        for (size_t j = start; j < end; j++)
            grad[j] = 0.0f;
        for (int s = 0; s < LM_SHARES; s++) {
            const float w = sum->weights[s];
            const float *g = m->shares[s]->params[i].grad->data;
            if (w != 0.0f)
                for (size_t j = start; j < end; j++)
                    grad[j] += w * g[j];
        }
    }
}

/* tokens (B, C + 1) -> each share's gradients, and weights[s] = B_s / B
 * to sum them with; returns the loss */
static double shares_loss_grad(LanguageModel *model, const int *tokens, int batch_size,
                               float *weights)
{
    StepShares st = {model, tokens, batch_size, share_threads(model), {0}};
    for (int s = 0; s < LM_SHARES; s++)
        share_of(model, s);
    // the shares' common work once, for this step only (kernels.prepare)
    const bool whole = !model->parts.bigram && block_parts_whole(model->parts.block);
    const void *prepared = model->kernels.prepare != NULL && model->kernels.share_step != NULL &&
                                   whole
                               ? model->kernels.prepare(model, st.threads)
                               : NULL;
    for (int s = 0; s < LM_SHARES; s++)
        model->shares[s]->prepared = prepared;
    model->kernels.parallel(st.threads, step_shares, &st);
    for (int s = 0; s < LM_SHARES; s++)
        model->shares[s]->prepared = NULL;
    for (int s = 0; s < LM_SHARES; s++) {
        int first;
        weights[s] = (float)share_windows(batch_size, s, &first) / (float)batch_size;
    }
    return shares_mean(st.losses, batch_size);
}

typedef struct {
    const Adam *adam;
    int threads;
} AdamParts;

static void adam_part(void *arg, int t)
{
    const AdamParts *parts = arg;
    adam_update_part(parts->adam, t, parts->threads);
}

double language_model_train_step(LanguageModel *model, Adam *adam, const int *tokens,
                                 int batch_size, double max_norm)
{
    SumShares sum = {.model = model, .threads = share_threads(model)};
    const double loss = shares_loss_grad(model, tokens, batch_size, sum.weights);
    adam->step++;
    const bool whole = !model->parts.bigram && block_parts_whole(model->parts.block);
    if (model->kernels.update != NULL && model->kernels.share_step != NULL && whole) {
        // the three steps below in fewer passes over memory, the same bits
        model->kernels.update(model, adam, sum.weights, max_norm, sum.threads);
        return loss;
    }
    model->kernels.parallel(sum.threads, sum_shares, &sum);
    parameters_clip_grad_norm(model->params, model->num_params, max_norm);
    // adam_step, each thread on its part of every parameter
    AdamParts parts = {adam, sum.threads};
    model->kernels.parallel(parts.threads, adam_part, &parts);
    return loss;
}

double language_model_sampled_loss(const LanguageModel *model, const int *ids, size_t n,
                                   int batch_size, int batches, Rng *rng)
{
    const int C = model->context;
    int *tokens = checked_malloc((size_t)batch_size * (C + 1), sizeof *tokens);
    double sum = 0.0;
    for (int i = 0; i < batches; i++) {
        text_batch_draw(ids, n, batch_size, C, rng, tokens);
        sum += language_model_loss(model, tokens, batch_size, C);
    }
    free(tokens);
    return sum / batches;
}

double language_model_text_loss(const LanguageModel *model, const int *ids, size_t n,
                                int batch_size)
{
    const int C = model->context;
    int *tokens = checked_calloc((size_t)batch_size * (C + 1), sizeof *tokens);
    double sum = 0.0;
    size_t start = 0, counted = 0;
    while (start + 1 < n) {
        // a batch of whole windows of C + 1 ids (or the one shorter last window),
        // each starting where the one before it ended
        const size_t left = n - 1 - start;   /* predictions still to make */
        const int T = left < (size_t)C ? (int)left : C;
        int B = 0;
        do {
            memcpy(tokens + (size_t)B * (T + 1), ids + start, (size_t)(T + 1) * sizeof *ids);
            start += (size_t)T;
            B++;
        } while (B < batch_size && T == C && n - 1 - start >= (size_t)C);
        sum += language_model_loss(model, tokens, B, T) * (double)B * T;
        counted += (size_t)B * T;
    }
    free(tokens);
    return sum / (double)counted;
}

/* ---- silencing a head ------------------------------------------------------------ */

void language_model_ablate_head(LanguageModel *model, int layer, int head, float *saved)
{
    const MultiHeadAttention *a = model->blocks[layer].attn;
    const int D = model->num_hiddens, d = D / model->num_heads;
    float *rows = a->W_v->data + (size_t)head * d * D, *bias = a->b_v->data + (size_t)head * d;
    memcpy(saved, rows, (size_t)d * D * sizeof *rows);
    memcpy(saved + (size_t)d * D, bias, (size_t)d * sizeof *bias);
    memset(rows, 0, (size_t)d * D * sizeof *rows);
    memset(bias, 0, (size_t)d * sizeof *bias);
}

void language_model_restore_head(LanguageModel *model, int layer, int head, const float *saved)
{
    const MultiHeadAttention *a = model->blocks[layer].attn;
    const int D = model->num_hiddens, d = D / model->num_heads;
    memcpy(a->W_v->data + (size_t)head * d * D, saved, (size_t)d * D * sizeof *saved);
    memcpy(a->b_v->data + (size_t)head * d, saved + (size_t)d * D, (size_t)d * sizeof *saved);
}

/* ---- decoding -------------------------------------------------------------------- */

LanguageDecoder *language_decoder_new(const LanguageModel *model)
{
    const LanguageParts p = model->parts;
    if (p.bigram || p.block.no_layer_norm || p.block.no_residual || p.block.no_mlp)
        die("a rung of the build-up has no decoder: only the whole model samples");
    LanguageDecoder *dec = checked_calloc(1, sizeof *dec);
    dec->model = model;
    dec->logits = checked_calloc((size_t)model->vocab, sizeof *dec->logits);
    language_decoder_reset(dec);
    return dec;
}

void language_decoder_free(LanguageDecoder *decoder)
{
    if (decoder == NULL)
        return;
    for (int l = 0; l < LM_MAX_LAYERS; l++)
        kv_cache_free(decoder->caches[l]);
    free(decoder->logits);
    free(decoder);
}

void language_decoder_reset(LanguageDecoder *decoder)
{
    const LanguageModel *m = decoder->model;
    const int d = m->num_hiddens / m->num_heads;
    for (int l = 0; l < m->num_layers; l++) {
        kv_cache_free(decoder->caches[l]);
        decoder->caches[l] = kv_cache_new(1, m->num_heads, m->context, d);
    }
    decoder->length = 0;
}

/* x (1, D) -> ln(x) (1, D) (new), as layer_norm_tensor computes it for a row */
static Tensor *norm_row(const Tensor *x, const Tensor *weight, const Tensor *bias)
{
    Tensor *mean, *rstd;
    Tensor *y = layer_norm_tensor(x, weight, bias, &mean, &rstd);
    TENSOR_FREE(mean, rstd);
    return y;
}

/* block l on the newest token: x (1, D) updated in place; the same steps
 * as block_forward, the attention through the cache */
static void block_step(const LanguageModel *m, int l, KVCache *cache, Tensor *x)
{
    const Block *b = &m->blocks[l];
    // step 1: attention of the new token over the cached ones and itself
    Tensor *h1 = norm_row(x, b->ln1_weight, b->ln1_bias);
    Tensor *attended = decode_step(b->attn, cache, h1);
    residual_add(x, attended);
    // step 2: the MLP
    Tensor *h2 = norm_row(x, b->ln2_weight, b->ln2_bias);
    Tensor *f = linear(h2, b->fc_weight, b->fc_bias);
    gelu_forward(f->data, f->data, f->size);
    Tensor *out = linear(f, b->proj_weight, b->proj_bias);
    for (size_t i = 0; i < x->size; i++)
        out->data[i] += x->data[i];   /* the same sum, in the same order, as block_forward's */
    memcpy(x->data, out->data, x->size * sizeof(float));
    TENSOR_FREE(h1, attended, h2, f, out);
}

const float *language_decoder_step(LanguageDecoder *decoder, int token)
{
    const LanguageModel *m = decoder->model;
    const int D = m->num_hiddens, t = decoder->length;
    if (token < 0 || token >= m->vocab)
        die("token %d outside the vocabulary [0, %d)", token, m->vocab);
    if (t >= m->context)
        die("the window is full (%d tokens): reset it first", t);
    Tensor *x = tensor_empty(SHAPE(1, D));
    for (int j = 0; j < D; j++)
        x->data[j] = AT2(m->wte, token, j) + AT2(m->wpe, t, j);
    for (int l = 0; l < m->num_layers; l++)
        block_step(m, l, decoder->caches[l], x);
    Tensor *hf = norm_row(x, m->lnf_weight, m->lnf_bias);
    Tensor *logits = linear(hf, m->wte, NULL);
    memcpy(decoder->logits, logits->data, (size_t)m->vocab * sizeof(float));
    TENSOR_FREE(x, hf, logits);
    decoder->length = t + 1;
    return decoder->logits;
}

/* tokens[0 .. n) fed to a reset decoder; the logits after the last */
static const float *prefill(LanguageDecoder *dec, const int *tokens, int n)
{
    language_decoder_reset(dec);
    const float *logits = NULL;
    for (int i = 0; i < n; i++)
        logits = language_decoder_step(dec, tokens[i]);
    return logits;
}

void language_model_sample(const LanguageModel *model, const int *prompt, int prompt_length,
                           int *out, int n, float temperature, Rng *rng)
{
    const int C = model->context, keep = C / 2 > 0 ? C / 2 : 1;
    if (prompt_length < 1)
        die("the prompt needs at least one token, got %d",
            prompt_length);
    // the whole text so far: the prompt, then what is drawn
    int *text = checked_calloc((size_t)prompt_length + n, sizeof *text);
    memcpy(text, prompt, (size_t)prompt_length * sizeof *prompt);
    int length = prompt_length;
    LanguageDecoder *dec = language_decoder_new(model);
    const int first = prompt_length > C ? prompt_length - keep : 0;
    const float *logits = prefill(dec, text + first, length - first);
    for (int i = 0; i < n; i++) {
        const int token = sample_token(logits, model->vocab, temperature, rng);
        out[i] = token;
        text[length++] = token;
        if (i + 1 == n)
            break;
        if (dec->length == C)   /* full: start again from the last C / 2 */
            logits = prefill(dec, text + length - keep, keep);
        else
            logits = language_decoder_step(dec, token);
    }
    language_decoder_free(dec);
    free(text);
}
