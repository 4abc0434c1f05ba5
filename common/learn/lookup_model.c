/*
 * lookup_model.c - the model that learns to look words up (introduced in
 * chapter 05's optional section "Attention that learns"). See
 * lookup_model.h.
 *
 * Legend: B = batch_size, P = entries, Q = query words, H = num_heads,
 * D = num_hiddens, Vk, Vv = key and value vocabularies.
 */
#include "learn/lookup_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/embedding.h"
#include "learn/linear_layer.h"
#include "learn/loss.h"
#include "learn/parameter_table.h"
#include "ops.h"

/* ---- creation ---------------------------------------------------------------- */

/* nn.MultiheadAttention's own initialisation, which differs from the
 * nn.Linear default that multihead_new uses: in_proj_weight, the (3D, D)
 * stack of W_q, W_k, W_v, is Xavier-uniform with bound
 * sqrt(6 / (fan_in + fan_out)) = sqrt(6 / (D + 3D)), and both biases start
 * at 0. out_proj.weight keeps nn.Linear's bound 1/sqrt(D). With G < H
 * key-value heads the stack has D + 2*G*d rows, and fan_out says so. */
static void init_like_pytorch(MultiHeadAttention *layer, Rng *rng)
{
    const int D = layer->num_hiddens;
    const int stack_rows = D + 2 * layer->W_k->shape[0];   /* 3D when G = H */
    const float bound = sqrtf(6.0f / (float)(D + stack_rows));
    Tensor *projections[3] = {layer->W_q, layer->W_k, layer->W_v};
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < projections[i]->size; j++)
            projections[i]->data[j] = (2.0f * rng_uniform(rng) - 1.0f) * bound;
    Tensor *biases[4] = {layer->b_q, layer->b_k, layer->b_v, layer->b_o};
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < biases[i]->size; j++)
            biases[i]->data[j] = 0.0f;
}

/* The model's parameters, listed once (learn/parameter_table.h): the
 * optimiser's list and the saved files' list, both pointing at the
 * model's own tensors. */
static void list_parameters(LookupModel *m)
{
    ParameterTable t = parameter_table(m->params, LOOKUP_NUM_PARAMS, m->files, LOOKUP_NUM_FILES);
    parameter_table_add(&t, "embed_keys.weight", m->embed_keys, m->grad_embed_keys);
    parameter_table_add(&t, "embed_values.weight", m->embed_values, m->grad_embed_values);
    parameter_table_attention(&t, ATTENTION_STACKED, m->attention, m->grad_attention);
    parameter_table_add(&t, "readout.weight", m->readout_weight, m->grad_readout_weight);
    parameter_table_add(&t, "readout.bias", m->readout_bias, m->grad_readout_bias);
    parameter_table_ints(&t, "num_heads", &m->saved_num_heads, 1);
    m->num_params = t.num_params;
}

LookupModel *lookup_new(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                        Rng *rng)
{
    return lookup_new_grouped(key_vocab, value_vocab, num_hiddens, num_heads, num_heads, rng);
}

LookupModel *lookup_new_grouped(int key_vocab, int value_vocab, int num_hiddens,
                                int num_heads, int num_kv_heads, Rng *rng)
{
    if (key_vocab < 1 || value_vocab < 1)
        die("vocabularies must be positive: key_vocab %d, value_vocab %d", key_vocab,
            value_vocab);
    LookupModel *m = checked_calloc(1, sizeof *m);
    *m = (LookupModel){.key_vocab = key_vocab, .value_vocab = value_vocab,
                       .num_hiddens = num_hiddens, .num_heads = num_heads,
                       .num_kv_heads = num_kv_heads, .saved_num_heads = num_heads};
    const int D = num_hiddens;
    /* drawn in the order of the module's parameters */
    m->embed_keys = embedding_new(key_vocab, D, rng);
    m->embed_values = embedding_new(value_vocab, D, rng);
    m->attention = multihead_new_grouped(D, D, D, D, num_heads, num_kv_heads, 0.0f, true, rng);
    init_like_pytorch(m->attention, rng);
    m->attend = CLEAR_ATTENTION;
    linear_layer_new(value_vocab, D, rng, &m->readout_weight, &m->readout_bias,
                     &m->grad_readout_weight, &m->grad_readout_bias);

    m->grad_embed_keys = tensor_zeros(SHAPE(key_vocab, D));
    m->grad_embed_values = tensor_zeros(SHAPE(value_vocab, D));
    m->grad_attention = multihead_grads_new(m->attention);
    list_parameters(m);
    return m;
}

void lookup_free(LookupModel *m)
{
    if (m == NULL)
        return;
    TENSOR_FREE(m->embed_keys, m->embed_values, m->readout_weight, m->readout_bias,
                m->grad_embed_keys, m->grad_embed_values, m->grad_readout_weight,
                m->grad_readout_bias);
    multihead_free(m->attention);
    multihead_grads_free(m->grad_attention);
    free(m);
}

/* ---- forward and backward --------------------------------------------------------- */

static void check_batch(const TaskBatch *batch)
{
    if (batch->num_answers != batch->num_queries)
        die("each query word gives one answer: the batch has %d query and %d answer "
            "words", batch->num_queries, batch->num_answers);
}

/* batch -> logits (B, Q, Vv) */
Tensor *lookup_forward(const LookupModel *m, const TaskBatch *batch,
                       Tensor **attention_weights, LookupCache *cache)
{
    check_batch(batch);
    const int B = batch->batch_size, P = batch->num_pairs, Q = batch->num_queries;
    // step 1: every word's vector; the query words and the keys share one table
    LookupCache c = {.batch = batch};
    c.q = embedding_forward(m->embed_keys, batch->queries, SHAPE(B, Q));   /* (B, Q, D) */
    c.k = embedding_forward(m->embed_keys, batch->keys, SHAPE(B, P));      /* (B, P, D) */
    c.v = embedding_forward(m->embed_values, batch->values, SHAPE(B, P));  /* (B, P, D) */
    // step 2: the attention layer, as it is
    c.out = attention_layer_forward(&m->attend, m->attention, c.q, c.k, c.v, &c.attention,
                                    attention_weights);               /* (B, Q, D) */
    // step 3: a score for every value word
    Tensor *logits = attention_layer_linear(&m->attend, c.out, m->readout_weight,
                                            m->readout_bias);   /* (B, Q, Vv) */
    if (cache)
        *cache = c;
    else
        lookup_cache_free(&c);
    return logits;
}

/* grad_logits (B, Q, Vv) -> gradients added into the model's grad tensors */
void lookup_backward(LookupModel *m, const LookupCache *cache, const Tensor *grad_logits,
                     Tensor **grad_concat)
{
    const TaskBatch *batch = cache->batch;
    // step 3 backwards: the readout
    Tensor *grad_out = attention_layer_linear_backward(&m->attend, cache->out,
                                                       m->readout_weight, grad_logits,
                                                       m->grad_readout_weight,
                                                       m->grad_readout_bias);
    // step 2 backwards: the layer's own backward
    Tensor *grad_q, *grad_k, *grad_v;
    attention_layer_backward(&m->attend, m->attention, &cache->attention, grad_out,
                             m->grad_attention, &grad_q, &grad_k, &grad_v, grad_concat);
    // step 1 backwards: each row's gradient into its word's row; a country
    // used as query and as key gets both
    embedding_backward(m->grad_embed_keys, batch->queries, grad_q);
    embedding_backward(m->grad_embed_keys, batch->keys, grad_k);
    embedding_backward(m->grad_embed_values, batch->values, grad_v);
    TENSOR_FREE(grad_out, grad_q, grad_k, grad_v);
}

void lookup_cache_free(LookupCache *cache)
{
    layer_cache_free(&cache->attention);
    TENSOR_FREE(cache->q, cache->k, cache->v, cache->out);
    *cache = (LookupCache){0};
}

double lookup_train_step(LookupModel *m, Adam *adam, const TaskBatch *batch, int *correct)
{
    parameters_zero_grad(m->params, m->num_params);
    LookupCache cache;
    Tensor *logits = lookup_forward(m, batch, NULL, &cache);
    Tensor *grad_logits;
    const double loss = cross_entropy_with_grad(logits, batch->answers, correct, &grad_logits);
    lookup_backward(m, &cache, grad_logits, NULL);
    adam_step(adam);
    tensor_free(grad_logits);
    tensor_free(logits);
    lookup_cache_free(&cache);
    return loss;
}

double lookup_evaluate(const LookupModel *m, const TaskBatch *batch, int *correct)
{
    Tensor *logits = lookup_forward(m, batch, NULL, NULL);
    const double loss = cross_entropy(logits, batch->answers);
    if (correct)
        *correct = count_correct(logits, batch->answers);
    tensor_free(logits);
    return loss;
}

static double train_step_of(void *model, Adam *adam, const void *batch, int *correct)
{
    return lookup_train_step(model, adam, batch, correct);
}

static double evaluate_of(const void *model, const void *batch, int *correct)
{
    return lookup_evaluate(model, batch, correct);
}

Trainee lookup_trainee(LookupModel *model, Adam *adam)
{
    return (Trainee){model, adam, train_step_of, evaluate_of};
}

double lookup_bytes_needed(int vocab, int num_pairs, int num_hiddens, int num_heads, int batch,
                           int examples)
{
    const double P = num_pairs, D = num_hiddens, H = num_heads;
    /* one example's query word: its vectors (q, its projection and split,
     * the heads' output merged, the output), its H x P weights (beside
     * their copy, or their gradient and the scores'), its Vv logits (and
     * their gradient); and its 2P + 2 word ids */
    const double forward = 6.0 * P * D + 8.0 * D + 3.0 * H * P + 2.0 * vocab + 2.0 * P + 2.0;
    const double step = 12.0 * P * D + 16.0 * D + 6.0 * H * P + 4.0 * vocab + 2.0 * P + 2.0;
    const double training = batch * step, heldout = examples * forward;
    /* parameters with their gradients and Adam's two moments */
    const double params = 4.0 * (2.0 * vocab * D + 4.0 * D * D + vocab * D);
    return 4.0 * ((training > heldout ? training : heldout) + params);
}
