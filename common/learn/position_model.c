/*
 * position_model.c - a small self-attention model with five kinds of
 * positions (introduced in chapter 06's page "Positions that keep a
 * symmetry"). See position_model.h.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, d = D / H, V = vocabulary, L = max_length.
 */
#include "learn/position_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heads.h"
#include "learn/embedding.h"
#include "learn/linear_layer.h"
#include "learn/loss.h"
#include "learn/parameter_table.h"
#include "ops.h"
#include "positional.h"

const char *const position_scheme_names[POSITION_SCHEMES] = {"none", "sinusoidal", "learned",
                                                             "RoPE", "ALiBi"};

PositionModel *position_model_new(int vocab, int num_hiddens, int num_heads,
                                  PositionScheme scheme, int max_length, bool causal, Rng *rng)
{
    if (vocab < 1 || max_length < 1)
        die("vocab and max_length must be positive, got %d and %d", vocab, max_length);
    if (scheme == POSITIONS_ROPE && num_heads > 0 && (num_hiddens / num_heads) % 2 != 0)
        die("RoPE turns pairs: the head size %d / %d must be even", num_hiddens,
            num_heads);
    PositionModel *m = checked_calloc(1, sizeof *m);
    const int D = num_hiddens;
    *m = (PositionModel){.vocab = vocab, .num_hiddens = D, .num_heads = num_heads,
                         .max_length = max_length, .scheme = scheme, .causal = causal};
    // drawn in a fixed order, so a seed names one model
    m->embed_tokens = embedding_new(vocab, D, rng);
    if (scheme == POSITIONS_LEARNED)
        m->embed_positions = embedding_new(max_length, D, rng);
    m->attention = multihead_new(D, D, D, D, num_heads, 0.0f, false, rng);
    linear_layer_new(vocab, D, rng, &m->readout_weight, &m->readout_bias,
                     &m->grad_readout_weight, &m->grad_readout_bias);

    m->grad_embed_tokens = tensor_zeros(SHAPE(vocab, D));
    m->grad_attention = multihead_grads_new(m->attention);
    /* the parameters, listed once (learn/parameter_table.h); never saved */
    ParameterTable t = parameter_table(m->params, POSITION_MODEL_MAX_PARAMS, NULL, 0);
    parameter_table_add(&t, "embed_tokens.weight", m->embed_tokens, m->grad_embed_tokens);
    parameter_table_attention(&t, ATTENTION_LINEARS, m->attention, m->grad_attention);
    parameter_table_add(&t, "readout.weight", m->readout_weight, m->grad_readout_weight);
    parameter_table_add(&t, "readout.bias", m->readout_bias, m->grad_readout_bias);
    if (m->embed_positions != NULL) {
        m->grad_embed_positions = tensor_zeros(SHAPE(max_length, D));
        parameter_table_add(&t, "embed_positions.weight", m->embed_positions,
                            m->grad_embed_positions);
    }
    m->num_params = t.num_params;
    return m;
}

void position_model_free(PositionModel *model)
{
    if (model == NULL)
        return;
    TENSOR_FREE(model->embed_tokens, model->embed_positions, model->readout_weight,
                model->readout_bias, model->grad_embed_tokens, model->grad_embed_positions,
                model->grad_readout_weight, model->grad_readout_bias);
    multihead_free(model->attention);
    multihead_grads_free(model->grad_attention);
    free(model);
}

/* ids (B, T) = S + t: the positions, as ids into a table */
static int *position_ids(int batch_size, int length, int first_position)
{
    int *ids = checked_malloc((size_t)batch_size * length, sizeof *ids);
    for (int b = 0; b < batch_size; b++)
        for (int t = 0; t < length; t++)
            ids[(size_t)b * length + t] = first_position + t;
    return ids;
}

/* x (B, T, D) += the position vectors of S ... S+T-1, in place */
static void add_positions(const PositionModel *model, Tensor *x, int first_position)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2];
    Tensor *table = NULL;   /* (B, T, D): row (b, t) is position S + t's vector */
    if (model->scheme == POSITIONS_SINUSOIDAL) {
        Tensor *P = positional_encoding(first_position + T, D);   /* (S+T, D) */
        table = tensor_zeros(SHAPE(B, T, D));
        for (int b = 0; b < B; b++)
            memcpy(&AT3(table, b, 0, 0), &AT2(P, first_position, 0),
                   (size_t)T * D * sizeof(float));
        tensor_free(P);
    } else if (model->scheme == POSITIONS_LEARNED) {
        if (first_position + T > model->max_length)
            die("positions up to %d, the learned table has %d rows",
                first_position + T - 1, model->max_length);
        int *ids = position_ids(B, T, first_position);
        table = embedding_forward(model->embed_positions, ids, SHAPE(B, T));
        free(ids);
    } else {
        return;   /* none, RoPE and ALiBi add nothing to the tokens */
    }
    for (size_t i = 0; i < x->size; i++)
        x->data[i] += table->data[i];
    tensor_free(table);
}

static PositionAttention attention_of(const PositionModel *model, int first_position)
{
    const HeadPositions inside = model->scheme == POSITIONS_ROPE    ? HEAD_POSITIONS_ROPE
                                 : model->scheme == POSITIONS_ALIBI ? HEAD_POSITIONS_ALIBI
                                                                    : HEAD_POSITIONS_NONE;
    return (PositionAttention){inside, model->num_heads, first_position, model->causal};
}

/* tokens (B, T) -> logits (B, T, V); attention_weights (B, H, T, T) */
Tensor *position_model_forward(const PositionModel *model, const int *tokens, int batch_size,
                               int length, int first_position, Tensor **attention_weights,
                               PositionModelCache *cache)
{
    const int B = batch_size, T = length, H = model->num_heads;
    const MultiHeadAttention *a = model->attention;

    // step 1: the tokens' vectors, and where they stand
    Tensor *x = embedding_forward(model->embed_tokens, tokens, SHAPE(B, T));
    add_positions(model, x, first_position);

    // step 2: project and split into heads, (B, T, D) -> (B*H, T, d)
    Tensor *q_proj = linear(x, a->W_q, NULL), *k_proj = linear(x, a->W_k, NULL);
    Tensor *v_proj = linear(x, a->W_v, NULL);
    Tensor *Q = transpose_qkv(q_proj, H), *K = transpose_qkv(k_proj, H);
    Tensor *V = transpose_qkv(v_proj, H);
    TENSOR_FREE(q_proj, k_proj, v_proj);

    // step 3: every head attends, with RoPE or ALiBi inside when asked
    const PositionAttention how = attention_of(model, first_position);
    PositionAttentionCache attention = {0};
    Tensor *weights = NULL;
    Tensor *heads = position_attention_forward(&how, Q, K, V, NULL,
                                               attention_weights ? &weights : NULL,
                                               cache ? &attention : NULL);
    if (attention_weights != NULL)
        *attention_weights = tensor_reshape(weights, SHAPE(B, H, T, T));
    TENSOR_FREE(Q, K);

    // step 4: merge the heads and mix them with W_o
    Tensor *concat = transpose_output(heads, H);       /* (B, T, D) */
    Tensor *out = linear(concat, a->W_o, NULL);        /* (B, T, D) */
    tensor_free(heads);

    // step 5: the readout scores every token of the vocabulary
    Tensor *logits = linear(out, model->readout_weight, model->readout_bias);
    if (cache != NULL) {
        *cache = (PositionModelCache){tokens, B, T, first_position, x, V, attention, concat, out};
    } else {
        TENSOR_FREE(x, V, concat, out);
    }
    return logits;
}

/* grad_logits (B, T, V) -> parameter gradients (+=) */
void position_model_backward(PositionModel *model, const PositionModelCache *cache,
                             const Tensor *grad_logits)
{
    const int B = cache->batch_size, T = cache->length, H = model->num_heads;
    tensor_check_shape("grad_logits", grad_logits,
                       SHAPE(B, T, model->vocab));
    const MultiHeadAttention *a = model->attention;
    const MultiHeadGrads *g = model->grad_attention;

    // step 5 backwards: the readout
    Tensor *grad_out = linear_backward(cache->out, model->readout_weight, grad_logits,
                                       model->grad_readout_weight, model->grad_readout_bias);
    // step 4 backwards: W_o, then the merge undone
    Tensor *grad_concat = linear_backward(cache->concat, a->W_o, grad_out, g->W_o, NULL);
    Tensor *grad_heads = transpose_output_backward(grad_concat, H);   /* (B*H, T, d) */

    // step 3 backwards: the attention, RoPE turned back
    const PositionAttention how = attention_of(model, cache->first_position);
    Tensor *grad_Q = NULL, *grad_K = NULL, *grad_V = NULL;
    position_attention_backward(&how, &cache->attention, grad_heads, &grad_Q, &grad_K,
                                &grad_V);

    // step 2 backwards: x fed all three projections, so its gradient is
    // the sum of the three
    Tensor *grad_x = tensor_zeros(SHAPE(B, T, model->num_hiddens));
    Tensor *const grad_heads_of[3] = {grad_Q, grad_K, grad_V};
    Tensor *const weight_of[3] = {a->W_q, a->W_k, a->W_v};
    Tensor *const grad_weight_of[3] = {g->W_q, g->W_k, g->W_v};
    for (int p = 0; p < 3; p++) {
        Tensor *grad_proj = transpose_qkv_backward(grad_heads_of[p], H);   /* (B, T, D) */
        Tensor *grad_in = linear_backward(cache->x, weight_of[p], grad_proj,
                                          grad_weight_of[p], NULL);
        for (size_t i = 0; i < grad_x->size; i++)
            grad_x->data[i] += grad_in->data[i];
        TENSOR_FREE(grad_proj, grad_in);
    }

    // step 1 backwards: the token rows, and the learned position rows
    embedding_backward(model->grad_embed_tokens, cache->tokens, grad_x);
    if (model->scheme == POSITIONS_LEARNED) {
        int *ids = position_ids(B, T, cache->first_position);
        embedding_backward(model->grad_embed_positions, ids, grad_x);
        free(ids);
    }
    TENSOR_FREE(grad_out, grad_concat, grad_heads, grad_Q, grad_K, grad_V, grad_x);
}

void position_model_cache_free(PositionModelCache *cache)
{
    position_attention_cache_free(&cache->attention);
    TENSOR_FREE(cache->x, cache->V, cache->concat, cache->out);
    *cache = (PositionModelCache){0};
}

/* logits (B, T, V), answers (B, T) -> the rows from first_scored on,
 * (B, T - f, V), and their answers (B * (T - f),) */
static Tensor *scored_rows(const Tensor *logits, const int *answers, int first_scored,
                           int **targets)
{
    const int B = logits->shape[0], T = logits->shape[1];
    const int n = T - first_scored;
    Tensor *rows = tensor_slice(logits, 1, first_scored, n);
    *targets = checked_malloc((size_t)B * n, sizeof **targets);
    for (int b = 0; b < B; b++)
        memcpy(*targets + (size_t)b * n, answers + (size_t)b * T + first_scored,
               (size_t)n * sizeof(int));
    return rows;
}

double position_model_train_step(PositionModel *model, Adam *adam, const int *tokens,
                                 const int *answers, int batch_size, int length,
                                 int first_scored)
{
    const int B = batch_size, T = length, V = model->vocab;
    parameters_zero_grad(model->params, model->num_params);
    PositionModelCache cache = {0};
    Tensor *logits = position_model_forward(model, tokens, B, T, 0, NULL, &cache);
    int *targets = NULL;
    Tensor *rows = scored_rows(logits, answers, first_scored, &targets);
    const double loss = cross_entropy(rows, targets);
    Tensor *grad_rows = cross_entropy_backward(rows, targets, 1.0f);
    /* the unscored positions get a zero gradient */
    Tensor *grad_logits = tensor_zeros(SHAPE(B, T, V));
    const size_t row_floats = (size_t)(T - first_scored) * V;
    for (int b = 0; b < B; b++)
        memcpy(&AT3(grad_logits, b, first_scored, 0), grad_rows->data + (size_t)b * row_floats,
               row_floats * sizeof(float));
    position_model_backward(model, &cache, grad_logits);
    adam_step(adam);
    free(targets);
    TENSOR_FREE(logits, rows, grad_rows, grad_logits);
    position_model_cache_free(&cache);
    return loss;
}

double position_model_accuracy(const PositionModel *model, const int *tokens,
                               const int *answers, int batch_size, int length,
                               int first_scored)
{
    Tensor *logits = position_model_forward(model, tokens, batch_size, length, 0, NULL, NULL);
    int *targets = NULL;
    Tensor *rows = scored_rows(logits, answers, first_scored, &targets);
    const int correct = count_correct(rows, targets);
    free(targets);
    TENSOR_FREE(logits, rows);
    return (double)correct / ((double)batch_size * (length - first_scored));
}
