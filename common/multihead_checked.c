/*
 * multihead_checked.c - chapter 05's layer run on a user's tensors, every
 * stage checked. See multihead_checked.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H.
 */
#include "multihead_checked.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "memory.h"

#define set_error(err, err_len, ...) error_format(err, err_len, NULL, __VA_ARGS__)

int layer_gradients_list(const LayerGradients *grads, const char *names[LAYER_GRADIENTS],
                         const Tensor *tensors[LAYER_GRADIENTS])
{
    const LayerGradients none = {0};
    const MultiHeadGrads no_params = {0};
    const LayerGradients *g = grads != NULL ? grads : &none;
    const MultiHeadGrads *p = g->params != NULL ? g->params : &no_params;
    static const char *const all_names[LAYER_GRADIENTS] = {
        "grad_queries", "grad_keys", "grad_values", "grad_W_q", "grad_W_k", "grad_W_v",
        "grad_W_o", "grad_b_q", "grad_b_k", "grad_b_v", "grad_b_o"};
    const Tensor *const all[LAYER_GRADIENTS] = {g->queries, g->keys, g->values, p->W_q, p->W_k,
                                                p->W_v, p->W_o, p->b_q, p->b_k, p->b_v, p->b_o};
    for (int i = 0; i < LAYER_GRADIENTS; i++) {
        names[i] = all_names[i];
        tensors[i] = all[i];
    }
    return LAYER_GRADIENTS;
}

/* ---- the run, every stage checked ------------------------------------------
 * The library passes IEEE values through (multihead.h): inputs near
 * float32's largest value overflow into infinity in a projection, and then
 * into NaN. Each stage is checked in the order the forward computes it, so
 * the line names the first stage that overflowed, where the fix is. */

/* A head's (B*H, n, d) tensor, checked as the (B, n, D) projection it was
 * split from: element [b*H + h, t, j] is [b, t, h*d + j] there. */
static int check_projection(const char *what, const Tensor *heads, int H, char *err,
                            size_t err_len)
{
    const size_t bad = tensor_first_non_finite(heads);
    if (bad == SIZE_MAX)
        return 0;
    const int n = heads->shape[1], d = heads->shape[2];
    const int row = (int)(bad / ((size_t)n * d)), t = (int)(bad / d % n), j = (int)(bad % d);
    set_error(err, err_len, "the %s projection overflows float32 at [%d, %d, %d]: scale the "
              "inputs down", what, row / H, t, row % H * d + j);
    return -1;
}

/* Softmax turns finite scores into finite weights, so a non-finite weight
 * means a score Q K^T / sqrt(d) overflowed; the message names its key. */
static int check_scores(const MultiHeadCache *cache, int H, char *err, size_t err_len)
{
    const Tensor *weights = cache->attention.weights;   /* (B*H, T, K) */
    const size_t bad = tensor_first_non_finite(weights);
    if (bad == SIZE_MAX)
        return 0;
    const int T = weights->shape[1], K = weights->shape[2], d = cache->Q->shape[2];
    const int row = (int)(bad / ((size_t)T * K)), t = (int)(bad / K % T);
    int key = (int)(bad % K);
    for (int j = K - 1; j >= 0; j--) {   /* the first key whose score is not finite */
        float score = 0.0f;
        for (int i = 0; i < d; i++)
            score += AT3(cache->Q, row, t, i) * AT3(cache->K, row, j, i);
        key = isfinite(score / sqrtf((float)d)) ? key : j;
    }
    set_error(err, err_len, "the attention scores overflow float32 at [%d, %d, %d, %d] "
              "(sequence, head, query, key): scale the queries or keys down", row / H, row % H,
              t, key);
    return -1;
}

/* A tensor of shape (B, T, D) or a gradient, checked whole. */
static int check_stage(const char *what, const Tensor *x, const char *advice, char *err,
                       size_t err_len)
{
    const size_t bad = x != NULL ? tensor_first_non_finite(x) : SIZE_MAX;
    if (bad == SIZE_MAX)
        return 0;
    char where[96];
    tensor_index_str(where, sizeof where, bad, x->ndim, x->shape);
    set_error(err, err_len, "%s overflows float32 at %s: %s", what, where, advice);
    return -1;
}

static int check_forward(const MultiHeadCache *cache, const Tensor *output, int H, char *err,
                         size_t err_len)
{
    if (check_projection("query", cache->Q, H, err, err_len) != 0 ||
        check_projection("key", cache->K, H, err, err_len) != 0 ||
        check_projection("value", cache->V, H, err, err_len) != 0 ||
        check_scores(cache, H, err, err_len) != 0)
        return -1;
    return check_stage("the heads' output (weights times values)", cache->concat,
                       "scale the values down", err, err_len) != 0 ||
           check_stage("the output (the heads times W_o)", output, "scale the inputs down", err,
                       err_len) != 0 ? -1 : 0;
}

static int check_gradients(const LayerResults *results, char *err, size_t err_len)
{
    const char *names[LAYER_GRADIENTS];
    const Tensor *tensors[LAYER_GRADIENTS];
    const int count = layer_gradients_list(&results->grads, names, tensors);
    char what[64];
    for (int i = 0; i < count; i++) {
        snprintf(what, sizeof what, "the gradient %s", names[i]);
        if (check_stage(what, tensors[i], "scale grad_output or the inputs down", err,
                        err_len) != 0)
            return -1;
    }
    return 0;
}

int multihead_checked_run(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values, const ValidLens *valid_lens,
                          const Tensor *grad_output, LayerResults *results, char *err,
                          size_t err_len)
{
    const int B = queries->shape[0], T = queries->shape[1];
    const int K = keys->shape[1], H = layer->num_heads;
    memset(results, 0, sizeof *results);
    if (multihead_check_memory(layer, B, T, K, grad_output != NULL, err, err_len) != 0)
        return -1;
    MultiHeadCache cache;
    results->output = multihead_forward_cache(layer, queries, keys, values, valid_lens, false,
                                             NULL, &cache);
    int status = check_forward(&cache, results->output, H, err, err_len);
    if (status == 0 && grad_output != NULL) {
        /* fresh gradients: "added into" starts from zero */
        LayerGradients *g = &results->grads;
        g->params = multihead_grads_new(layer);
        multihead_backward(layer, &cache, grad_output, g->params, &g->queries,
                           &g->keys, &g->values, NULL);
        status = check_gradients(results, err, err_len);
    }
    /* (B*H, T, K) and (B, H, T, K) hold the same numbers in the same order:
     * row b*H + h is head h of sequence b. Evaluation mode: no dropout. */
    results->attention_weights = tensor_reshape(cache.attention.weights, SHAPE(B, H, T, K));
    cache.attention.weights = NULL;
    multihead_cache_free(&cache);
    if (status != 0)
        layer_results_free(results);
    return status;
}

void layer_results_free(LayerResults *results)
{
    TENSOR_FREE(results->output, results->attention_weights);
    layer_gradients_free(&results->grads);
    memset(results, 0, sizeof *results);
}

/* ---- memory ------------------------------------------------------------------ */

double multihead_bytes_needed(const MultiHeadAttention *layer, int B, int T, int K,
                              bool backward)
{
    const double D = layer->num_hiddens, H = layer->num_heads;
    const double inputs = (double)B * T * layer->query_size +
                          (double)B * K * (layer->key_size + layer->value_size);
    const double params = D * (layer->query_size + layer->key_size + layer->value_size + D) +
                          4 * D;
    const double projections = (double)B * T * D + 2.0 * B * K * D;   /* Q, K, V */
    const double weights = (double)B * H * T * K;
    /* projected, then split into heads; the weights and their copy for the
     * caller; the heads' output, merged, and the output */
    double floats = inputs + params + 2 * projections + 2 * weights + 3.0 * B * T * D;
    if (backward)   /* the weights' and scores' gradients, and one of everything else */
        floats += 2 * weights + inputs + params + 2 * projections + 3.0 * B * T * D;
    return 4.0 * floats;
}

int multihead_check_memory(const MultiHeadAttention *layer, int B, int T, int K, bool backward,
                           char *err, size_t err_len)
{
    char detail[96], weights_text[32];
    bytes_text(weights_text, sizeof weights_text, 4.0 * B * layer->num_heads * (double)T * K);
    snprintf(detail, sizeof detail, "the attention weights (%d, %d, %d, %d) alone take %s", B,
             layer->num_heads, T, K, weights_text);
    return memory_check(multihead_bytes_needed(layer, B, T, K, backward), detail,
                        "use fewer queries, keys or heads", err, err_len);
}

void layer_gradients_free(LayerGradients *grads)
{
    TENSOR_FREE(grads->queries, grads->keys, grads->values);
    multihead_grads_free(grads->params);
    memset(grads, 0, sizeof *grads);
}

void layer_gradients_print(const LayerGradients *g)
{
    const MultiHeadGrads *p = g->params;
    printf("gradients of sum(output * grad_output), largest |entry|:\n");
    printf("  queries %.4g, keys %.4g, values %.4g\n", (double)tensor_max_abs(g->queries),
           (double)tensor_max_abs(g->keys), (double)tensor_max_abs(g->values));
    printf("  W_q %.4g, W_k %.4g, W_v %.4g, W_o %.4g\n", (double)tensor_max_abs(p->W_q),
           (double)tensor_max_abs(p->W_k), (double)tensor_max_abs(p->W_v),
           (double)tensor_max_abs(p->W_o));
    if (p->b_k != NULL)
        printf("  b_k %.1e (0 up to rounding: softmax ignores a shift shared by all keys)\n",
               (double)tensor_max_abs(p->b_k));
    printf("\n");
}

