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

MultiHeadAttention *multihead_new(int query_size, int key_size, int value_size,
                                  int num_hiddens, int num_heads, float dropout,
                                  bool bias, Rng *rng)
{
    const char *func = "multihead_new";
    if (query_size < 1 || key_size < 1 || value_size < 1 || num_hiddens < 1)
        die(func, "sizes must be positive: query_size %d, key_size %d, value_size %d, "
            "num_hiddens %d", query_size, key_size, value_size, num_hiddens);
    if (num_heads < 1)
        die(func, "num_heads must be at least 1, got %d", num_heads);
    if (num_hiddens % num_heads != 0)
        die(func, "num_hiddens %d does not divide by num_heads %d: every head needs "
            "the same size num_hiddens / num_heads", num_hiddens, num_heads);
    if (!(dropout >= 0.0f && dropout < 1.0f))
        die(func, "dropout must be in [0, 1), got %g", (double)dropout);

    MultiHeadAttention *layer = checked_calloc(func, 1, sizeof *layer);
    layer->query_size = query_size;
    layer->key_size = key_size;
    layer->value_size = value_size;
    layer->num_hiddens = num_hiddens;
    layer->num_heads = num_heads;
    layer->dropout = dropout;
    layer->bias = bias;

    /* Drawn in a fixed order, each weight followed by its bias, so a seed
     * names one layer. The bias bound uses the weight's fan_in, as
     * nn.Linear.reset_parameters does. */
    const int D = num_hiddens;
    layer->W_q = init_uniform(rng, D, query_size, false);
    layer->b_q = bias ? init_uniform(rng, D, query_size, true) : NULL;
    layer->W_k = init_uniform(rng, D, key_size, false);
    layer->b_k = bias ? init_uniform(rng, D, key_size, true) : NULL;
    layer->W_v = init_uniform(rng, D, value_size, false);
    layer->b_v = bias ? init_uniform(rng, D, value_size, true) : NULL;
    layer->W_o = init_uniform(rng, D, D, false);
    layer->b_o = bias ? init_uniform(rng, D, D, true) : NULL;
    return layer;
}

void multihead_free(MultiHeadAttention *layer)
{
    if (layer == NULL)
        return;
    tensor_free(layer->W_q);
    tensor_free(layer->W_k);
    tensor_free(layer->W_v);
    tensor_free(layer->W_o);
    tensor_free(layer->b_q);
    tensor_free(layer->b_k);
    tensor_free(layer->b_v);
    tensor_free(layer->b_o);
    free(layer);
}

/* queries (B, T, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens NULL,
 * (B,) or (B, T) -> output (B, T, D), attention_weights (B, H, T, K) */
Tensor *multihead_forward(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values,
                          const ValidLens *valid_lens, bool training, Rng *rng,
                          Tensor **attention_weights)
{
    const char *func = "multihead_forward";
    const int H = layer->num_heads;
    tensor_check_shape(func, "queries", queries, SHAPE(-1, -1, layer->query_size));
    const int B = queries->shape[0], T = queries->shape[1];
    tensor_check_shape(func, "keys", keys, SHAPE(B, -1, layer->key_size));
    const int K = keys->shape[1];
    tensor_check_shape(func, "values", values, SHAPE(B, K, layer->value_size));
    valid_lens_check(func, valid_lens, B, T, K);
    if (training && layer->dropout > 0.0f && rng == NULL)
        die(func, "dropout in training mode needs a random generator, got NULL");

    // pass 1: project, then give every head its own (T, d) or (K, d) matrix
    Tensor *q_proj = linear(queries, layer->W_q, layer->b_q);   /* (B, T, D) */
    Tensor *k_proj = linear(keys, layer->W_k, layer->b_k);      /* (B, K, D) */
    Tensor *v_proj = linear(values, layer->W_v, layer->b_v);    /* (B, K, D) */
    Tensor *q_heads = transpose_qkv(q_proj, H);                 /* (B*H, T, d) */
    Tensor *k_heads = transpose_qkv(k_proj, H);                 /* (B*H, K, d) */
    Tensor *v_heads = transpose_qkv(v_proj, H);                 /* (B*H, K, d) */
    tensor_free(q_proj);
    tensor_free(k_proj);
    tensor_free(v_proj);

    // pass 2: every head attends on its own; row b*H + h needs sequence b's mask
    ValidLens *head_lens = valid_lens_repeat_interleave(valid_lens, H);
    Dropout drop = {layer->dropout, training, rng};
    Tensor *weights = NULL;
    /* The keys now have d columns, so dot_product_attention divides the
     * scores by sqrt(d), the per-head size, and not by sqrt(D). */
    Tensor *heads_out = dot_product_attention(q_heads, k_heads, v_heads, head_lens, &drop,
                                              attention_weights ? &weights : NULL);
    valid_lens_free(head_lens);
    tensor_free(q_heads);
    tensor_free(k_heads);
    tensor_free(v_heads);

    // pass 3: put the heads side by side again and mix them with W_o
    Tensor *concat = transpose_output(heads_out, H);            /* (B, T, D) */
    Tensor *output = linear(concat, layer->W_o, layer->b_o);    /* (B, T, D) */
    tensor_free(heads_out);
    tensor_free(concat);

    if (attention_weights != NULL) {
        /* (B*H, T, K) and (B, H, T, K) are the same numbers in the same
         * order, because row b*H + h is head h of sequence b: a view. */
        *attention_weights = tensor_reshape(weights, SHAPE(B, H, T, K));
    }
    return output;
}
