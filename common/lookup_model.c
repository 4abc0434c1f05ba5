/*
 * lookup_model.c - the model that learns to look words up (introduced in
 * chapter 05's optional section "Attention that learns"). See
 * lookup_model.h.
 *
 * Legend: B = batch_size, P = entries, Q = query words, H = num_heads,
 * D = num_hiddens, Vk, Vv = key and value vocabularies.
 */
#include "lookup_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedding.h"
#include "heads.h"
#include "io/npy.h"
#include "loss.h"
#include "ops.h"

/* ---- creation ---------------------------------------------------------------- */

/* nn.MultiheadAttention's own initialisation, which differs from the
 * nn.Linear default that multihead_new uses: in_proj_weight, the (3D, D)
 * stack of W_q, W_k, W_v, is Xavier-uniform with bound
 * sqrt(6 / (fan_in + fan_out)) = sqrt(6 / (D + 3D)), and both biases start
 * at 0. out_proj.weight keeps nn.Linear's bound 1/sqrt(D). */
static void init_like_pytorch(MultiHeadAttention *layer, Rng *rng)
{
    const int D = layer->num_hiddens;
    const float bound = sqrtf(6.0f / (float)(D + 3 * D));
    Tensor *projections[3] = {layer->W_q, layer->W_k, layer->W_v};
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < projections[i]->size; j++)
            projections[i]->data[j] = (2.0f * rng_uniform(rng) - 1.0f) * bound;
    Tensor *biases[4] = {layer->b_q, layer->b_k, layer->b_v, layer->b_o};
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < biases[i]->size; j++)
            biases[i]->data[j] = 0.0f;
}

/* The optimiser's list and the saved files' list, both pointing at the
 * model's own tensors. */
static void list_parameters(LookupModel *m)
{
    const MultiHeadAttention *a = m->attention;
    const MultiHeadGrads *g = m->grad_attention;
    const Parameter params[LOOKUP_NUM_PARAMS] = {
        {"embed_keys.weight", m->embed_keys, m->grad_embed_keys},
        {"embed_values.weight", m->embed_values, m->grad_embed_values},
        {"attention.W_q", a->W_q, g->W_q},
        {"attention.W_k", a->W_k, g->W_k},
        {"attention.W_v", a->W_v, g->W_v},
        {"attention.b_q", a->b_q, g->b_q},
        {"attention.b_k", a->b_k, g->b_k},
        {"attention.b_v", a->b_v, g->b_v},
        {"attention.out_proj.weight", a->W_o, g->W_o},
        {"attention.out_proj.bias", a->b_o, g->b_o},
        {"readout.weight", m->readout_weight, m->grad_readout_weight},
        {"readout.bias", m->readout_bias, m->grad_readout_bias},
    };
    const ModelFile files[LOOKUP_NUM_FILES] = {
        {.name = "embed_keys.weight", .parts = {m->embed_keys}},
        {.name = "embed_values.weight", .parts = {m->embed_values}},
        {.name = "attention.in_proj_weight", .parts = {a->W_q, a->W_k, a->W_v}},
        {.name = "attention.in_proj_bias", .parts = {a->b_q, a->b_k, a->b_v}},
        {.name = "attention.out_proj.weight", .parts = {a->W_o}},
        {.name = "attention.out_proj.bias", .parts = {a->b_o}},
        {.name = "readout.weight", .parts = {m->readout_weight}},
        {.name = "readout.bias", .parts = {m->readout_bias}},
        {.name = "num_heads", .ints = &m->saved_num_heads, .num_ints = 1},
    };
    for (int i = 0; i < LOOKUP_NUM_PARAMS; i++)
        m->params[i] = params[i];
    for (int i = 0; i < LOOKUP_NUM_FILES; i++)
        m->files[i] = files[i];
    m->num_params = LOOKUP_NUM_PARAMS;
}

LookupModel *lookup_new(int key_vocab, int value_vocab, int num_hiddens, int num_heads,
                        Rng *rng)
{
    const char *func = "lookup_new";
    if (key_vocab < 1 || value_vocab < 1)
        die(func, "vocabularies must be positive: key_vocab %d, value_vocab %d", key_vocab,
            value_vocab);
    LookupModel *m = checked_calloc(func, 1, sizeof *m);
    m->key_vocab = key_vocab;
    m->value_vocab = value_vocab;
    m->num_hiddens = num_hiddens;
    m->num_heads = num_heads;
    m->saved_num_heads = num_heads;
    const int D = num_hiddens;
    /* drawn in the order of the module's parameters */
    m->embed_keys = embedding_new(key_vocab, D, rng);
    m->embed_values = embedding_new(value_vocab, D, rng);
    m->attention = multihead_new(D, D, D, D, num_heads, 0.0f, true, rng);
    init_like_pytorch(m->attention, rng);
    const float bound = 1.0f / sqrtf((float)D);   /* nn.Linear's default */
    m->readout_weight = tensor_uniform(rng, -bound, bound, SHAPE(value_vocab, D));
    m->readout_bias = tensor_uniform(rng, -bound, bound, SHAPE(value_vocab));

    m->grad_embed_keys = tensor_zeros(SHAPE(key_vocab, D));
    m->grad_embed_values = tensor_zeros(SHAPE(value_vocab, D));
    m->grad_attention = multihead_grads_new(m->attention);
    m->grad_readout_weight = tensor_zeros(SHAPE(value_vocab, D));
    m->grad_readout_bias = tensor_zeros(SHAPE(value_vocab));
    list_parameters(m);
    return m;
}

void lookup_free(LookupModel *m)
{
    if (m == NULL)
        return;
    Tensor *tensors[] = {m->embed_keys, m->embed_values, m->readout_weight, m->readout_bias,
                         m->grad_embed_keys, m->grad_embed_values, m->grad_readout_weight,
                         m->grad_readout_bias};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        tensor_free(tensors[i]);
    multihead_free(m->attention);
    multihead_grads_free(m->grad_attention);
    free(m);
}

/* ---- forward and backward --------------------------------------------------------- */

static void check_batch(const char *func, const TaskBatch *batch)
{
    if (batch->num_answers != batch->num_queries)
        die(func, "each query word gives one answer: the batch has %d query and %d answer "
            "words", batch->num_queries, batch->num_answers);
}

/* batch -> logits (B, Q, Vv) */
Tensor *lookup_forward(const LookupModel *m, const TaskBatch *batch,
                       Tensor **attention_weights, LookupSaved *saved)
{
    check_batch("lookup_forward", batch);
    const MultiHeadAttention *a = m->attention;
    const int B = batch->batch_size, P = batch->num_pairs, Q = batch->num_queries;
    const int H = m->num_heads;
    // step 1: the query words' vectors, through W_q
    Tensor *q = embedding_forward(m->embed_keys, batch->queries, SHAPE(B, Q));
    Tensor *queries = linear(q, a->W_q, a->b_q);                          /* (B, Q, D) */
    // step 2: every word's key and value, projected once per step, then
    // looked up by the entries: the tables are (Vk, D) and (Vv, D)
    Tensor *key_table = linear(m->embed_keys, a->W_k, a->b_k);
    Tensor *value_table = linear(m->embed_values, a->W_v, a->b_v);
    Tensor *keys = embedding_forward(key_table, batch->keys, SHAPE(B, P));        /* (B, P, D) */
    Tensor *values = embedding_forward(value_table, batch->values, SHAPE(B, P));  /* (B, P, D) */
    // step 3: the heads (chapter 04's split), attention in each (chapter
    // 03), the heads merged and mixed by W_o
    LookupSaved s = {.batch = batch, .q = q};
    s.Q = transpose_qkv(queries, H);                                      /* (B*H, Q, d) */
    s.K = transpose_qkv(keys, H);                                         /* (B*H, P, d) */
    s.V = transpose_qkv(values, H);
    Tensor *heads = dot_product_attention_save(s.Q, s.K, s.V, NULL, NULL, &s.attention);
    s.concat = transpose_output(heads, H);                                /* (B, Q, D) */
    s.out = linear(s.concat, a->W_o, a->b_o);
    // step 4: a score for every value word
    Tensor *logits = linear(s.out, m->readout_weight, m->readout_bias);   /* (B, Q, Vv) */
    if (attention_weights) {
        /* row b*H + h of (B*H, Q, P) is head h of example b: the same
         * numbers as (B, H, Q, P) */
        *attention_weights = tensor_copy(s.attention.weights);
        tensor_reshape(*attention_weights, SHAPE(B, H, Q, P));
    }
    Tensor *scratch[] = {queries, key_table, value_table, keys, values, heads};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        tensor_free(scratch[i]);
    if (saved)
        *saved = s;
    else
        lookup_saved_free(&s);
    return logits;
}

/* grad (B, K, D) of looked-up rows of a projected table (V, D), projected
 * from table_input (V, D) by weight and bias: the rows' gradients added
 * into the table's, then the projection's backward (grads of weight and
 * bias added) -> grad of table_input (V, D), new. */
static Tensor *table_backward(const Tensor *table_input, const Tensor *weight, const int *ids,
                              const Tensor *grad_rows, Tensor *grad_weight, Tensor *grad_bias)
{
    Tensor *grad_table = tensor_zeros(SHAPE(table_input->shape[0], weight->shape[0]));
    embedding_backward(grad_table, ids, grad_rows);
    Tensor *grad_input = linear_backward(table_input, weight, grad_table, grad_weight, grad_bias);
    tensor_free(grad_table);
    return grad_input;
}

/* x (V, D) += y (V, D) */
static void add_into(Tensor *x, const Tensor *y)
{
    for (size_t i = 0; i < x->size; i++)
        x->data[i] += y->data[i];
}

/* grad_logits (B, Q, Vv) -> gradients added into the model's grad tensors */
void lookup_backward(LookupModel *m, const LookupSaved *saved, const Tensor *grad_logits,
                     Tensor **grad_concat)
{
    const TaskBatch *batch = saved->batch;
    const MultiHeadAttention *a = m->attention;
    MultiHeadGrads *g = m->grad_attention;
    const int H = m->num_heads;
    // step 4 backwards: the readout
    Tensor *grad_out = linear_backward(saved->out, m->readout_weight, grad_logits,
                                       m->grad_readout_weight, m->grad_readout_bias);
    // step 3 backwards: W_o, the merge, attention, the split
    Tensor *grad_merged = linear_backward(saved->concat, a->W_o, grad_out, g->W_o, g->b_o);
    Tensor *grad_heads = transpose_output_backward(grad_merged, H);       /* (B*H, Q, d) */
    Tensor *grad_Q, *grad_K, *grad_V;
    dot_product_attention_backward(saved->Q, saved->K, saved->V, &saved->attention, grad_heads,
                                   &grad_Q, &grad_K, &grad_V);
    Tensor *grad_queries = transpose_qkv_backward(grad_Q, H);              /* (B, Q, D) */
    Tensor *grad_keys = transpose_qkv_backward(grad_K, H);                 /* (B, P, D) */
    Tensor *grad_values = transpose_qkv_backward(grad_V, H);
    // step 2 backwards: each entry's gradient into its word's row of the
    // projected table, then through W_k (W_v) into the embeddings
    Tensor *grad_from_keys = table_backward(m->embed_keys, a->W_k, batch->keys, grad_keys,
                                            g->W_k, g->b_k);
    Tensor *grad_from_values = table_backward(m->embed_values, a->W_v, batch->values,
                                              grad_values, g->W_v, g->b_v);
    add_into(m->grad_embed_keys, grad_from_keys);
    add_into(m->grad_embed_values, grad_from_values);
    // step 1 backwards: through W_q into the query words' rows; a country
    // used as query and as key gets both gradients
    Tensor *grad_q = linear_backward(saved->q, a->W_q, grad_queries, g->W_q, g->b_q);
    embedding_backward(m->grad_embed_keys, batch->queries, grad_q);
    if (grad_concat)
        *grad_concat = tensor_copy(grad_merged);
    Tensor *scratch[] = {grad_out, grad_merged, grad_heads, grad_Q, grad_K, grad_V,
                         grad_queries, grad_keys, grad_values, grad_from_keys,
                         grad_from_values, grad_q};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        tensor_free(scratch[i]);
}

void lookup_saved_free(LookupSaved *saved)
{
    attention_saved_free(&saved->attention);
    Tensor *tensors[] = {saved->q, saved->Q, saved->K, saved->V, saved->concat, saved->out};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        tensor_free(tensors[i]);
    *saved = (LookupSaved){0};
}

double lookup_train_step(LookupModel *m, Adam *adam, const TaskBatch *batch, int *correct)
{
    parameters_zero_grad(m->params, m->num_params);
    LookupSaved saved;
    Tensor *logits = lookup_forward(m, batch, NULL, &saved);
    const double loss = cross_entropy(logits, batch->answers);
    if (correct)
        *correct = count_correct(logits, batch->answers);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    lookup_backward(m, &saved, grad_logits, NULL);
    adam_step(adam);
    tensor_free(grad_logits);
    tensor_free(logits);
    lookup_saved_free(&saved);
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

/* ---- saving and loading ------------------------------------------------------- */

int lookup_save(const LookupModel *m, const char *dir, char *err, size_t err_len)
{
    return model_save(dir, m->files, LOOKUP_NUM_FILES, err, err_len);
}

/* The number of heads first: no shape would catch a model saved with
 * another one, and nothing must change when it differs. */
static int check_heads(const LookupModel *m, const char *dir, char *err, size_t err_len)
{
    int saved_heads;
    if (model_read_ints(dir, "num_heads", &saved_heads, 1, err, err_len) != 0)
        return -1;
    if (saved_heads != m->num_heads) {
        char message[MODEL_ERR_LEN];
        snprintf(message, sizeof message, "%s/num_heads.npy: the model has %d heads, "
                 "the file says %d", dir, m->num_heads, saved_heads);
        if (err == NULL)
            fprintf(stderr, "%s\n", message);
        else if (err_len > 0)
            snprintf(err, err_len, "%s", message);
        return -1;
    }
    return 0;
}

int lookup_load(LookupModel *m, const char *dir, char *err, size_t err_len)
{
    if (check_heads(m, dir, err, err_len) != 0)
        return -1;
    return model_load(dir, m->files, LOOKUP_NUM_FILES, err, err_len);
}

/* ---- the training state ------------------------------------------------------- */

enum {
    FLOAT_FILES = LOOKUP_NUM_FILES - 1,             /* the model's files but num_heads */
    TRAINING_INTS = 6,
    ALL_FILES = LOOKUP_NUM_SAVED_FILES,
};

/* Every file of a model with its training state, pointing at the model's
 * tensors, Adam's moments and the small buffers here. */
typedef struct {
    ModelFile files[ALL_FILES];
    char names[2 * FLOAT_FILES][96];
    int step;
    int training[TRAINING_INTS];
    Tensor *lr;                                     /* (1,) */
} TrainingFiles;

/* The moment (m or v) of the parameter whose value is part. */
static Tensor *moment_of(const LookupModel *m, Tensor *const *moments, const Tensor *part)
{
    for (int i = 0; i < m->num_params; i++)
        if (m->params[i].value == part)
            return moments[i];
    die("lookup_model", "a saved tensor is not a parameter");
}

/* file (of the model) -> the file of its moments, stacked the same way */
static ModelFile moment_file(const LookupModel *m, const ModelFile *file, Tensor *const *moments,
                             char *name, size_t name_len, const char *prefix)
{
    ModelFile moment = {.name = name};
    snprintf(name, name_len, "%s.%s", prefix, file->name);
    for (int i = 0; i < MODEL_MAX_PARTS && file->parts[i]; i++)
        moment.parts[i] = moment_of(m, moments, file->parts[i]);
    return moment;
}

static void training_files(TrainingFiles *t, const LookupModel *m, const Adam *adam)
{
    if (adam->params != m->params || adam->count != m->num_params)
        die("lookup_model", "the optimiser does not hold this model's parameters");
    int n = 0;
    for (int i = 0; i < LOOKUP_NUM_FILES; i++)
        t->files[n++] = m->files[i];
    for (int i = 0; i < FLOAT_FILES; i++) {
        t->files[n++] = moment_file(m, &m->files[i], adam->m, t->names[2 * i],
                                    sizeof t->names[0], "optimizer.exp_avg");
        t->files[n++] = moment_file(m, &m->files[i], adam->v, t->names[2 * i + 1],
                                    sizeof t->names[0], "optimizer.exp_avg_sq");
        t->files[n - 1].nonnegative = true;
    }
    t->lr = tensor_zeros(SHAPE(1));
    t->files[n++] = (ModelFile){.name = "optimizer.step", .ints = &t->step, .num_ints = 1};
    t->files[n++] = (ModelFile){.name = "optimizer.lr", .parts = {t->lr}};
    t->files[n++] = (ModelFile){.name = "training", .ints = t->training,
                                .num_ints = TRAINING_INTS};
}

int lookup_save_training(const LookupModel *m, const Adam *adam, const LookupTraining *training,
                         const char *dir, char *err, size_t err_len)
{
    TrainingFiles t;
    training_files(&t, m, adam);
    t.step = (int)adam->step;
    t.lr->data[0] = adam->lr;
    t.training[0] = training->batch_size;
    t.training[1] = training->num_pairs;
    for (int i = 0; i < 4; i++)
        t.training[2 + i] = (int)((training->seed >> (16 * i)) & 0xffff);
    const int status = model_save(dir, t.files, ALL_FILES, err, err_len);
    tensor_free(t.lr);
    return status;
}

/* The three small files of the training state (step, learning rate, what
 * draws the batches) read into t and checked, before any tensor changes.
 * When limits is not NULL the batch size and pairs are checked too. */
static int read_training(TrainingFiles *t, const LookupModel *m, const LookupLimits *limits,
                         const char *dir, char *err, size_t err_len)
{
    if (model_load(dir, &t->files[ALL_FILES - 3], 3, err, err_len) != 0)
        return -1;
    bool pieces_fit = true;
    for (int i = 0; i < 4; i++)
        pieces_fit = pieces_fit && t->training[2 + i] >= 0 && t->training[2 + i] <= 0xffff;
    if (t->step < 0 || !pieces_fit || !(t->lr->data[0] > 0.0f)) {
        snprintf(err, err_len, "%s/%s: %s", dir, t->step < 0 ? "optimizer.step.npy" :
                 !pieces_fit ? "training.npy" : "optimizer.lr.npy",
                 t->step < 0 ? "the step count is negative" :
                 !pieces_fit ? "the seed's pieces must be from 0 to 65535" :
                 "the learning rate must be above 0");
        return -1;
    }
    const int batch_size = t->training[0], num_pairs = t->training[1];
    if (limits != NULL && (batch_size < 1 || batch_size > limits->max_batch || num_pairs < 2 ||
                           num_pairs > limits->max_pairs || num_pairs > m->key_vocab)) {
        snprintf(err, err_len, "%s/training.npy: expected a batch of 1 to %d examples and 2 to "
                 "%d pairs (at most the model's %d countries), got %d and %d", dir,
                 limits->max_batch, limits->max_pairs, m->key_vocab, batch_size, num_pairs);
        return -1;
    }
    return 0;
}

static int load_training(LookupModel *m, Adam *adam, LookupTraining *training,
                         const LookupLimits *limits, const char *dir, char *err, size_t err_len)
{
    if (check_heads(m, dir, err, err_len) != 0)
        return -1;
    TrainingFiles t;
    training_files(&t, m, adam);
    int status = read_training(&t, m, limits, dir, err, err_len);
    if (status == 0)
        status = model_load(dir, t.files, ALL_FILES, err, err_len);
    if (status == 0) {
        adam->step = t.step;
        adam->lr = t.lr->data[0];
        training->batch_size = t.training[0];
        training->num_pairs = t.training[1];
        training->seed = 0;
        for (int i = 0; i < 4; i++)
            training->seed |= (uint64_t)(t.training[2 + i] & 0xffff) << (16 * i);
    }
    tensor_free(t.lr);
    return status;
}

int lookup_load_training(LookupModel *m, Adam *adam, LookupTraining *training, const char *dir,
                         char *err, size_t err_len)
{
    return load_training(m, adam, training, NULL, dir, err, err_len);
}

/* ---- a model of the sizes its files give ------------------------------------- */

LookupModel *lookup_load_new(const char *dir, const LookupLimits *limits, char *err,
                             size_t err_len)
{
    // step 1: the sizes, from embed_keys.weight (Vk, D) and num_heads
    size_t path_len = strlen(dir) + sizeof "/embed_keys.weight.npy";
    char *path = checked_malloc("lookup_load_new", path_len, 1);
    snprintf(path, path_len, "%s/embed_keys.weight.npy", dir);
    Tensor *embed = npy_load(path, err, err_len);
    free(path);
    int heads = 0;
    if (embed == NULL || model_read_ints(dir, "num_heads", &heads, 1, err, err_len) != 0) {
        tensor_free(embed);
        return NULL;
    }
    const int vocab = embed->ndim == 2 ? embed->shape[0] : 0;
    const int hiddens = embed->ndim == 2 ? embed->shape[1] : 0;
    tensor_free(embed);
    // step 2: sizes the program can run; D divides by H
    if (vocab < limits->min_vocab || vocab > limits->max_vocab || hiddens < 1 ||
        hiddens > limits->max_hiddens || heads < 1 || heads > limits->max_heads ||
        hiddens % heads != 0) {
        snprintf(err, err_len, "%s does not hold a model this program can run (%d countries, "
                 "num_hiddens %d, %d heads, for %d pairs)", dir, vocab, hiddens, heads,
                 limits->min_vocab);
        return NULL;
    }
    // step 3: build it (every parameter is then replaced) and read every file
    Rng rng = rng_new(0);
    LookupModel *m = lookup_new(vocab, vocab, hiddens, heads, &rng);
    if (lookup_load(m, dir, err, err_len) != 0) {
        lookup_free(m);
        return NULL;
    }
    return m;
}

Adam *lookup_load_training_new(LookupModel *m, const char *dir, const LookupLimits *limits,
                               LookupTraining *training, char *err, size_t err_len)
{
    /* the learning rate is the saved one once the load succeeds */
    Adam *adam = adam_new(m->params, m->num_params, 1e-3f);
    if (load_training(m, adam, training, limits, dir, err, err_len) != 0) {
        adam_free(adam);
        return NULL;
    }
    return adam;
}
