/*
 * two_key_model.c - the model of chapter 05's heads experiment (introduced
 * in chapter 05's optional section "Why several heads"). See
 * two_key_model.h.
 *
 * Legend: B = batch_size, P = entries of an example, H = num_heads,
 * D = num_hiddens, d = D / H, Vk, Vv = key and value vocabularies.
 */
#include "learn/two_key_model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/embedding.h"
#include "learn/head_gates.h"
#include "learn/linear_layer.h"
#include "learn/loss.h"
#include "learn/parameter_table.h"
#include "learn/seeds.h"
#include "learn/training.h"
#include "ops.h"

/* The model's parameters, listed once (learn/parameter_table.h): the
 * optimiser's list and the files' list, both in PyTorch's names. */
static void list_parameters(TwoKeyModel *m)
{
    ParameterTable t = parameter_table(m->params, TWO_KEY_MAX_PARAMS, m->files,
                                       TWO_KEY_MAX_FILES);
    parameter_table_add(&t, "embed_keys.weight", m->embed_keys, m->grad_embed_keys);
    parameter_table_add(&t, "embed_values.weight", m->embed_values, m->grad_embed_values);
    parameter_table_attention(&t, ATTENTION_LINEARS, m->attention, m->grad_attention);
    parameter_table_add(&t, "readout.weight", m->readout_weight, m->grad_readout_weight);
    parameter_table_add(&t, "readout.bias", m->readout_bias, m->grad_readout_bias);
    if (m->mlp_hiddens > 0) {
        parameter_table_add(&t, "mlp.0.weight", m->mlp_weight1, m->grad_mlp_weight1);
        parameter_table_add(&t, "mlp.0.bias", m->mlp_bias1, m->grad_mlp_bias1);
        parameter_table_add(&t, "mlp.2.weight", m->mlp_weight2, m->grad_mlp_weight2);
        parameter_table_add(&t, "mlp.2.bias", m->mlp_bias2, m->grad_mlp_bias2);
    }
    parameter_table_ints(&t, "num_heads", &m->saved_num_heads, 1);
    m->num_params = t.num_params;
    m->num_files = t.num_files;
}

TwoKeyModel *two_key_new(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                         Rng *rng)
{
    return two_key_new_mlp(key_vocab, value_vocab, num_hiddens, num_heads, 0, rng);
}

TwoKeyModel *two_key_new_mlp(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                             int mlp_hiddens, Rng *rng)
{
    if (key_vocab < 1 || value_vocab < 1 || mlp_hiddens < 0)
        die("vocabularies must be positive and the MLP's size not negative, got %d "
            "keys, %d values and %d", key_vocab, value_vocab, mlp_hiddens);
    TwoKeyModel *m = checked_calloc(1, sizeof *m);
    const int D = num_hiddens;
    *m = (TwoKeyModel){.key_vocab = key_vocab, .value_vocab = value_vocab, .num_hiddens = D,
                       .num_heads = num_heads, .mlp_hiddens = mlp_hiddens,
                       .saved_num_heads = num_heads};
    // drawn in a fixed order, so a seed names one model
    m->embed_keys = embedding_new(key_vocab, D, rng);
    m->embed_values = embedding_new(value_vocab, D, rng);
    /* query size 2D: the two query words side by side; no biases, as in
     * d2l's MultiHeadAttention (multihead_new checks that H divides D) */
    m->attention = multihead_new(2 * D, D, D, D, num_heads, 0.0f, false, rng);
    m->attend = CLEAR_ATTENTION;
    linear_layer_new(2 * value_vocab, D, rng, &m->readout_weight, &m->readout_bias,
                     &m->grad_readout_weight, &m->grad_readout_bias);

    m->grad_embed_keys = tensor_zeros(SHAPE(key_vocab, D));
    m->grad_embed_values = tensor_zeros(SHAPE(value_vocab, D));
    m->grad_attention = multihead_grads_new(m->attention);
    if (mlp_hiddens > 0) {   /* D -> N -> D */
        linear_layer_new(mlp_hiddens, D, rng, &m->mlp_weight1, &m->mlp_bias1,
                         &m->grad_mlp_weight1, &m->grad_mlp_bias1);
        linear_layer_new(D, mlp_hiddens, rng, &m->mlp_weight2, &m->mlp_bias2,
                         &m->grad_mlp_weight2, &m->grad_mlp_bias2);
    }
    list_parameters(m);
    return m;
}

void two_key_free(TwoKeyModel *model)
{
    if (model == NULL)
        return;
    multihead_free(model->attention);
    multihead_grads_free(model->grad_attention);
    TENSOR_FREE(model->embed_keys, model->embed_values, model->readout_weight,
                model->readout_bias, model->grad_embed_keys, model->grad_embed_values,
                model->grad_readout_weight, model->grad_readout_bias);
    TENSOR_FREE(model->mlp_weight1, model->mlp_bias1, model->mlp_weight2, model->mlp_bias2,
                model->grad_mlp_weight1, model->grad_mlp_bias1, model->grad_mlp_weight2,
                model->grad_mlp_bias2);
    free(model);
}

/* tensor = 0, then value at (i, i) for i < rows (rows, cols) of a table */
static void set_diagonal(Tensor *table, int rows, float value)
{
    for (size_t i = 0; i < table->size; i++)
        table->data[i] = 0.0f;
    for (int i = 0; i < rows; i++)
        AT2(table, i, i) = value;
}

void two_key_set_by_hand(TwoKeyModel *model)
{
    const int D = model->num_hiddens, Vk = model->key_vocab, Vv = model->value_vocab;
    if (model->num_heads != 1 || model->mlp_hiddens != 0 || D < Vk || D < Vv)
        die("needs 1 head, no MLP and num_hiddens at least both vocabularies, got %d "
            "heads, an MLP of %d, num_hiddens %d, vocabularies %d and %d", model->num_heads,
            model->mlp_hiddens, D, Vk, Vv);
    MultiHeadAttention *a = model->attention;
    /* Each country is its own axis (one-hot rows): keys never overlap, so
     * the score below is exactly "is this the country named". Each capital
     * too, so the blend of two capitals keeps both, each at its weight. */
    set_diagonal(model->embed_keys, Vk, 1.0f);
    set_diagonal(model->embed_values, Vv, 1.0f);
    /* W_q (D, 2D) = [s I, s I]: the query becomes s (e_first + e_second),
     * the two countries with the SAME weight, since one softmax row cannot
     * favour the first without hurting the second. W_k = I: an entry's key
     * is its country. The score, divided by sqrt(D), is s / sqrt(D) for the
     * two named entries and 0 for the others; s = 40 sqrt(D) makes the
     * others' weight e^-40 of theirs: 1/2 each for the two, 0 elsewhere. */
    const float s = 40.0f * sqrtf((float)D);
    for (size_t i = 0; i < a->W_q->size; i++)
        a->W_q->data[i] = 0.0f;
    for (int i = 0; i < D; i++)
        AT2(a->W_q, i, i) = AT2(a->W_q, i, D + i) = s;
    set_diagonal(a->W_k, D, 1.0f);
    /* W_v = W_o = I: out = (e_a + e_b) / 2 for the two capitals a and b,
     * the blend itself. It holds both capitals but not which country each
     * came from: the two weights are equal. */
    set_diagonal(a->W_v, D, 1.0f);
    set_diagonal(a->W_o, D, 1.0f);
    /* The readout scores capital c by 10 times its share of the blend, for
     * both answers: a and b score 5, every other capital 0. Nothing in the
     * blend says which of a and b is first, so the bias breaks the tie by a
     * fixed order: -0.01 c for the first answer (the earlier capital in the
     * vocabulary wins), +0.01 c for the second (the later one). Both are
     * right exactly when the query names the two countries in that order:
     * half the time. */
    for (int answer = 0; answer < 2; answer++)
        for (int c = 0; c < Vv; c++) {
            float *row = &AT2(model->readout_weight, answer * Vv + c, 0);
            for (int j = 0; j < D; j++)
                row[j] = j == c ? 10.0f : 0.0f;
            model->readout_bias->data[answer * Vv + c] = (answer == 0 ? -0.01f : 0.01f) * c;
        }
}

static void check_batch(const TaskBatch *batch)
{
    if (batch->num_queries != 2 || batch->num_answers != 2)
        die("the model reads two query words and gives two answers, the batch has "
            "%d and %d", batch->num_queries, batch->num_answers);
}

/* out (B, 1, D) -> logits (B, 2, Vv); hidden (B, 1, N) and block_out
 * (B, 1, D), the readout's input, are kept for the backward (hidden NULL
 * and block_out = a copy of out without the MLP). */
static Tensor *readout_forward(const TwoKeyModel *model, const Tensor *out, Tensor **hidden,
                               Tensor **block_out)
{
    const int B = out->shape[0];
    // step 3: the MLP, a residual branch: block_out = out + W2 relu(W1 out + b1) + b2
    if (model->mlp_hiddens > 0) {
        *hidden = linear(out, model->mlp_weight1, model->mlp_bias1);
        relu_inplace(*hidden);
        *block_out = linear(*hidden, model->mlp_weight2, model->mlp_bias2);
        for (size_t i = 0; i < out->size; i++)
            (*block_out)->data[i] += out->data[i];
    } else {
        *hidden = NULL;
        *block_out = tensor_copy(out);
    }
    // step 4: the readout scores every capital, for each of the two answers
    Tensor *logits = linear(*block_out, model->readout_weight, model->readout_bias);
    tensor_reshape(logits, SHAPE(B, 2, model->value_vocab));
    return logits;
}

/* grad_logits (B, 2, Vv) -> grad_out (B, 1, D) (new), the parameters'
 * gradients added into: steps 4 and 3 backwards. */
static Tensor *readout_backward(TwoKeyModel *model, const TwoKeyCache *cache,
                                const Tensor *grad_logits)
{
    const int B = grad_logits->shape[0];
    // step 4 backwards: the readout, on the logits seen as (B, 1, 2 Vv)
    Tensor *grad_flat = tensor_copy(grad_logits);
    tensor_reshape(grad_flat, SHAPE(B, 1, 2 * model->value_vocab));
    Tensor *grad_block = linear_backward(cache->block_out, model->readout_weight, grad_flat,
                                         model->grad_readout_weight, model->grad_readout_bias);
    tensor_free(grad_flat);
    if (model->mlp_hiddens == 0)
        return grad_block;
    // step 3 backwards: the residual passes grad_block on as it is, and the
    // branch adds its own; ReLU lets a gradient through where its unit was on
    Tensor *grad_hidden = linear_backward(cache->hidden, model->mlp_weight2, grad_block,
                                          model->grad_mlp_weight2, model->grad_mlp_bias2);
    for (size_t i = 0; i < grad_hidden->size; i++)
        if (!(cache->hidden->data[i] > 0.0f))
            grad_hidden->data[i] = 0.0f;
    Tensor *grad_branch = linear_backward(cache->out, model->mlp_weight1, grad_hidden,
                                          model->grad_mlp_weight1, model->grad_mlp_bias1);
    for (size_t i = 0; i < grad_block->size; i++)
        grad_block->data[i] += grad_branch->data[i];
    TENSOR_FREE(grad_hidden, grad_branch);
    return grad_block;
}

/* batch -> logits (B, 2, Vv) */
Tensor *two_key_forward(const TwoKeyModel *model, const TaskBatch *batch, const float *gates,
                        Tensor **attention_weights, TwoKeyCache *cache)
{
    check_batch(batch);
    if (cache != NULL && gates != NULL)
        die("the backward runs on the model as it trains: cache needs gates NULL");
    const int B = batch->batch_size, P = batch->num_pairs, D = model->num_hiddens;

    // step 1: embeddings; the two query words side by side are one query vector
    Tensor *q = embedding_forward(model->embed_keys, batch->queries, SHAPE(B, 2));
    tensor_reshape(q, SHAPE(B, 1, 2 * D));   /* (B, 2, D) and (B, 1, 2D): the same numbers */
    Tensor *k = embedding_forward(model->embed_keys, batch->keys, SHAPE(B, P));
    Tensor *v = embedding_forward(model->embed_values, batch->values, SHAPE(B, P));

    // step 2: the attention, each head's output times its gate
    MultiHeadAttention gated = *model->attention;
    if (gates != NULL)
        gated.W_o = head_gated_W_o(model->attention, gates);
    Tensor *out = attention_layer_forward(&model->attend, &gated, q, k, v,
                                          cache != NULL ? &cache->attention : NULL,
                                          attention_weights);   /* (B, 1, D) */
    if (gates != NULL)
        tensor_free(gated.W_o);

    // steps 3 and 4: the MLP if there is one, and the readout
    Tensor *hidden = NULL, *block_out = NULL;
    Tensor *logits = readout_forward(model, out, &hidden, &block_out);
    if (cache != NULL) {
        cache->batch = batch;
        cache->q = q;
        cache->k = k;
        cache->v = v;
        cache->out = out;
        cache->hidden = hidden;
        cache->block_out = block_out;
    } else {
        TENSOR_FREE(q, k, v, out, hidden, block_out);
    }
    return logits;
}

/* grad_logits (B, 2, Vv) -> parameter gradients (+=), grad_concat (B, 1, D) */
void two_key_backward(TwoKeyModel *model, const TwoKeyCache *cache, const Tensor *grad_logits,
                      Tensor **grad_concat)
{
    const TaskBatch *batch = cache->batch;
    const int B = batch->batch_size, D = model->num_hiddens;
    tensor_check_shape("grad_logits", grad_logits, SHAPE(B, 2, model->value_vocab));

    // steps 4 and 3 backwards: the readout and the MLP
    Tensor *grad_out = readout_backward(model, cache, grad_logits);

    // step 2 backwards: the attention (no gates while training)
    Tensor *grad_q = NULL, *grad_k = NULL, *grad_v = NULL;
    attention_layer_backward(&model->attend, model->attention, &cache->attention, grad_out,
                             model->grad_attention, &grad_q, &grad_k, &grad_v, grad_concat);

    // step 1 backwards: each row of a gradient goes back to the word it came from
    tensor_reshape(grad_q, SHAPE(B, 2, D));
    embedding_backward(model->grad_embed_keys, batch->queries, grad_q);
    embedding_backward(model->grad_embed_keys, batch->keys, grad_k);
    embedding_backward(model->grad_embed_values, batch->values, grad_v);
    TENSOR_FREE(grad_out, grad_q, grad_k, grad_v);
}

void two_key_cache_free(TwoKeyCache *cache)
{
    TENSOR_FREE(cache->q, cache->k, cache->v, cache->out, cache->hidden, cache->block_out);
    layer_cache_free(&cache->attention);
    *cache = (TwoKeyCache){0};
}

double two_key_train_step(TwoKeyModel *model, Adam *adam, const TaskBatch *batch)
{
    parameters_zero_grad(model->params, model->num_params);
    TwoKeyCache cache = {0};
    Tensor *logits = two_key_forward(model, batch, NULL, NULL, &cache);
    /* (B, 2, Vv) against answers (B, 2): 2B rows, the mean over all */
    Tensor *grad_logits;
    const double loss = cross_entropy_with_grad(logits, batch->answers, NULL, &grad_logits);
    two_key_backward(model, &cache, grad_logits, NULL);
    adam_step(adam);
    tensor_free(grad_logits);
    tensor_free(logits);
    two_key_cache_free(&cache);
    return loss;
}

static double train_step_of(void *model, Adam *adam, const void *batch, int *correct)
{
    (void)correct;   /* the loss alone: the two answers are counted when evaluating */
    return two_key_train_step(model, adam, batch);
}

/* the training loop's watch: the first step whose loss is not a number stops it */
static TrainingStatus loss_is_a_number(void *bad_step, int step, double loss, int correct)
{
    (void)correct;
    if (isfinite(loss))
        return TRAINING_GOES_ON;
    *(int *)bad_step = step;
    return TRAINING_DIVERGED;
}

/* task's batches -> the model of seed, or NULL with *bad_step */
TwoKeyModel *two_key_train(const Task *task, const TwoKeyTraining *how, uint64_t seed,
                           int *bad_step)
{
    *bad_step = 0;
    Rng init = rng_use(seed, RNG_PARAMETERS);
    TwoKeyModel *model = two_key_new_mlp(how->key_vocab, how->value_vocab, how->num_hiddens,
                                         how->num_heads, how->mlp_hiddens, &init);
    Adam *adam = adam_new(model->params, model->num_params, how->lr);
    const Trainee trainee = {model, adam, train_step_of, NULL};
    const TrainingPlan plan = {.task = task, .seed = seed, .first_step = 1,
                               .last_step = how->steps, .batch_size = how->batch_size,
                               .batches = BATCH_STREAM};
    const TrainingWatch watch = {bad_step, NULL, loss_is_a_number, NULL};
    training_loop(&trainee, &plan, &watch);
    adam_free(adam);
    if (*bad_step != 0) {
        two_key_free(model);
        model = NULL;
    }
    return model;
}

/* One job of seeds_run: seed first_seed + s */
typedef struct {
    const Task *task;
    const TwoKeyTraining *how;
    uint64_t first_seed;
    TwoKeyModel **models;
    int *bad_steps;
} SeedJobs;

static void train_seed(void *arg, int s)
{
    const SeedJobs *jobs = arg;
    jobs->models[s] = two_key_train(jobs->task, jobs->how, jobs->first_seed + (uint64_t)s,
                                    &jobs->bad_steps[s]);
}

/* -> models (n,), bad_steps (n,) */
void two_key_train_seeds(const Task *task, const TwoKeyTraining *how, uint64_t first_seed,
                         int num_seeds, int num_threads, TwoKeyModel **models, int *bad_steps)
{
    SeedJobs jobs = {task, how, first_seed, models, bad_steps};
    seeds_run(num_seeds, num_threads, train_seed, &jobs);
}

/* logits (B, 2, Vv), answers (B, 2) -> how many of each answer, and of
 * both, are right */
static TwoKeyCorrect count_right(const Tensor *logits, const int *answers)
{
    const int B = logits->shape[0], Vv = logits->shape[2];
    TwoKeyCorrect count = {0, 0, 0};
    for (int b = 0; b < B; b++) {
        const int *answer = answers + (size_t)b * 2;
        const bool first = argmax(&AT3(logits, b, 0, 0), Vv) == answer[0];
        const bool second = argmax(&AT3(logits, b, 1, 0), Vv) == answer[1];
        count.first += first;
        count.second += second;
        count.pairs += first && second;
    }
    return count;
}

double two_key_evaluate(const TwoKeyModel *model, const TaskBatch *batch, const float *gates,
                        TwoKeyCorrect *correct)
{
    Tensor *logits = two_key_forward(model, batch, gates, NULL, NULL);
    const double loss = cross_entropy(logits, batch->answers);
    if (correct != NULL)
        *correct = count_right(logits, batch->answers);
    tensor_free(logits);
    return loss;
}

/* batch -> concat (B, 1, D): the heads side by side, before W_o */
Tensor *two_key_heads(const TwoKeyModel *model, const TaskBatch *batch)
{
    TwoKeyCache cache = {0};
    Tensor *logits = two_key_forward(model, batch, NULL, NULL, &cache);
    Tensor *concat = cache.attention.clear.concat;   /* the clear layer's (the model's default) */
    cache.attention.clear.concat = NULL;   /* kept; the rest goes */
    tensor_free(logits);
    two_key_cache_free(&cache);
    return concat;
}

double two_key_evaluate_heads(const TwoKeyModel *model, const TaskBatch *batch,
                              const Tensor *concat, const float *gates, TwoKeyCorrect *correct)
{
    const MultiHeadAttention *layer = model->attention;
    const int B = batch->batch_size;
    tensor_check_shape("concat", concat,
                       SHAPE(B, 1, model->num_hiddens));
    // the end of the layer (multihead.c's pass 3), with each head gated
    Tensor *W_o = gates != NULL ? head_gated_W_o(layer, gates) : NULL;
    Tensor *out = linear(concat, W_o != NULL ? W_o : layer->W_o, layer->b_o);   /* (B, 1, D) */
    // and the MLP and the readout, as in two_key_forward
    Tensor *hidden = NULL, *block_out = NULL;
    Tensor *logits = readout_forward(model, out, &hidden, &block_out);
    const double loss = cross_entropy(logits, batch->answers);
    if (correct != NULL)
        *correct = count_right(logits, batch->answers);
    TENSOR_FREE(W_o, out, hidden, block_out, logits);
    return loss;
}

void two_key_head_importance(TwoKeyModel *model, const TaskBatch *batch, double *importance)
{
    const int B = batch->batch_size, H = model->num_heads;
    TwoKeyCache cache = {0};
    Tensor *logits = two_key_forward(model, batch, NULL, NULL, &cache);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    Tensor *grad_concat = NULL;
    two_key_backward(model, &cache, grad_logits, &grad_concat);
    parameters_zero_grad(model->params, model->num_params);

    /* gate_grads (B, H) are slopes of the batch's loss, the mean of the B
     * examples' losses: example b's own slope is B times its entry, and
     * the mean over b of |B * entry| is the sum of |entry|. */
    Tensor *gate_grads = head_gate_grads(cache.attention.clear.concat, grad_concat, H);
    for (int h = 0; h < H; h++) {
        double sum = 0.0;
        for (int b = 0; b < B; b++)
            sum += fabs((double)AT2(gate_grads, b, h));
        importance[h] = sum;
    }
    tensor_free(gate_grads);
    tensor_free(grad_concat);
    tensor_free(grad_logits);
    tensor_free(logits);
    two_key_cache_free(&cache);
}

/* batch -> (L(1 + eps) - L(1 - eps)) / the gates' distance, for head */
double two_key_gate_slope(const TwoKeyModel *model, const TaskBatch *batch, int head, float eps)
{
    const int H = model->num_heads;
    float *gates = checked_calloc((size_t)H, sizeof *gates);
    for (int h = 0; h < H; h++)
        gates[h] = 1.0f;
    const float above = 1.0f + eps, below = 1.0f - eps;
    gates[head] = above;
    const double up = two_key_evaluate(model, batch, gates, NULL);
    gates[head] = below;
    const double down = two_key_evaluate(model, batch, gates, NULL);
    free(gates);
    /* the gates as floats are not exactly 1 -+ eps: divide by their distance */
    return (up - down) / ((double)above - (double)below);
}

double two_key_bytes_needed(int key_vocab, int value_vocab, int num_pairs, int num_hiddens,
                            int num_heads, int mlp_hiddens, int batch, int examples)
{
    const double P = num_pairs, D = num_hiddens, H = num_heads, N = mlp_hiddens;
    const double forward = 6.0 * P * D + 6.0 * D + 2.0 * H * P + 2.0 * N + 2.0 * value_vocab +
                           2.0 * P + 2.0;
    const double training = batch * 2.0 * forward, heldout = examples * forward;
    const double params = 4.0 * ((key_vocab + value_vocab) * D + 5.0 * D * D + 2.0 * N * D +
                                 N + D + 2.0 * value_vocab * (D + 1.0));
    return 4.0 * ((training > heldout ? training : heldout) + params);
}
