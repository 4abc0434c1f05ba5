/*
 * reversal_model.c - self-attention that learns to reverse a sequence
 * (introduced in chapter 06's optional section "Positions, learned"). See
 * reversal_model.h.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, V = vocabulary.
 */
#include "learn/reversal_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/embedding.h"
#include "learn/linear_layer.h"
#include "learn/loss.h"
#include "learn/parameter_table.h"
#include "ops.h"
#include "positional.h"

/* The model's parameters, listed once (learn/parameter_table.h). */
static void list_parameters(ReversalModel *m)
{
    ParameterTable t = parameter_table(m->params, REVERSAL_NUM_PARAMS, m->files,
                                       REVERSAL_NUM_FILES);
    parameter_table_add(&t, "embed_tokens.weight", m->embed_tokens, m->grad_embed_tokens);
    parameter_table_attention(&t, ATTENTION_STACKED, m->attention, m->grad_attention);
    parameter_table_add(&t, "readout.weight", m->readout_weight, m->grad_readout_weight);
    parameter_table_add(&t, "readout.bias", m->readout_bias, m->grad_readout_bias);
    parameter_table_ints(&t, "num_heads", &m->saved_num_heads, 1);
}

/* weight (D, D) <- uniform in [-bound, bound), the bound of
 * nn.init.xavier_uniform_ on the stacked (3D, D) in_proj_weight:
 * sqrt(6 / (fan_in + fan_out)) = sqrt(6 / (D + 3D)). */
static void xavier_in_proj(Tensor *weight, int D, Rng *rng)
{
    const float bound = sqrtf(6.0f / (float)(4 * D));
    for (size_t i = 0; i < weight->size; i++)
        weight->data[i] = -bound + 2.0f * bound * rng_uniform(rng);
}

ReversalModel *reversal_new(int vocab, int num_hiddens, int num_heads, bool positions,
                            Rng *rng)
{
    if (vocab < 1)
        die("the vocabulary must be positive, got %d", vocab);
    ReversalModel *m = checked_calloc(1, sizeof *m);
    const int D = num_hiddens;
    *m = (ReversalModel){.vocab = vocab, .num_hiddens = D, .num_heads = num_heads,
                         .positions = positions, .saved_num_heads = num_heads};
    // drawn in a fixed order, so a seed names one model
    m->embed_tokens = embedding_new(vocab, D, rng);
    /* multihead_new checks the sizes and draws W_o as nn.Linear does; the
     * in-projection is redrawn as nn.MultiheadAttention draws it */
    m->attention = multihead_new(D, D, D, D, num_heads, 0.0f, false, rng);
    m->attend = CLEAR_ATTENTION;
    xavier_in_proj(m->attention->W_q, D, rng);
    xavier_in_proj(m->attention->W_k, D, rng);
    xavier_in_proj(m->attention->W_v, D, rng);
    linear_layer_new(vocab, D, rng, &m->readout_weight, &m->readout_bias,
                     &m->grad_readout_weight, &m->grad_readout_bias);

    m->grad_embed_tokens = tensor_zeros(SHAPE(vocab, D));
    m->grad_attention = multihead_grads_new(m->attention);
    list_parameters(m);
    return m;
}

void reversal_free(ReversalModel *model)
{
    if (model == NULL)
        return;
    TENSOR_FREE(model->embed_tokens, model->readout_weight, model->readout_bias,
                model->grad_embed_tokens, model->grad_readout_weight, model->grad_readout_bias);
    multihead_free(model->attention);
    multihead_grads_free(model->grad_attention);
    free(model);
}

/* batch -> logits (B, T, V) */
Tensor *reversal_forward(const ReversalModel *model, const TaskBatch *batch,
                         Tensor **attention_weights, ReversalCache *cache)
{
    const int B = batch->batch_size, T = batch->num_pairs;

    // step 1: the tokens' vectors, and where they stand (when positions is on)
    Tensor *x = embedding_forward(model->embed_tokens, batch->keys, SHAPE(B, T));
    if (model->positions) {
        /* P is a constant: nothing to learn in it, nothing to backpropagate */
        Tensor *with_positions = add_positional_encoding(x);
        tensor_free(x);
        x = with_positions;
    }

    // step 2: self-attention, every token a query over all T tokens
    Tensor *out = attention_layer_forward(&model->attend, model->attention, x, x, x,
                                          cache != NULL ? &cache->attention : NULL,
                                          attention_weights);   /* (B, T, D) */

    // step 3: the readout scores every token of the vocabulary, at every position
    Tensor *logits = linear(out, model->readout_weight, model->readout_bias);
    if (cache != NULL) {
        cache->batch = batch;
        cache->x = x;
        cache->out = out;
    } else {
        tensor_free(x);
        tensor_free(out);
    }
    return logits;
}

/* grad_logits (B, T, V) -> parameter gradients (+=) */
void reversal_backward(ReversalModel *model, const ReversalCache *cache,
                       const Tensor *grad_logits)
{
    const TaskBatch *batch = cache->batch;
    const int B = batch->batch_size, T = batch->num_pairs;
    tensor_check_shape("grad_logits", grad_logits,
                       SHAPE(B, T, model->vocab));

    // step 3 backwards: the readout
    Tensor *grad_out = linear_backward(cache->out, model->readout_weight, grad_logits,
                                       model->grad_readout_weight, model->grad_readout_bias);

    // step 2 backwards: x was the queries, the keys and the values, so its
    // gradient is the sum of the three
    Tensor *grad_q = NULL, *grad_k = NULL, *grad_v = NULL;
    attention_layer_backward(&model->attend, model->attention, &cache->attention, grad_out,
                             model->grad_attention, &grad_q, &grad_k, &grad_v, NULL);
    for (size_t i = 0; i < grad_q->size; i++)
        grad_q->data[i] += grad_k->data[i] + grad_v->data[i];

    // step 1 backwards: the positional encoding adds a constant, so x's
    // gradient goes to the embedding rows as it is
    embedding_backward(model->grad_embed_tokens, batch->keys, grad_q);
    TENSOR_FREE(grad_out, grad_q, grad_k, grad_v);
}

void reversal_cache_free(ReversalCache *cache)
{
    TENSOR_FREE(cache->x, cache->out);
    layer_cache_free(&cache->attention);
    *cache = (ReversalCache){0};
}

double reversal_train_step(ReversalModel *model, Adam *adam, const TaskBatch *batch)
{
    parameters_zero_grad(model->params, REVERSAL_NUM_PARAMS);
    ReversalCache cache = {0};
    Tensor *logits = reversal_forward(model, batch, NULL, &cache);
    /* (B, T, V) against answers (B, T): B*T rows, the mean over all */
    const double loss = cross_entropy(logits, batch->answers);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    reversal_backward(model, &cache, grad_logits);
    adam_step(adam);
    tensor_free(grad_logits);
    tensor_free(logits);
    reversal_cache_free(&cache);
    return loss;
}

double reversal_evaluate(const ReversalModel *model, const TaskBatch *batch,
                         int *tokens_correct)
{
    Tensor *logits = reversal_forward(model, batch, NULL, NULL);
    const double loss = cross_entropy(logits, batch->answers);
    if (tokens_correct != NULL)
        *tokens_correct = count_correct(logits, batch->answers);
    tensor_free(logits);
    return loss;
}

static double train_step_of(void *model, Adam *adam, const void *batch, int *correct)
{
    (void)correct;   /* the loss alone: the tokens are counted when evaluating */
    return reversal_train_step(model, adam, batch);
}

static double evaluate_of(const void *model, const void *batch, int *correct)
{
    return reversal_evaluate(model, batch, correct);
}

Trainee reversal_trainee(ReversalModel *model, Adam *adam)
{
    return (Trainee){model, adam, train_step_of, evaluate_of};
}

double reversal_bytes_needed(int vocab, int length, int num_hiddens, int num_heads, int batch,
                             int examples)
{
    const double T = length, D = num_hiddens, H = num_heads, V = vocab;
    const double forward = 10.0 * T * D + 2.0 * H * T * T + T * V + 2.0 * T;
    const double training = batch * 2.0 * forward, heldout = examples * forward;
    const double params = 4.0 * (2.0 * V * D + 4.0 * D * D + V);
    return 4.0 * ((training > heldout ? training : heldout) + params);
}
