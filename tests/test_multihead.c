/*
 * test_multihead.c - the multi-head attention layer of chapter 05
 * (common/multihead.c) against PyTorch 1.13 and against values worked by
 * hand, and the chapter's programs.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * The PyTorch references are in tests/fixtures/multihead/<case>/, made by
 * tests/fixtures/make_multihead_fixtures.py (its README lists the cases).
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention.h"
#include "attention_layer.h"
#include "heads.h"
#include "helpers.h"
#include "run/layer_files.h"
#include "io/npy.h"
#include "multihead.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

#define FIXTURES "tests/fixtures/multihead"

/* ---- reading a fixture ------------------------------------------------------- */

static Tensor *load_or_null(const char *dir, const char *name)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (access(path, F_OK) != 0)
        return NULL;
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert(x, "%s", err);
    return x;
}

static Tensor *load_required(const char *dir, const char *name)
{
    Tensor *x = load_or_null(dir, name);
    cr_assert(x, "%s/%s.npy is missing", dir, name);
    return x;
}

/* A fixture: the layer and inputs as multihead --from reads them
 * (common/run/layer_files.h), and PyTorch's results. */
typedef struct {
    LayerFiles files;
    Tensor *queries, *keys, *values, *expected_output, *expected_weights;
    ValidLens *valid_lens;
} Fixture;

static Fixture fixture_load(const char *name, int num_heads)
{
    char dir[256], err[LAYER_FILES_ERR_LEN];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    Fixture f;
    cr_assert_eq(layer_files_load(dir, num_heads, &f.files, err, sizeof err), 0, "%s", err);
    f.queries = f.files.queries;
    f.keys = f.files.keys;
    f.values = f.files.values;
    f.valid_lens = f.files.valid_lens;
    f.expected_output = load_required(dir, "expected_output");
    f.expected_weights = load_required(dir, "expected_attention_weights");
    return f;
}

static void fixture_free(Fixture *f)
{
    layer_files_free(&f->files);
    tensor_free(f->expected_output);
    tensor_free(f->expected_weights);
}

/* The layer on a fixture's inputs gives PyTorch's output and per-head
 * weights within 1e-5 (float32 sums in another order differ by ~1e-7). */
static void check_against_pytorch(const char *name, int num_heads)
{
    Fixture f = fixture_load(name, num_heads);
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(&f.files.layer, f.queries, f.keys, f.values, f.valid_lens,
                                       false, NULL, &weights);
    cr_expect(tensor_allclose(output, f.expected_output, 1e-5f, 1e-5f, stderr),
              "%s: output differs from PyTorch", name);
    cr_expect(tensor_allclose(weights, f.expected_weights, 1e-5f, 1e-5f, stderr),
              "%s: per-head attention weights differ from PyTorch", name);
    tensor_free(output);
    tensor_free(weights);
    fixture_free(&f);
}

Test(multihead_pytorch, self_attention_with_biases_no_mask) { check_against_pytorch("self_bias_nomask", 2); }
Test(multihead_pytorch, no_biases_1d_valid_lens)  { check_against_pytorch("nobias_1d", 3); }
Test(multihead_pytorch, biases_2d_valid_lens)     { check_against_pytorch("bias_2d", 4); }
Test(multihead_pytorch, cross_attention_kdim_vdim) { check_against_pytorch("cross_kdim_vdim", 4); }
Test(multihead_pytorch, one_head_2d_valid_lens)   { check_against_pytorch("one_head_2d", 1); }
Test(multihead_pytorch, d2l_toy_sizes_random_inputs) { check_against_pytorch("d2l_toy", 5); }
Test(multihead_pytorch, separate_query_key_value_sizes) { check_against_pytorch("query_size", 2); }

Test(multihead_pytorch, fixtures_are_not_trivial)
{
    /* References that a broken layer could match by accident are no test:
     * inputs not all equal, heads that attend differently, masks in use. */
    Fixture f = fixture_load("bias_2d", 4);
    float low = f.queries->data[0], high = f.queries->data[0];
    for (size_t i = 0; i < f.queries->size; i++) {
        low = fminf(low, f.queries->data[i]);
        high = fmaxf(high, f.queries->data[i]);
    }
    cr_expect_gt(high - low, 1.0f);
    /* head 0 and head 1 of sequence 0, query 2 put their weight differently */
    float diff = 0.0f;
    for (int j = 0; j < 5; j++)
        diff += fabsf(AT4(f.expected_weights, 0, 0, 2, j) - AT4(f.expected_weights, 0, 1, 2, j));
    cr_expect_gt(diff, 0.2f);
    /* valid_lens[0, 0] = 1: all weight on key 0 */
    cr_expect_float_eq(AT4(f.expected_weights, 0, 3, 0, 0), 1.0f, 1e-6f);
    fixture_free(&f);
}

/* ---- worked by hand ------------------------------------------------------------ */

/* Identity projections, D = 4, H = 2, d = 2, one query, two keys:
 *   query (2, 0 | 0, 4), key 0 (1, 0 | 0, 0), key 1 (0, 0 | 0, 1)
 *   values (1, 2 | 3, 4) and (5, 6 | 7, 8)
 * head 0 scores (2, 0) / sqrt(2) -> weights (0.804430, 0.195570)
 * head 1 scores (0, 4) / sqrt(2) -> weights (0.055807, 0.944193)
 * output = (w0 (1, 2) + w1 (5, 6) | w0' (3, 4) + w1' (7, 8))
 * Dividing by sqrt(D) = 2 instead would give head 0 (0.731059, 0.268941)
 * and output (2.0758, 3.0758, 6.5232, 7.5232): far outside the tolerance. */
static MultiHeadAttention *identity_layer(void)
{
    MultiHeadAttention *layer = calloc(1, sizeof *layer);
    layer->query_size = layer->key_size = layer->value_size = layer->num_hiddens = 4;
    layer->num_heads = 2;
    layer->num_kv_heads = 2;
    static const float eye[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    layer->W_q = tensor_from(eye, SHAPE(4, 4));
    layer->W_k = tensor_from(eye, SHAPE(4, 4));
    layer->W_v = tensor_from(eye, SHAPE(4, 4));
    layer->W_o = tensor_from(eye, SHAPE(4, 4));
    return layer;
}

Test(multihead, scores_are_scaled_by_the_head_size)
{
    MultiHeadAttention *layer = identity_layer();
    Tensor *queries = tensor_from((const float[]){2, 0, 0, 4}, SHAPE(1, 1, 4));
    Tensor *keys = tensor_from((const float[]){1, 0, 0, 0, 0, 0, 0, 1}, SHAPE(1, 2, 4));
    Tensor *values = tensor_from((const float[]){1, 2, 3, 4, 5, 6, 7, 8}, SHAPE(1, 2, 4));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, queries, keys, values, NULL, false, NULL, &weights);

    Tensor *expected_weights = tensor_from(
        (const float[]){0.80442968f, 0.19557032f, 0.05580722f, 0.94419278f}, SHAPE(1, 2, 1, 2));
    Tensor *expected_output = tensor_from(
        (const float[]){1.78228127f, 2.78228127f, 6.77677112f, 7.77677112f}, SHAPE(1, 1, 4));
    expect_close(weights, expected_weights, 1e-6f, 1e-5f);
    expect_close(output, expected_output, 1e-5f, 1e-5f);
    /* and clearly not the sqrt(num_hiddens) answer */
    cr_expect_gt(fabsf(AT4(weights, 0, 0, 0, 0) - 0.73105858f), 0.05f);

    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    tensor_free(weights);
    tensor_free(output);
    tensor_free(expected_weights);
    tensor_free(expected_output);
    multihead_free(layer);
}

/* ---- against a head-by-head computation ------------------------------------------- */

/* Rows [r0, r0 + n) of a 2-D tensor, or entries of a 1-D one. */
static Tensor *rows_of(const Tensor *x, int r0, int n)
{
    if (x->ndim == 1)
        return tensor_from(x->data + r0, SHAPE(n));
    return tensor_from(x->data + (size_t)r0 * x->shape[1], SHAPE(n, x->shape[1]));
}

/* Columns [c0, c0 + n) of a 2-D tensor. */
static Tensor *columns_of(const Tensor *x, int c0, int n)
{
    Tensor *out = tensor_zeros(SHAPE(x->shape[0], n));
    for (int i = 0; i < x->shape[0]; i++)
        for (int j = 0; j < n; j++)
            AT2(out, i, j) = AT2(x, i, c0 + j);
    return out;
}

Test(multihead, equals_a_loop_over_heads)
{
    /* Each head computed on its own, with its own slices of the weights and
     * no transpose_qkv at all: y = sum_h head_h W_o[:, h]^T + b_o. */
    enum { B = 2, T = 3, K = 5, Dq = 6, Dk = 4, Dv = 7, D = 12, H = 3, d = D / H };
    Rng rng = rng_new(21);
    MultiHeadAttention *layer = multihead_new(Dq, Dk, Dv, D, H, 0.0f, true, &rng);
    Tensor *queries = tensor_normal(&rng, 0.0f, 2.0f, SHAPE(B, T, Dq));
    Tensor *keys = tensor_normal(&rng, 0.0f, 2.0f, SHAPE(B, K, Dk));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, Dv));
    ValidLens *valid_lens = valid_lens_1d((const int[]){3, 5}, B);
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, queries, keys, values, valid_lens, false, NULL,
                                       &weights);
    cr_assert(tensor_has_shape(output, SHAPE(B, T, D)));
    cr_assert(tensor_has_shape(weights, SHAPE(B, H, T, K)));

    Tensor *expected = tensor_zeros(SHAPE(B, T, D));
    for (int i = 0; i < (int)expected->size; i++)
        expected->data[i] = layer->b_o->data[i % D];
    for (int h = 0; h < H; h++) {
        Tensor *Wq = rows_of(layer->W_q, h * d, d), *bq = rows_of(layer->b_q, h * d, d);
        Tensor *Wk = rows_of(layer->W_k, h * d, d), *bk = rows_of(layer->b_k, h * d, d);
        Tensor *Wv = rows_of(layer->W_v, h * d, d), *bv = rows_of(layer->b_v, h * d, d);
        Tensor *Wo = columns_of(layer->W_o, h * d, d);
        Tensor *q = linear(queries, Wq, bq), *k = linear(keys, Wk, bk), *v = linear(values, Wv, bv);
        Tensor *head_weights = NULL;
        Tensor *head = dot_product_attention(q, k, v, valid_lens, NULL, &head_weights);
        Tensor *contribution = linear(head, Wo, NULL);
        for (size_t i = 0; i < expected->size; i++)
            expected->data[i] += contribution->data[i];
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < K; j++)
                    cr_expect(fabsf(AT4(weights, b, h, t, j) - AT3(head_weights, b, t, j)) < 1e-6f,
                              "weights[%d, %d, %d, %d] = %g, head by head %g", b, h, t, j,
                              (double)AT4(weights, b, h, t, j), (double)AT3(head_weights, b, t, j));
        Tensor *all[] = {Wq, bq, Wk, bk, Wv, bv, Wo, q, k, v, head_weights, head, contribution};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tensor_free(all[i]);
    }
    expect_close(output, expected, 1e-5f, 1e-5f);
    /* masked keys get exactly zero weight: sequence 0 has 3 valid keys */
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++)
            for (int j = 3; j < K; j++)
                cr_expect_eq(AT4(weights, 0, h, t, j), 0.0f);

    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    tensor_free(weights);
    tensor_free(output);
    tensor_free(expected);
    valid_lens_free(valid_lens);
    multihead_free(layer);
}

Test(multihead, a_query_with_no_key_gives_the_output_bias)
{
    /* valid_len 0: all-zero weights, so every head outputs 0 and the layer
     * outputs W_o 0 + b_o = b_o exactly. */
    Rng rng = rng_new(5);
    MultiHeadAttention *layer = multihead_new(4, 4, 4, 8, 2, 0.0f, true, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 2, 4));
    ValidLens *valid_lens = valid_lens_2d((const int[]){0, 2}, 1, 2);
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, x, x, x, valid_lens, false, NULL, &weights);
    for (int j = 0; j < 8; j++)
        cr_expect_eq(AT3(output, 0, 0, j), layer->b_o->data[j], "output[0, 0, %d]", j);
    for (int h = 0; h < 2; h++) {
        cr_expect_eq(AT4(weights, 0, h, 0, 0) + AT4(weights, 0, h, 0, 1), 0.0f);
        cr_expect_float_eq(AT4(weights, 0, h, 1, 0) + AT4(weights, 0, h, 1, 1), 1.0f, 1e-6f);
    }
    tensor_free(x);
    tensor_free(weights);
    tensor_free(output);
    valid_lens_free(valid_lens);
    multihead_free(layer);
}

Test(multihead, dropout_acts_in_training_only)
{
    Rng rng = rng_new(8);
    MultiHeadAttention *layer = multihead_new(8, 8, 8, 8, 2, 0.5f, false, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 6, 8));
    Tensor *eval_weights = NULL, *train_weights = NULL, *again_weights = NULL;
    Tensor *eval = multihead_forward(layer, x, x, x, NULL, false, &rng, &eval_weights);
    Tensor *again = multihead_forward(layer, x, x, x, NULL, false, NULL, &again_weights);
    Tensor *train = multihead_forward(layer, x, x, x, NULL, true, &rng, &train_weights);
    /* evaluation: deterministic, no generator needed */
    cr_expect(tensor_allclose(again, eval, 0.0f, 0.0f, stderr));
    /* training: each weight dropped to 0 or scaled by 1 / (1 - p) = 2 */
    int dropped = 0;
    for (size_t i = 0; i < eval_weights->size; i++) {
        float w = eval_weights->data[i], tw = train_weights->data[i];
        cr_expect(tw == 0.0f || fabsf(tw - 2.0f * w) <= 1e-6f, "weight %zu: %g, eval %g", i,
                  (double)tw, (double)w);
        dropped += tw == 0.0f;
    }
    /* 144 weights, p = 0.5: far from none and far from all */
    cr_expect(dropped > 36 && dropped < 108, "%d of %zu dropped", dropped, eval_weights->size);
    cr_expect_gt(tensor_max_abs_diff(train, eval), 1e-3f);
    Tensor *all[] = {x, eval_weights, train_weights, again_weights, eval, again, train};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    multihead_free(layer);
}

Test(multihead, training_without_dropout_needs_no_rng_and_equals_eval)
{
    /* Dropout 0 in training mode keeps every weight and scales by 1: the
     * layer must equal evaluation mode exactly, and draw nothing, so a NULL
     * generator is fine (dropout_inplace returns before asking for one). */
    Rng rng = rng_new(21);
    MultiHeadAttention *layer = multihead_new(6, 6, 6, 6, 3, 0.0f, true, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.5f, SHAPE(2, 5, 6));
    ValidLens *valid_lens = valid_lens_1d((const int[]){4, 0}, 2);
    Tensor *eval_weights = NULL, *train_weights = NULL;
    Tensor *eval = multihead_forward(layer, x, x, x, valid_lens, false, NULL, &eval_weights);
    Tensor *train = multihead_forward(layer, x, x, x, valid_lens, true, NULL, &train_weights);
    cr_expect(tensor_allclose(train, eval, 0.0f, 0.0f, stderr));
    cr_expect(tensor_allclose(train_weights, eval_weights, 0.0f, 0.0f, stderr));
    /* not a vacuous comparison: the rows with keys are not all alike */
    cr_expect_gt(fabsf(AT3(eval, 0, 0, 0) - AT3(eval, 0, 1, 0)), 1e-4f);
    Tensor *all[] = {x, eval_weights, train_weights, eval, train};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    valid_lens_free(valid_lens);
    multihead_free(layer);
}

/* ---- initialisation ------------------------------------------------------------- */

Test(multihead, init_follows_nn_linear_default)
{
    Rng rng = rng_new(3);
    MultiHeadAttention *layer = multihead_new(16, 36, 64, 48, 4, 0.1f, true, &rng);
    cr_assert(tensor_has_shape(layer->W_q, SHAPE(48, 16)));
    cr_assert(tensor_has_shape(layer->W_k, SHAPE(48, 36)));
    cr_assert(tensor_has_shape(layer->W_v, SHAPE(48, 64)));
    cr_assert(tensor_has_shape(layer->W_o, SHAPE(48, 48)));
    const Tensor *params[] = {layer->W_q, layer->b_q, layer->W_k, layer->b_k,
                              layer->W_v, layer->b_v, layer->W_o, layer->b_o};
    const int fan_in[] = {16, 16, 36, 36, 64, 64, 48, 48};
    for (int p = 0; p < 8; p++) {
        const Tensor *x = params[p];
        cr_assert(x != NULL, "parameter %d missing", p);
        if (p % 2 == 1)
            cr_expect(tensor_has_shape(x, SHAPE(48)), "bias %d shape", p);
        const double bound = 1.0 / sqrt((double)fan_in[p]);
        double sum = 0.0;
        float largest = 0.0f;
        for (size_t i = 0; i < x->size; i++) {
            cr_expect(x->data[i] >= -bound && x->data[i] < bound, "param %d value %g, bound %g",
                      p, (double)x->data[i], bound);
            sum += x->data[i];
            largest = fmaxf(largest, fabsf(x->data[i]));
        }
        /* uniform on [-bound, bound): mean 0 (std of the mean bound / sqrt(3 n)),
         * and the largest of n draws lands near the bound */
        cr_expect(fabs(sum / (double)x->size) < 4.0 * bound / sqrt(3.0 * (double)x->size),
                  "param %d mean %g", p, sum / (double)x->size);
        cr_expect_gt(largest, 0.85 * bound, "param %d largest %g of bound %g", p,
                     (double)largest, bound);
    }
    cr_expect_eq(layer->num_heads, 4);
    cr_expect_float_eq(layer->dropout, 0.1f, 1e-7f);
    multihead_free(layer);
}

Test(multihead, init_is_reproducible_and_bias_optional)
{
    Rng a = rng_new(9), b = rng_new(9), c = rng_new(10);
    MultiHeadAttention *la = multihead_new(8, 8, 8, 8, 2, 0.0f, false, &a);
    MultiHeadAttention *lb = multihead_new(8, 8, 8, 8, 2, 0.0f, false, &b);
    MultiHeadAttention *lc = multihead_new(8, 8, 8, 8, 2, 0.0f, false, &c);
    cr_expect(tensor_allclose(la->W_o, lb->W_o, 0.0f, 0.0f, stderr));
    cr_expect(!tensor_allclose(la->W_o, lc->W_o, 0.0f, 0.0f, NULL));
    cr_expect_null(la->b_q);
    cr_expect_null(la->b_o);
    cr_expect(!la->bias);
    multihead_free(la);
    multihead_free(lb);
    multihead_free(lc);
}

static void layer_of_10_hiddens_3_heads(void)
{
    Rng rng = rng_new(0);
    multihead_new(10, 10, 10, 10, 3, 0.0f, false, &rng);
}

Test(multihead, hiddens_must_divide_by_heads)
{
    expect_stops_with(layer_of_10_hiddens_3_heads,
                      "head_size: num_hiddens 10 does not divide by num_heads 3: every head "
                      "needs the same size\n");
}

/* Kept in statics: still reachable when the expected error stops the child. */
static MultiHeadAttention *kept_layer;
static Tensor *kept_x;

/* The parameters of layer in the order multihead_from_weights takes them. */
#define PARAMS_OF(layer) \
    (Tensor *[]){(layer)->W_q, (layer)->W_k, (layer)->W_v, (layer)->W_o, \
                 (layer)->b_q, (layer)->b_k, (layer)->b_v, (layer)->b_o}

/* A layer around given weights (what the loaders build) is the layer the
 * weights came from: its sizes read from their shapes, the same tensors
 * borrowed, the same output; grouped too. */
Test(multihead, from_weights_is_the_layer_of_those_weights)
{
    Rng rng = rng_new(17);
    MultiHeadAttention *drawn = multihead_new_grouped(3, 5, 7, 12, 4, 2, 0.0f, true, &rng);
    const MultiHeadAttention around = multihead_from_weights(4, 2, PARAMS_OF(drawn));
    cr_expect(around.query_size == 3 && around.key_size == 5 && around.value_size == 7);
    cr_expect(around.num_hiddens == 12 && around.num_heads == 4 && around.num_kv_heads == 2);
    cr_expect(around.bias && around.dropout == 0.0f);
    cr_expect(around.W_q == drawn->W_q && around.W_v == drawn->W_v && around.b_o == drawn->b_o,
              "the layer borrows the tensors given");
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 3, 3));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 4, 5));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 4, 7));
    MultiHeadCache drawn_cache = {0}, around_cache = {0};   /* grouped: attention_layer.h's layer */
    Tensor *expected = grouped_forward_cache(drawn, queries, keys, values, NULL, false, NULL,
                                             &drawn_cache);
    Tensor *actual = grouped_forward_cache(&around, queries, keys, values, NULL, false, NULL,
                                           &around_cache);
    cr_expect(tensor_allclose(actual, expected, 0.0f, 0.0f, NULL));
    multihead_cache_free(&drawn_cache);
    multihead_cache_free(&around_cache);
    TENSOR_FREE(queries, keys, values, expected, actual);
    multihead_free(drawn);

    MultiHeadAttention *no_bias = multihead_new(4, 4, 4, 8, 2, 0.0f, false, &rng);
    const MultiHeadAttention plain = multihead_from_weights(2, 2, PARAMS_OF(no_bias));
    cr_expect(!plain.bias && plain.b_q == NULL && plain.num_kv_heads == 2);
    multihead_free(no_bias);
}

static void weights_of_10_hiddens_as_3_heads(void)
{
    Rng rng = rng_new(0);
    kept_layer = multihead_new(10, 10, 10, 10, 2, 0.0f, false, &rng);
    multihead_from_weights(3, 3, PARAMS_OF(kept_layer));
}

/* The same check and the same message as multihead_new (heads_split) */
Test(multihead, from_weights_stops_when_the_heads_do_not_split)
{
    expect_stops_with(weights_of_10_hiddens_as_3_heads,
                      "head_size: num_hiddens 10 does not divide by num_heads 3: "
                      "every head needs the same size\n");
}

static void training_dropout_without_rng(void)
{
    Rng rng = rng_new(0);
    kept_layer = multihead_new(4, 4, 4, 4, 2, 0.25f, false, &rng);
    kept_x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 3, 4));
    multihead_forward(kept_layer, kept_x, kept_x, kept_x, NULL, true, NULL, NULL);
}

Test(multihead, training_with_dropout_needs_an_rng)
{
    expect_stops_with(training_dropout_without_rng,
                      "check_inputs: dropout in training mode needs a random generator, "
                      "got NULL\n");
}

/* ---- the chapter's programs -------------------------------------------------------- */

/* A fresh directory under /tmp; the caller removes it with remove_dir. */
static void make_temp_dir(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/attn_mh_XXXXXX");
    cr_assert(mkdtemp(buf), "mkdtemp failed");
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

static bool exists(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void copy_fixture(const char *name, const char *to)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cp %s/%s/*.npy '%s'/", FIXTURES, name, to);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The number printed right after the first label in text; NAN when the
 * label is missing. The programs' tests read numbers this way, so that
 * rewording a sentence around a number breaks no test. */
static double number_after(const char *text, const char *label)
{
    const char *p = text ? strstr(text, label) : NULL;
    return p ? strtod(p + strlen(label), NULL) : NAN;
}

Test(multihead_program, runs_d2l_check_with_defaults)
{
    RunResult r = run_program("05_multihead/multihead", "");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect_str_eq(r.err, "");
    cr_expect_float_eq(number_after(r.out, "sqrt(20) = "), 4.4721, 1e-9);
    /* Part 2, all-ones: every row equal within a sequence, and across
     * sequences up to the rounding of averages of 3 and of 2 copies */
    cr_expect_eq(number_after(r.out, "output rows: "), 0.0);
    cr_expect_leq(number_after(r.out, " within a sequence, "), 2e-7);
    /* Part 3: exactly no weight on masked keys */
    cr_expect_eq(number_after(r.out, "heads: "), 0.0);
    /* all-ones: uniform weights over sequence 0's three valid keys */
    cr_expect(strstr(r.out, "[[[0.3333, 0.3333, 0.3333, 0.0000, 0.0000, 0.0000],"));
    run_result_free(&r);
}

Test(multihead_program, all_ones_rows_are_measured)
{
    /* evaluation, sequence 0 with no key: its rows are W_o 0 = 0 (no biases) */
    RunResult r = run_program("05_multihead/multihead", "--valid-lens 0,2");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect_eq(number_after(r.out, "largest |entry|: "), 0.0, "%s", r.out);
    run_result_free(&r);

    /* with biases the empty rows are exactly b_o */
    r = run_program("05_multihead/multihead", "--valid-lens 0,2 --bias");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect_eq(number_after(r.out, "largest difference from b_o: "), 0.0, "%s", r.out);
    run_result_free(&r);

    /* training: dropout pulls the rows apart, evaluation would not */
    r = run_program("05_multihead/multihead", "--train");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect_gt(number_after(r.out, "by up to "), 1e-3, "%s", r.out);
    cr_expect_leq(number_after(r.out, "same inputs) by "), 2e-7, "%s", r.out);
    run_result_free(&r);

    /* training with dropout 0: nothing is dropped, every row is equal */
    r = run_program("05_multihead/multihead", "--train --dropout 0");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect_eq(number_after(r.out, "output rows: "), 0.0, "%s", r.out);
    run_result_free(&r);
}

/* "largest difference between two output rows" is over every pair of rows:
 * with D = 4 the program prints whole rows, so the test recomputes both
 * numbers from them (to the 4 decimals printed), in Part 2 with dropout and
 * in Part 3; the rows of two sequences are not only compared with the first
 * row of the batch. "differ by up to" is the larger of the two. */
Test(multihead_program, row_differences_are_over_every_pair)
{
    enum { B = 2, T = 4, D = 4 };
    RunResult r = run_program("05_multihead/multihead", "--hiddens 4 --heads 2 --train");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    const char *line = r.out;
    for (int part = 0; part < 2; part++) {
        double rows[B * T * D];
        cr_assert_eq(tensor_numbers_in(r.out, "output[:, :, :6]", part, rows, B * T * D),
                     B * T * D, "%s", r.out);
        double within = 0.0, across = 0.0;
        for (int a = 0; a < B * T; a++)
            for (int b = 0; b < B * T; b++)
                for (int j = 0; j < D; j++) {
                    const double gap = fabs(rows[a * D + j] - rows[b * D + j]);
                    if (a / T == b / T)
                        within = fmax(within, gap);
                    else
                        across = fmax(across, gap);
                }
        line = strstr(line, "largest difference between two output rows: ");
        cr_assert_not_null(line, "%s", r.out);
        double printed_within, printed_across;
        cr_assert_eq(sscanf(line, "largest difference between two output rows: %lf within a "
                            "sequence, %lf across sequences", &printed_within, &printed_across),
                     2, "%s", line);
        /* %.4g keeps 4 significant digits: 1.127 stands for 1.1265 to 1.1275 */
        cr_expect_float_eq(printed_within, within, 2e-4 + 5e-4 * within, "part %d: %s",
                           part + 2, line);
        cr_expect_float_eq(printed_across, across, 2e-4 + 5e-4 * across, "part %d: %s",
                           part + 2, line);
        if (part == 0)
            cr_expect_float_eq(number_after(r.out, "differ by up to "), fmax(within, across),
                               2e-4, "%s", r.out);
        line++;
    }
    run_result_free(&r);
}

Test(multihead_program, a_sequence_with_no_key_outputs_the_bias)
{
    /* Part 3 on random inputs, written with --to: sequence 0 has valid_len
     * 0, so every row of its output is exactly b_o */
    char dir[64], args[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args, "--valid-lens 0,3 --bias --to %s", dir);
    RunResult r = run_program("05_multihead/multihead", args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    Tensor *output = load_required(dir, "output"), *b_o = load_required(dir, "b_o");
    Tensor *weights = load_required(dir, "attention_weights");
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 100; j++)
            cr_expect_eq(AT3(output, 0, t, j), b_o->data[j], "row %d, column %d", t, j);
    /* and its weights are all zero, sequence 1's rows sum to 1 */
    float zero = 0.0f, one = 0.0f;
    for (int j = 0; j < 6; j++) {
        zero += fabsf(AT4(weights, 0, 2, 1, j));
        one += AT4(weights, 1, 2, 1, j);
    }
    cr_expect_eq(zero, 0.0f);
    cr_expect_float_eq(one, 1.0f, 1e-6f);
    tensor_free(output);
    tensor_free(b_o);
    tensor_free(weights);
    run_result_free(&r);
    remove_dir(dir);
}

Test(multihead_program, from_and_to_match_pytorch)
{
    static const struct { const char *name; int heads; } cases[] = {
        {"cross_kdim_vdim", 4}, {"bias_2d", 4}, {"query_size", 2}, {"d2l_toy", 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char out_dir[64], args[512], fixture[256];
        make_temp_dir(out_dir, sizeof out_dir);
        snprintf(fixture, sizeof fixture, "%s/%s", FIXTURES, cases[c].name);
        snprintf(args, sizeof args, "--from %s --heads %d --to %s", fixture, cases[c].heads,
                 out_dir);
        RunResult r = run_program("05_multihead/multihead", args);
        cr_expect_eq(r.status, 0, "%s: exit %d: %s", cases[c].name, r.status, r.err);
        /* the status says the comparison with expected_*.npy passed */
        /* what was written is what PyTorch computed */
        Tensor *output = load_required(out_dir, "output");
        Tensor *weights = load_required(out_dir, "attention_weights");
        Tensor *expected_output = load_required(fixture, "expected_output");
        Tensor *expected_weights = load_required(fixture, "expected_attention_weights");
        expect_close(output, expected_output, 1e-5f, 1e-5f);
        expect_close(weights, expected_weights, 1e-5f, 1e-5f);
        tensor_free(output);
        tensor_free(weights);
        tensor_free(expected_output);
        tensor_free(expected_weights);
        run_result_free(&r);
        remove_dir(out_dir);
    }
}

Test(multihead_program, to_writes_a_directory_that_from_reads)
{
    char first[64], second[64], args[256];
    make_temp_dir(first, sizeof first);
    make_temp_dir(second, sizeof second);
    snprintf(args, sizeof args, "--seed 4 --bias --valid-lens 6,1 --to %s", first);
    RunResult r = run_program("05_multihead/multihead", args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    run_result_free(&r);
    static const char *const files[] = {"queries.npy", "keys.npy", "values.npy", "W_q.npy",
                                        "W_k.npy", "W_v.npy", "W_o.npy", "b_q.npy", "b_o.npy",
                                        "valid_lens.npy", "output.npy", "attention_weights.npy"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        cr_expect(exists(first, files[i]), "%s not written", files[i]);

    snprintf(args, sizeof args, "--from %s --heads 5 --to %s", first, second);
    r = run_program("05_multihead/multihead", args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    /* the directory holds the biases and the mask of the first run */
    LayerFiles loaded;
    char err[LAYER_FILES_ERR_LEN];
    cr_assert_eq(layer_files_load(first, 5, &loaded, err, sizeof err), 0, "%s", err);
    cr_expect(loaded.layer.bias && loaded.b_q && loaded.b_k && loaded.b_v && loaded.b_o);
    cr_assert(loaded.valid_lens != NULL);
    cr_expect_eq(loaded.valid_lens->ndim, 1);
    cr_expect(loaded.valid_lens->data[0] == 6 && loaded.valid_lens->data[1] == 1);
    layer_files_free(&loaded);
    Tensor *a = load_required(first, "output"), *b = load_required(second, "output");
    Tensor *wa = load_required(first, "attention_weights");
    Tensor *wb = load_required(second, "attention_weights");
    /* the same float32 numbers through the same code: bit for bit */
    expect_close(b, a, 0.0f, 0.0f);
    expect_close(wb, wa, 0.0f, 0.0f);
    /* sequence 1 has valid_len 1: all weight on key 0 */
    cr_expect_eq(AT4(wa, 1, 2, 3, 0), 1.0f);
    tensor_free(a);
    tensor_free(b);
    tensor_free(wa);
    tensor_free(wb);
    run_result_free(&r);
    remove_dir(first);
    remove_dir(second);
}

/* Run --from on a broken copy of a fixture: exit status, one line on
 * stderr naming the program and the file or option (what the line says in
 * full is checked in test_layer_files.c and test_bad_input.c), and no
 * output.npy left in the --to directory. */
static void expect_rejected(const char *dir, const char *extra, int status, const char *message)
{
    char out_dir[64], args[512];
    make_temp_dir(out_dir, sizeof out_dir);
    snprintf(args, sizeof args, "--from %s --to %s %s", dir, out_dir, extra);
    RunResult r = run_program("05_multihead/multihead", args);
    cr_expect_eq(r.status, status, "'%s': exit %d, expected %d; stderr: %s", args, r.status,
                 status, r.err);
    cr_expect(r.err && strncmp(r.err, "multihead: ", 11) == 0 && strstr(r.err, message),
              "'%s': stderr does not name '%s': %s", args, message, r.err);
    cr_expect(is_one_line(r.err), "not one line: %s", r.err);
    cr_expect(!exists(out_dir, "output.npy") && !exists(out_dir, "attention_weights.npy"),
              "'%s' wrote output", args);
    run_result_free(&r);
    remove_dir(out_dir);
}

static void save_or_fail(const char *dir, const char *name, const Tensor *x)
{
    char path[600], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(npy_save(path, x, err, sizeof err), 0, "%s", err);
}

Test(multihead_program, from_rejects_files_that_do_not_fit)
{
    char dir[64], path[600];
    make_temp_dir(dir, sizeof dir);
    copy_fixture("bias_2d", dir);   /* B 2, T 3, K 5, D 8, H 4 */

    expect_rejected(dir, "--heads 3", 1, "--heads 3");
    expect_rejected(dir, "", 2, "--heads");
    expect_rejected(dir, "--heads 4 --batch 3", 2, "--batch");

    /* W_k transposed: (Dk, D) is a different shape only when Dk != D, so use (8, 5) */
    Tensor *bad = tensor_zeros(SHAPE(8, 5));
    save_or_fail(dir, "W_k", bad);
    expect_rejected(dir, "--heads 4", 1, "W_k.npy");
    tensor_free(bad);
    copy_fixture("bias_2d", dir);

    bad = tensor_zeros(SHAPE(2, 4, 8));   /* one value too few per sequence */
    save_or_fail(dir, "values", bad);
    expect_rejected(dir, "--heads 4", 1, "values.npy");
    tensor_free(bad);
    copy_fixture("bias_2d", dir);

    bad = tensor_zeros(SHAPE(7));
    save_or_fail(dir, "b_v", bad);
    expect_rejected(dir, "--heads 4", 1, "b_v.npy");
    tensor_free(bad);
    copy_fixture("bias_2d", dir);

    /* a NaN in the data is named with its index */
    Tensor *queries = load_required(dir, "queries");
    AT3(queries, 1, 2, 3) = NAN;
    save_or_fail(dir, "queries", queries);
    expect_rejected(dir, "--heads 4", 1, "queries.npy");
    copy_fixture("bias_2d", dir);
    tensor_free(queries);

    /* valid_lens above the number of keys, and of the wrong shape */
    char err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
    cr_assert_eq(npy_save_ints(path, (const int[]){5, 6}, SHAPE(2), err, sizeof err), 0, "%s", err);
    expect_rejected(dir, "--heads 4", 1, "valid_lens.npy");
    cr_assert_eq(npy_save_ints(path, (const int[]){1, 2, 3, 4}, SHAPE(2, 2), err, sizeof err), 0,
                 "%s", err);
    expect_rejected(dir, "--heads 4", 1, "valid_lens.npy");
    copy_fixture("bias_2d", dir);

    /* a missing file */
    snprintf(path, sizeof path, "%s/W_o.npy", dir);
    cr_assert_eq(remove(path), 0);
    expect_rejected(dir, "--heads 4", 1, "W_o.npy");
    remove_dir(dir);
}

Test(multihead_program, from_reports_results_that_differ)
{
    /* the comparison with expected_*.npy can fail: change one expected value */
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    copy_fixture("nobias_1d", dir);
    Tensor *expected = load_required(dir, "expected_output");
    expected->data[7] += 1e-3f;
    save_or_fail(dir, "expected_output", expected);
    tensor_free(expected);
    char args[128];
    snprintf(args, sizeof args, "--from %s --heads 3", dir);
    RunResult r = run_program("05_multihead/multihead", args);
    cr_expect_eq(r.status, 1);
    cr_expect(is_one_line(r.err), "%s", r.err);
    cr_expect_float_eq(number_after(r.out, "output vs expected_output.npy: largest difference "),
                       1e-3, 2e-5, "%s", r.out);
    cr_expect_leq(number_after(r.out, "attention_weights vs expected_attention_weights.npy: "
                                      "largest difference "), 1e-5, "%s", r.out);
    run_result_free(&r);
    remove_dir(dir);
}

Test(multihead_program, rejects_bad_options)
{
    static const char *const bad[] = {"--hiddens 10 --heads 3", "--valid-lens 3", "--valid-lens 3,7",
                                      "--heads 0", "--dropout 1", "--from", "--plot /nonexistent",
                                      "--to /nonexistent", "--from /nonexistent --heads 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RunResult r = run_program("05_multihead/multihead", bad[i]);
        cr_expect_eq(r.status, 2, "'%s' exited with %d", bad[i], r.status);
        cr_expect(r.err && strncmp(r.err, "multihead: ", 11) == 0, "'%s': %s", bad[i], r.err);
        cr_expect(r.err && strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "'%s': %s", bad[i],
                  r.err);
        run_result_free(&r);
    }
}

/* ---- exercise solutions ------------------------------------------------------------ */

/* Mean total variation distance between the weight rows of two heads. */
static double mean_head_distance(const Tensor *w)
{
    const int B = w->shape[0], H = w->shape[1], T = w->shape[2], K = w->shape[3];
    double total = 0.0;
    int pairs = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int g = h + 1; g < H; g++)
                for (int t = 0; t < T; t++, pairs++)
                    for (int j = 0; j < K; j++)
                        total += 0.5 * fabs((double)AT4(w, b, h, t, j) - AT4(w, b, g, t, j));
    return total / pairs;
}

/* The numbers of a plot_heatmaps .dat file, in order ('#' lines skipped). */
static int read_dat(const char *path, float *values, int max)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#')
            for (char *p = line, *end;; p = end) {
                float v = strtof(p, &end);
                if (end == p || n == max)
                    break;
                values[n++] = v;
            }
    fclose(f);
    return n;
}

Test(multihead_exercises, head_grid_draws_what_the_layer_computes)
{
    char dir[64], args[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args, "--plot %s", dir);
    RunResult r = run_program("05_multihead/head_grid", args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);

    /* the same layer and inputs, computed here */
    Rng rng = rng_new(0);
    MultiHeadAttention *layer = multihead_new(100, 100, 100, 100, 5, 0.5f, false, &rng);
    ValidLens *valid_lens = valid_lens_1d((const int[]){3, 2}, 2);
    Tensor *X = tensor_normal(&rng, 0.0f, 3.0f, SHAPE(2, 4, 100));
    Tensor *Y = tensor_normal(&rng, 0.0f, 3.0f, SHAPE(2, 6, 100));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, X, Y, Y, valid_lens, false, NULL, &weights);

    /* the distance between heads: 0 on all-ones inputs (Part 2), then the
     * distance of the weights computed here (Part 3) */
    const char *label = "mean distance between two heads: ";
    const char *part3 = strstr(r.out, "Part 3");
    cr_assert(part3, "%s", r.out);
    cr_expect_eq(number_after(r.out, label), 0.0, "%s", r.out);
    double distance = mean_head_distance(weights);
    cr_expect_gt(distance, 0.2);
    cr_expect_float_eq(number_after(part3, label), distance, 5e-5, "%s", r.out);

    /* the heatmap data holds these weights, panel by panel */
    float values[2 * 5 * 4 * 6 + 1];
    char path[600];
    snprintf(path, sizeof path, "%s/head_grid_random.dat", dir);
    int n = read_dat(path, values, (int)(sizeof values / sizeof values[0]));
    cr_expect_eq(n, 240);
    cr_expect(floats_allclose(values, weights->data, 240, 1e-5f, 1e-4f, stderr));
    snprintf(path, sizeof path, "%s/head_grid_ones.dat", dir);
    n = read_dat(path, values, (int)(sizeof values / sizeof values[0]));
    cr_expect_eq(n, 240);
    cr_expect_float_eq(values[0], 1.0f / 3.0f, 1e-5f);       /* sequence 0: 3 keys */
    cr_expect_float_eq(values[120], 0.5f, 1e-5f);            /* sequence 1: 2 keys */
    cr_expect_eq(values[3], 0.0f);                           /* key 3 is masked */
    cr_expect(exists(dir, "head_grid_ones.gp") && exists(dir, "head_grid_random.gp"));

    tensor_free(X);
    tensor_free(Y);
    tensor_free(weights);
    tensor_free(output);
    valid_lens_free(valid_lens);
    multihead_free(layer);
    run_result_free(&r);
    remove_dir(dir);
}

/* multihead's Part 3 and multihead --to (layer_files) build the example
 * through one function (multihead_example.h): the output --to writes is
 * the one Part 3 prints, to its 4 decimals, in training mode too, where
 * Part 2's dropout must not shift Part 3's draws. */
Test(multihead_program, part3_is_the_layer_that_to_writes)
{
    enum { B = 2, T = 4, SHOWN = 6 };
    static const char *const options[] = {"", "--seed 7 --bias", "--train --dropout 0.3 --seed 9",
                                          "--valid-lens 0,5 --hiddens 12 --heads 3 --train"};
    for (size_t c = 0; c < sizeof options / sizeof options[0]; c++) {
        char dir[64], args[256];
        make_temp_dir(dir, sizeof dir);
        RunResult story = run_program("05_multihead/multihead", options[c]);
        snprintf(args, sizeof args, "%s --to %s", options[c], dir);
        RunResult files = run_program("05_multihead/multihead", args);
        cr_assert(story.status == 0 && files.status == 0, "%s: %s%s", options[c], story.err,
                  files.err);
        double printed[B * T * SHOWN];
        cr_assert_eq(tensor_numbers_in(story.out, "output[:, :, :6]", 1, printed, B * T * SHOWN),
                     B * T * SHOWN, "%s", story.out);
        Tensor *output = load_required(dir, "output");
        for (int i = 0; i < B * T * SHOWN; i++) {
            const float written = output->data[(i / SHOWN) * output->shape[2] + i % SHOWN];
            cr_expect(fabs(printed[i] - written) <= 5.1e-5, "%s: entry %d printed %.4f, "
                      "written %.6f", options[c], i, printed[i], (double)written);
        }
        tensor_free(output);
        run_result_free(&story);
        run_result_free(&files);
        remove_dir(dir);
    }
}
