/*
 * multihead.c - the multi-head attention layer (introduced in chapter 05).
 * See multihead.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value input sizes.
 *
 * The layer is d2l's MultiHeadAttention with the older signature that takes
 * separate query, key and value sizes (PyTorch's nn.MultiheadAttention calls
 * the last two kdim and vdim). H heads of size d cost the same as one head
 * of size D: the projections are one (D, D*) matrix each, and the head split
 * is only a change of index (heads.c).
 */
#include "multihead.h"

#include <math.h>
#include <stdlib.h>

#include "heads.h"
#include "internal.h"
#include "ops.h"

/* nn.Linear's default initialisation for a layer with fan_in inputs:
 * PyTorch draws the weight with kaiming_uniform_(a = sqrt(5)), whose bound
 * gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + 5)), works out to
 * 1 / sqrt(fan_in); the bias uses the same bound. Uniform in [-bound, bound).
 * A weight is (out_features, fan_in), a bias (out_features,). */
static Tensor *init_uniform(Rng *rng, int out_features, int fan_in, bool is_bias)
{
    const float bound = 1.0f / sqrtf((float)fan_in);
    return is_bias ? tensor_uniform(rng, -bound, bound, SHAPE(out_features))
                   : tensor_uniform(rng, -bound, bound, SHAPE(out_features, fan_in));
}

/* One projection drawn as nn.Linear.reset_parameters draws it: the weight
 * (out_features, fan_in), then the bias (out_features,) with the weight's
 * fan_in in its bound, or NULL without biases. */
static void draw_linear(Rng *rng, int out_features, int fan_in, bool with_bias,
                        Tensor **weight, Tensor **bias)
{
    *weight = init_uniform(rng, out_features, fan_in, false);
    *bias = with_bias ? init_uniform(rng, out_features, fan_in, true) : NULL;
}

/* Stops (die) unless the sizes are positive, num_heads splits
 * num_hiddens and dropout is in [0, 1); returns the head size d. */
static int check_layer_sizes(int query_size, int key_size, int value_size, int num_hiddens,
                             int num_heads, float dropout)
{
    if (query_size < 1 || key_size < 1 || value_size < 1 || num_hiddens < 1)
        die("sizes must be positive: query_size %d, key_size %d, value_size %d, "
            "num_hiddens %d", query_size, key_size, value_size, num_hiddens);
    const int d = head_size(num_hiddens, num_heads);   /* dies unless H splits D */
    if (!(dropout >= 0.0f && dropout < 1.0f))
        die("dropout must be in [0, 1), got %g", (double)dropout);
    return d;
}

/* The layer around its parameters (W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o),
 * whose sizes its constructor has checked; the sizes read from them. */
static MultiHeadAttention layer_of(int num_heads, int num_kv_heads, float dropout,
                                   Tensor *const p[MULTIHEAD_PARAMETERS])
{
    return (MultiHeadAttention){
        .query_size = p[0]->shape[1], .key_size = p[1]->shape[1], .value_size = p[2]->shape[1],
        .num_hiddens = p[0]->shape[0], .num_heads = num_heads, .num_kv_heads = num_kv_heads,
        .dropout = dropout, .bias = p[4] != NULL,
        .W_q = p[0], .W_k = p[1], .W_v = p[2], .W_o = p[3],
        .b_q = p[4], .b_k = p[5], .b_v = p[6], .b_o = p[7],
    };
}

/* layer_of, on the heap (multihead_free frees it) */
static MultiHeadAttention *layer_new(int num_heads, int num_kv_heads, float dropout,
                                     Tensor *const p[MULTIHEAD_PARAMETERS])
{
    MultiHeadAttention *layer = checked_calloc(1, sizeof *layer);
    *layer = layer_of(num_heads, num_kv_heads, dropout, p);
    return layer;
}

MultiHeadAttention *multihead_new(int query_size, int key_size, int value_size,
                                  int num_hiddens, int num_heads, float dropout,
                                  bool bias, Rng *rng)
{
    check_layer_sizes(query_size, key_size, value_size, num_hiddens, num_heads, dropout);

    /* Drawn in a fixed order, each weight followed by its bias, so a seed
     * names one layer. */
    const int D = num_hiddens;
    Tensor *W_q, *W_k, *W_v, *W_o, *b_q, *b_k, *b_v, *b_o;
    draw_linear(rng, D, query_size, bias, &W_q, &b_q);   /* W_q (D, Dq), b_q (D,) */
    draw_linear(rng, D, key_size, bias, &W_k, &b_k);     /* W_k (D, Dk), b_k (D,) */
    draw_linear(rng, D, value_size, bias, &W_v, &b_v);   /* W_v (D, Dv), b_v (D,) */
    draw_linear(rng, D, D, bias, &W_o, &b_o);            /* W_o (D, D),  b_o (D,) */
    return layer_new(num_heads, num_heads, dropout,
                     (Tensor *const[]){W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o});
}

/* multihead_new with W_k and W_v drawn (G*d, .): with G = H, the same
 * numbers as multihead_new */
MultiHeadAttention *multihead_new_grouped(int query_size, int key_size, int value_size,
                                          int num_hiddens, int num_heads, int num_kv_heads,
                                          float dropout, bool bias, Rng *rng)
{
    const int d = check_layer_sizes(query_size, key_size, value_size, num_hiddens,
                                    num_heads, dropout);
    require_kv_heads(num_heads, num_kv_heads);

    const int D = num_hiddens, kv_rows = num_kv_heads * d;   /* G*d */
    Tensor *W_q, *W_k, *W_v, *W_o, *b_q, *b_k, *b_v, *b_o;
    draw_linear(rng, D, query_size, bias, &W_q, &b_q);
    draw_linear(rng, kv_rows, key_size, bias, &W_k, &b_k);     /* W_k (G*d, Dk) */
    draw_linear(rng, kv_rows, value_size, bias, &W_v, &b_v);   /* W_v (G*d, Dv) */
    draw_linear(rng, D, D, bias, &W_o, &b_o);
    return layer_new(num_heads, num_kv_heads, dropout,
                     (Tensor *const[]){W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o});
}

MultiHeadAttention multihead_from_weights(int num_heads, int num_kv_heads,
                                          Tensor *const params[MULTIHEAD_PARAMETERS])
{
    Tensor *W_q = params[0], *W_k = params[1], *W_v = params[2], *W_o = params[3];
    Tensor *b_q = params[4], *b_k = params[5], *b_v = params[6], *b_o = params[7];
    tensor_check_shape("W_q", W_q, SHAPE(-1, -1));
    const int D = W_q->shape[0], d = head_size(D, num_heads);
    require_kv_heads(num_heads, num_kv_heads);
    const int kv_rows = num_kv_heads * d;   /* G*d */
    tensor_check_shape("W_k", W_k, SHAPE(kv_rows, -1));
    tensor_check_shape("W_v", W_v, SHAPE(kv_rows, -1));
    tensor_check_shape("W_o", W_o, SHAPE(D, D));
    const bool bias = b_q != NULL;
    if ((b_k != NULL) != bias || (b_v != NULL) != bias || (b_o != NULL) != bias)
        die("the biases b_q, b_k, b_v and b_o are all four given or none");
    if (bias) {
        tensor_check_shape("b_q", b_q, SHAPE(D));
        tensor_check_shape("b_k", b_k, SHAPE(kv_rows));
        tensor_check_shape("b_v", b_v, SHAPE(kv_rows));
        tensor_check_shape("b_o", b_o, SHAPE(D));
    }
    return layer_of(num_heads, num_kv_heads, 0.0f, params);
}

void multihead_free(MultiHeadAttention *layer)
{
    if (layer == NULL)
        return;
    TENSOR_FREE(layer->W_q, layer->W_k, layer->W_v, layer->W_o, layer->b_q, layer->b_k, layer->b_v,
                layer->b_o);
    free(layer);
}

/* Stops (die) unless queries (B, T, Dq), keys (B, K, Dk), values
 * (B, K, Dv) and valid_lens fit the layer, and dropout in training mode has
 * a generator to draw from. */
static void check_inputs(const MultiHeadAttention *layer, const Tensor *queries, const Tensor *keys,
                         const Tensor *values, const ValidLens *valid_lens, bool training,
                         const Rng *rng)
{
    tensor_check_shape("queries", queries, SHAPE(-1, -1, layer->query_size));
    const int B = queries->shape[0];
    tensor_check_shape("keys", keys, SHAPE(B, -1, layer->key_size));
    const int K = keys->shape[1];
    tensor_check_shape("values", values, SHAPE(B, K, layer->value_size));
    valid_lens_check(valid_lens, B, queries->shape[1], K);
    if (training && layer->dropout > 0.0f && rng == NULL)
        die("dropout in training mode needs a random generator, got NULL");
}

/* Stops (die) when the layer shares its key-value heads (G < H):
 * that layer has a forward of its own (attention_layer.h). */
static void check_all_kv_heads(const MultiHeadAttention *layer)
{
    if (layer->num_kv_heads != layer->num_heads)
        die("the layer shares %d key-value heads between %d query heads: run it with "
            "grouped_forward_cache (attention_layer.h)", layer->num_kv_heads, layer->num_heads);
}

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D), attention_weights (B, H, T, K).
 * Three passes, which the backward runs in reverse: pass 1 projects and
 * splits into heads, pass 2 attends, pass 3 merges the heads and mixes
 * them with W_o. */
Tensor *multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values,
                          const ValidLens *valid_lens, bool training, Rng *rng,
                          Tensor **attention_weights)
{
    check_all_kv_heads(layer);
    check_inputs(layer, queries, keys, values, valid_lens, training, rng);
    const int B = queries->shape[0], T = queries->shape[1], K = keys->shape[1];
    const int H = layer->num_heads;

    // pass 1, project: one linear layer each for queries, keys and values
    Tensor *q_proj = linear(queries, layer->W_q, layer->b_q);   /* (B, T, D) */
    Tensor *k_proj = linear(keys, layer->W_k, layer->b_k);      /* (B, K, D) */
    Tensor *v_proj = linear(values, layer->W_v, layer->b_v);    /* (B, K, D) */

    // pass 1, split into heads: head h of sequence b becomes row b*H + h,
    // a (T, d) or (K, d) matrix of its own
    Tensor *q_heads = transpose_qkv(q_proj, H);   /* (B*H, T, d) */
    Tensor *k_heads = transpose_qkv(k_proj, H);   /* (B*H, K, d) */
    Tensor *v_heads = transpose_qkv(v_proj, H);   /* (B*H, K, d) */
    TENSOR_FREE(q_proj, k_proj, v_proj);

    // pass 2, attend with the mask: every head on its own, so row b*H + h
    // takes sequence b's valid_lens. The keys now have d columns, so the
    // scores are divided by sqrt(d), the per-head size, and not by sqrt(D).
    ValidLens *head_lens = valid_lens_repeat_interleave(valid_lens, H);
    const Dropout drop = {layer->dropout, training, rng};
    Tensor *weights = NULL;   /* (B*H, T, K), after dropout, when asked for */
    Tensor *heads_out = dot_product_attention(q_heads, k_heads, v_heads, head_lens, &drop,
                                              attention_weights ? &weights : NULL);

    // pass 3, merge the heads: side by side again, as one (T, D) matrix per sequence
    Tensor *concat = transpose_output(heads_out, H);   /* (B, T, D) */

    // pass 3, W_o: mix the heads
    Tensor *output = linear(concat, layer->W_o, layer->b_o);   /* (B, T, D) */

    /* (B*H, T, K) and (B, H, T, K) are the same numbers in the same order,
     * because row b*H + h is head h of sequence b: a view. */
    if (attention_weights != NULL)
        *attention_weights = tensor_reshape(weights, SHAPE(B, H, T, K));
    valid_lens_free(head_lens);
    TENSOR_FREE(q_heads, k_heads, v_heads, heads_out, concat);
    return output;
}

void multihead_cache_inputs(const MultiHeadAttention *layer, const Tensor *queries,
                            const Tensor *keys, const Tensor *values, const ValidLens *valid_lens,
                            bool training, Rng *rng, MultiHeadCache *cache)
{
    check_inputs(layer, queries, keys, values, valid_lens, training, rng);
    *cache = (MultiHeadCache){.queries = queries, .keys = keys, .values = values,
                              .valid_lens = valid_lens};
}

/* multihead_forward's passes, with what the backward needs kept in cache:
 * queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D); cache: Q (B*H, T, d), K and V
 * (B*H, K, d), attention weights (B*H, T, K), concat (B, T, D) */
Tensor *multihead_forward_cache(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, bool training, Rng *rng,
                               MultiHeadCache *cache)
{
    check_all_kv_heads(layer);
    multihead_cache_inputs(layer, queries, keys, values, valid_lens, training, rng, cache);
    const int H = layer->num_heads;

    // pass 1: project, then give every head its own (T, d) or (K, d) matrix
    Tensor *q_proj = linear(queries, layer->W_q, layer->b_q);   /* (B, T, D) */
    Tensor *k_proj = linear(keys, layer->W_k, layer->b_k);      /* (B, K, D) */
    Tensor *v_proj = linear(values, layer->W_v, layer->b_v);    /* (B, K, D) */
    cache->Q = transpose_qkv(q_proj, H);                        /* (B*H, T, d) */
    cache->K = transpose_qkv(k_proj, H);                        /* (B*H, K, d) */
    cache->V = transpose_qkv(v_proj, H);                        /* (B*H, K, d) */
    TENSOR_FREE(q_proj, k_proj, v_proj);

    return multihead_attend(layer, training, rng, cache);      /* passes 2 and 3 */
}

/* Passes 2 and 3, kept: cache->Q (B*H, T, d), cache->K, cache->V (B*H, K, d)
 * -> output (B, T, D) */
Tensor *multihead_attend(const MultiHeadAttention *layer, bool training, Rng *rng,
                         MultiHeadCache *cache)
{
    const int H = layer->num_heads;

    // pass 2: every head attends on its own; row b*H + h needs sequence b's mask
    ValidLens *head_lens = valid_lens_repeat_interleave(cache->valid_lens, H);
    Dropout drop = {layer->dropout, training, rng};
    Tensor *heads_out = dot_product_attention_cache(cache->Q, cache->K, cache->V, head_lens,
                                                   &drop, &cache->attention);
    valid_lens_free(head_lens);

    // pass 3: put the heads side by side again and mix them with W_o
    cache->concat = transpose_output(heads_out, H);                    /* (B, T, D) */
    Tensor *output = linear(cache->concat, layer->W_o, layer->b_o);    /* (B, T, D) */
    tensor_free(heads_out);
    return output;
}

/* ---- backward -------------------------------------------------------------
 * The forward's three passes in reverse:
 *   pass 3 backwards: output = concat W_o^T + b_o      -> W_o, b_o, concat
 *                     concat = transpose_output(heads) -> heads (inverse map)
 *   pass 2 backwards: heads = attention(Q, K, V)       -> Q, K, V per head
 *   pass 1 backwards: Q = transpose_qkv(queries W_q^T + b_q), and K, V alike
 *                                                      -> W_*, b_*, inputs
 * Every step is a backward from the chapter that introduced its forward. */

MultiHeadGrads *multihead_grads_new(const MultiHeadAttention *layer)
{
    MultiHeadGrads *grads = checked_calloc(1, sizeof *grads);
    grads->W_q = tensor_zeros(layer->W_q->ndim, layer->W_q->shape);
    grads->W_k = tensor_zeros(layer->W_k->ndim, layer->W_k->shape);
    grads->W_v = tensor_zeros(layer->W_v->ndim, layer->W_v->shape);
    grads->W_o = tensor_zeros(layer->W_o->ndim, layer->W_o->shape);
    /* one gradient per bias the layer has (a layer read from files may
     * have some biases and not others) */
    const Tensor *biases[] = {layer->b_q, layer->b_k, layer->b_v, layer->b_o};
    Tensor **bias_grads[] = {&grads->b_q, &grads->b_k, &grads->b_v, &grads->b_o};
    for (int i = 0; i < 4; i++)
        *bias_grads[i] = biases[i] ? tensor_zeros(biases[i]->ndim, biases[i]->shape) : NULL;
    return grads;
}

void multihead_grads_zero(MultiHeadGrads *grads)
{
    Tensor *all[] = {grads->W_q, grads->W_k, grads->W_v, grads->W_o,
                     grads->b_q, grads->b_k, grads->b_v, grads->b_o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] != NULL)
            for (size_t j = 0; j < all[i]->size; j++)
                all[i]->data[j] = 0.0f;
}

void multihead_grads_free(MultiHeadGrads *grads)
{
    if (grads == NULL)
        return;
    TENSOR_FREE(grads->W_q, grads->W_k, grads->W_v, grads->W_o, grads->b_q, grads->b_k, grads->b_v,
                grads->b_o);
    free(grads);
}

/* grad_output (B, T, D) -> grads += dW_o, db_o; grad_concat (B, T, D);
 * d_Q (B*H, T, d), d_K, d_V (B*H, K, d) */
void multihead_attend_backward(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                               const Tensor *grad_output, MultiHeadGrads *grads,
                               Tensor **grad_concat, Tensor **d_Q, Tensor **d_K, Tensor **d_V)
{
    tensor_check_shape("grad_output", grad_output,
                       cache->concat->ndim, cache->concat->shape);

    // pass 3 backwards: dW_o += dO^T concat, db_o += column sums of dO,
    // d concat = dO W_o, then the heads' share of it, moved back per head
    Tensor *d_concat = linear_backward(cache->concat, layer->W_o, grad_output,
                                       grads ? grads->W_o : NULL,
                                       grads ? grads->b_o : NULL);          /* (B, T, D) */
    Tensor *d_heads = transpose_output_backward(d_concat, layer->num_heads);   /* (B*H, T, d) */
    tensor_keep_or_free(d_concat, grad_concat);

    // pass 2 backwards: every head on its own, with the weights and the
    // dropout mask its forward kept
    dot_product_attention_backward(cache->Q, cache->K, cache->V, &cache->attention, d_heads,
                                   d_Q, d_K, d_V);
    tensor_free(d_heads);
}

/* Pass 1 backwards for one projection: x (B, n, Din), weight (D, Din),
 * grad_heads (B*H, n, d) -> grad_x (B, n, Din) into *grad_x when not NULL;
 * grad_weight (D, Din) and grad_bias (D,) added to when not NULL. */
static void projection_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_heads,
                                int num_heads, Tensor *grad_weight, Tensor *grad_bias,
                                Tensor **grad_x)
{
    Tensor *grad_proj = transpose_qkv_backward(grad_heads, num_heads);   /* (B, n, D) */
    Tensor *grad_input = linear_backward(x, weight, grad_proj, grad_weight, grad_bias);
    tensor_free(grad_proj);
    tensor_keep_or_free(grad_input, grad_x);
}

/* grad_output (B, T, D) -> grads += dW_*, db_*; grad_queries (B, T, Dq),
 * grad_keys (B, K, Dk), grad_values (B, K, Dv), grad_concat (B, T, D) */
void multihead_backward(const MultiHeadAttention *layer, const MultiHeadCache *cache,
                        const Tensor *grad_output, MultiHeadGrads *grads,
                        Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                        Tensor **grad_concat)
{
    const int H = layer->num_heads;
    MultiHeadGrads none = {0};   /* grads NULL: only input gradients wanted */
    const MultiHeadGrads *g = grads != NULL ? grads : &none;

    // passes 3 and 2 backwards: W_o, then the attention of every head
    Tensor *d_Q = NULL, *d_K = NULL, *d_V = NULL;
    multihead_attend_backward(layer, cache, grad_output, grads, grad_concat, &d_Q, &d_K, &d_V);

    // pass 1 backwards: merge the heads' gradients and go back through the
    // projections. b_k's gradient is the column sum of d_K, which is 0
    // up to rounding: chapter 05 says why.
    projection_backward(cache->queries, layer->W_q, d_Q, H, g->W_q, g->b_q, grad_queries);
    projection_backward(cache->keys, layer->W_k, d_K, H, g->W_k, g->b_k, grad_keys);
    projection_backward(cache->values, layer->W_v, d_V, H, g->W_v, g->b_v, grad_values);
    TENSOR_FREE(d_Q, d_K, d_V);
}

void multihead_cache_free(MultiHeadCache *cache)
{
    if (cache == NULL)
        return;
    TENSOR_FREE(cache->Q, cache->K, cache->V, cache->concat);
    attention_cache_free(&cache->attention);
    cache->Q = cache->K = cache->V = cache->concat = NULL;
}
