/*
 * induction_model.c - an attention-only transformer that predicts the next
 * token (introduced in chapter 06's page "Induction heads"). See
 * induction_model.h.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads of a
 * layer, D = num_hiddens, d = D / H, V = vocabulary, N = num_layers.
 */
#include "learn/induction_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/embedding.h"
#include "learn/linear_layer.h"
#include "learn/loss.h"
#include "ops.h"

/* The model's parameters, listed once (learn/parameter_table.h): PyTorch's
 * names, each layer an nn.MultiheadAttention under "layers.l.". */
static void list_parameters(InductionModel *m)
{
    ParameterTable t = parameter_table(m->params, INDUCTION_MAX_PARAMS, m->files,
                                       INDUCTION_MAX_FILES);
    parameter_table_add(&t, "embed_tokens.weight", m->embed_tokens, m->grad_embed_tokens);
    parameter_table_add(&t, "embed_positions.weight", m->embed_positions,
                        m->grad_embed_positions);
    for (int l = 0; l < m->num_layers; l++) {
        char prefix[24];   /* "layers.%d." for any int */
        snprintf(prefix, sizeof prefix, "layers.%d.", l);
        parameter_table_layer(&t, prefix, m->layer_names[l], ATTENTION_STACKED, m->layers[l],
                              m->grad_layers[l]);
    }
    parameter_table_add(&t, "unembed.weight", m->unembed, m->grad_unembed);
    parameter_table_ints(&t, "num_heads", m->num_heads, m->num_layers);
    parameter_table_ints(&t, "num_layers", &m->saved_layers, 1);
    m->num_params = t.num_params;
    m->num_files = t.num_files;
}

/* weight (D, D) <- uniform in [-bound, bound), the bound of
 * nn.init.xavier_uniform_ on the stacked (3D, D) in_proj_weight. */
static void xavier_in_proj(Tensor *weight, int D, Rng *rng)
{
    const float bound = sqrtf(6.0f / (float)(4 * D));
    for (size_t i = 0; i < weight->size; i++)
        weight->data[i] = -bound + 2.0f * bound * rng_uniform(rng);
}

InductionModel *induction_new(int vocab, int length, int num_hiddens, const int *num_heads,
                              int num_layers, Rng *rng)
{
    if (vocab < 1 || length < 1)
        die("the vocabulary and the length must be positive, got %d and %d", vocab,
            length);
    if (num_layers < 1 || num_layers > INDUCTION_MAX_LAYERS)
        die("num_layers must be in [1, %d], got %d", INDUCTION_MAX_LAYERS, num_layers);
    InductionModel *m = checked_calloc(1, sizeof *m);
    const int D = num_hiddens;
    *m = (InductionModel){.vocab = vocab, .length = length, .num_hiddens = D,
                          .num_layers = num_layers, .saved_layers = num_layers};
    memcpy(m->num_heads, num_heads, (size_t)num_layers * sizeof *num_heads);
    // drawn in a fixed order, so a seed names one model
    m->embed_tokens = embedding_new(vocab, D, rng);
    m->embed_positions = embedding_new(length, D, rng);
    for (int l = 0; l < num_layers; l++) {
        /* multihead_new checks the sizes and draws W_o as nn.Linear does;
         * the in-projection is redrawn as nn.MultiheadAttention draws it */
        m->layers[l] = multihead_new(D, D, D, D, num_heads[l], 0.0f, false, rng);
        xavier_in_proj(m->layers[l]->W_q, D, rng);
        xavier_in_proj(m->layers[l]->W_k, D, rng);
        xavier_in_proj(m->layers[l]->W_v, D, rng);
        m->grad_layers[l] = multihead_grads_new(m->layers[l]);
    }
    m->attend = CLEAR_ATTENTION;
    Tensor *no_bias = NULL, *no_grad_bias = NULL;
    linear_layer_new(vocab, D, rng, &m->unembed, &no_bias, &m->grad_unembed, &no_grad_bias);
    TENSOR_FREE(no_bias, no_grad_bias);   /* drawn after the weight: nothing else moves */

    m->grad_embed_tokens = tensor_zeros(SHAPE(vocab, D));
    m->grad_embed_positions = tensor_zeros(SHAPE(length, D));
    list_parameters(m);
    return m;
}

void induction_free(InductionModel *model)
{
    if (model == NULL)
        return;
    for (int l = 0; l < model->num_layers; l++) {
        multihead_free(model->layers[l]);
        multihead_grads_free(model->grad_layers[l]);
    }
    TENSOR_FREE(model->embed_tokens, model->embed_positions, model->unembed,
                model->grad_embed_tokens, model->grad_embed_positions, model->grad_unembed);
    free(model);
}

/* tokens (B, T) -> logits (B, T, V) */
Tensor *induction_forward(const InductionModel *model, const int *tokens, int batch_size,
                          Tensor **weights, InductionCache *cache)
{
    const int B = batch_size, T = model->length, D = model->num_hiddens;

    // step 1: each token's vector plus its position's: the stream x_0 (B, T, D)
    Tensor *x = embedding_forward(model->embed_tokens, tokens, SHAPE(B, T));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT3(x, b, t, j) += AT2(model->embed_positions, t, j);

    // step 2: each layer reads the stream and adds its output to it
    ValidLens *causal = valid_lens_causal(B, T);   /* query t sees keys 0 .. t */
    if (cache != NULL) {
        *cache = (InductionCache){.tokens = tokens, .batch_size = B, .causal = causal};
        cache->stream[0] = x;
    }
    for (int l = 0; l < model->num_layers; l++) {
        Tensor *attended = attention_layer_forward_masked(
            &model->attend, model->layers[l], x, x, x, causal,
            cache != NULL ? &cache->layers[l] : NULL,
            weights != NULL ? &weights[l] : NULL);   /* (B, T, D) */
        Tensor *next = tensor_copy(x);
        for (size_t i = 0; i < next->size; i++)
            next->data[i] += attended->data[i];   /* the residual: x_{l+1} = x_l + out */
        for (size_t i = 0; model->layer_offsets[l] != NULL && i < next->size; i++)
            next->data[i] += model->layer_offsets[l][i % ((size_t)T * D)];   /* [t, j] */
        tensor_free(attended);
        if (cache != NULL)
            cache->stream[l + 1] = next;
        else
            tensor_free(x);
        x = next;
    }

    // step 3: the unembedding scores every token of the vocabulary
    Tensor *logits = attention_layer_linear(&model->attend, x, model->unembed, NULL);
    if (cache == NULL) {
        tensor_free(x);
        valid_lens_free(causal);
    }
    return logits;
}

/* grad_logits (B, T, V) -> parameter gradients (+=) */
void induction_backward(InductionModel *model, const InductionCache *cache,
                        const Tensor *grad_logits)
{
    const int B = cache->batch_size, T = model->length, D = model->num_hiddens;
    const int N = model->num_layers;
    tensor_check_shape("grad_logits", grad_logits,
                       SHAPE(B, T, model->vocab));

    // step 3 backwards: the unembedding; grad is the gradient of x_N
    Tensor *grad = attention_layer_linear_backward(&model->attend, cache->stream[N],
                                                   model->unembed, grad_logits,
                                                   model->grad_unembed, NULL);

    // step 2 backwards, layer by layer from the last: x_{l+1} = x_l + out_l(x_l),
    // so x_l's gradient is x_{l+1}'s (the residual path) plus what flows back
    // through the layer, whose queries, keys and values were all x_l
    for (int l = N - 1; l >= 0; l--) {
        Tensor *grad_q = NULL, *grad_k = NULL, *grad_v = NULL;
        attention_layer_backward(&model->attend, model->layers[l], &cache->layers[l], grad,
                                 model->grad_layers[l], &grad_q, &grad_k, &grad_v, NULL);
        for (size_t i = 0; i < grad->size; i++)
            grad->data[i] += grad_q->data[i] + grad_k->data[i] + grad_v->data[i];
        TENSOR_FREE(grad_q, grad_k, grad_v);
    }

    // step 1 backwards: x_0 = token row + position row, each gets x_0's gradient
    embedding_backward(model->grad_embed_tokens, cache->tokens, grad);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT2(model->grad_embed_positions, t, j) += AT3(grad, b, t, j);
    tensor_free(grad);
}

void induction_cache_free(InductionCache *cache)
{
    for (int l = 0; l <= INDUCTION_MAX_LAYERS; l++)
        tensor_free(cache->stream[l]);
    for (int l = 0; l < INDUCTION_MAX_LAYERS; l++)
        layer_cache_free(&cache->layers[l]);
    valid_lens_free(cache->causal);
    *cache = (InductionCache){0};
}

/* tokens (B, T + 1) -> inputs (B, T) and targets (B, T), new arrays */
static void split_tokens(const int *tokens, int B, int T, int **inputs, int **targets)
{
    *inputs = checked_calloc((size_t)B * T, sizeof **inputs);
    *targets = checked_calloc((size_t)B * T, sizeof **targets);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            (*inputs)[b * T + t] = tokens[b * (T + 1) + t];
            (*targets)[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
}

/* logits (B*T, V), targets (B*T) -> each row's -log softmax at its target */
static void row_losses(const Tensor *logits, const int *targets, float *losses)
{
    const int V = logits->shape[logits->ndim - 1];
    const size_t rows = logits->size / (size_t)V;
    for (size_t i = 0; i < rows; i++) {
        const float *row = logits->data + i * V;
        losses[i] = (float)(logsumexp_row(row, V) - row[targets[i]]);
    }
}

double induction_train_step(InductionModel *model, Adam *adam, const int *tokens,
                            int batch_size, float *losses)
{
    int *inputs, *targets;
    split_tokens(tokens, batch_size, model->length, &inputs, &targets);
    parameters_zero_grad(model->params, model->num_params);
    InductionCache cache;
    Tensor *logits = induction_forward(model, inputs, batch_size, NULL, &cache);
    const double loss = cross_entropy(logits, targets);   /* the mean over B*T */
    if (losses != NULL)
        row_losses(logits, targets, losses);
    Tensor *grad_logits = cross_entropy_backward(logits, targets, 1.0f);
    induction_backward(model, &cache, grad_logits);
    adam_step(adam);
    TENSOR_FREE(grad_logits, logits);
    induction_cache_free(&cache);
    free(inputs);
    free(targets);
    return loss;
}

double induction_losses(const InductionModel *model, const int *tokens, int batch_size,
                        float *losses)
{
    int *inputs, *targets;
    split_tokens(tokens, batch_size, model->length, &inputs, &targets);
    Tensor *logits = induction_forward(model, inputs, batch_size, NULL, NULL);
    row_losses(logits, targets, losses);
    const size_t n = (size_t)batch_size * model->length;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += losses[i];
    tensor_free(logits);
    free(inputs);
    free(targets);
    return sum / (double)n;
}

void induction_ablate_head(InductionModel *model, int layer, int head, float *saved)
{
    const int D = model->num_hiddens, d = D / model->num_heads[layer];
    float *rows = model->layers[layer]->W_v->data + (size_t)head * d * D;   /* (d, D) */
    memcpy(saved, rows, (size_t)d * D * sizeof *rows);
    memset(rows, 0, (size_t)d * D * sizeof *rows);
}

void induction_restore_head(InductionModel *model, int layer, int head, const float *saved)
{
    const int D = model->num_hiddens, d = D / model->num_heads[layer];
    memcpy(model->layers[layer]->W_v->data + (size_t)head * d * D, saved,
           (size_t)d * D * sizeof *saved);
}

void repeats_draw(int *tokens, int *periods, int batch_size, int length, int vocab,
                  int min_period, int max_period, Rng *rng)
{
    if (min_period < 1 || max_period < min_period || max_period > length)
        die("periods must satisfy 1 <= %d <= %d <= length %d", min_period,
            max_period, length);
    if (max_period > vocab)
        die("a period of %d different tokens needs a vocabulary of at least "
            "%d, got %d", max_period, max_period, vocab);
    int *order = checked_calloc((size_t)vocab, sizeof *order);
    for (int b = 0; b < batch_size; b++) {
        int *row = tokens + (size_t)b * (length + 1);   /* T + 1 tokens */
        const int P = min_period + (int)rng_below(rng, (uint32_t)(max_period - min_period + 1));
        periods[b] = P;
        rng_permutation(rng, order, vocab);   /* the period: P different tokens */
        for (int t = 0; t <= length; t++)
            row[t] = t < P ? order[t] : row[t - P];
    }
    free(order);
}
