/*
 * test_grads.c - every backward pass of the clear path (common/ops.c,
 * softmax.c, attention.c, heads.c, multihead.c) against values worked by
 * hand, against central finite differences (common/gradcheck.c), and
 * against properties that must hold exactly.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * The loss is always L = sum(output * G) for a fixed random G, so dL/doutput
 * = G and the backward under test receives G as its incoming gradient. The
 * forward runs in float32 and the loss is summed in double; a central
 * difference with step eps then has a truncation error of order eps^2 and a
 * rounding error of order 1e-7 |L| / eps, so the finite-difference checks
 * ask for agreement within 1e-3 of the largest gradient (a wrong term, a
 * missing scale or a transposed index is off by far more; the tests below
 * print the error they measured when they fail).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "attention.h"
#include "attention_layer.h"
#include "gradcheck.h"
#include "heads.h"
#include "helpers.h"
#include "multihead.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

#define FD_EPS 1e-2
#define FD_TOL 1e-3

static void expect_grad(const char *what, const Tensor *analytic, const Tensor *numeric,
                        double tol)
{
    double err = gradcheck_rel_error(analytic, numeric);
    cr_expect(err < tol, "%s: relative error %.3g, more than %.3g", what, err, tol);
}

/* ---- gradcheck itself ------------------------------------------------------ */

typedef struct {
    Tensor *x;
} CubeCtx;

/* L = sum x^3, dL/dx = 3 x^2 */
static double cube_loss(void *ctx)
{
    const Tensor *x = ((CubeCtx *)ctx)->x;
    double sum = 0.0;
    for (size_t i = 0; i < x->size; i++)
        sum += (double)x->data[i] * x->data[i] * x->data[i];
    return sum;
}

Test(gradcheck, central_difference_of_a_cube_and_x_restored)
{
    /* (f(x + e) - f(x - e)) / 2e = 3 x^2 + e^2 for f = x^3, exactly: the
     * truncation error is the e^2 term, 1e-4 for e = 1e-2. */
    Tensor *x = tensor_from((const float[]){0.5f, -2.0f, 3.0f}, SHAPE(3));
    CubeCtx ctx = {x};
    Tensor *numeric = gradcheck_numeric(cube_loss, &ctx, x, 1.0 / 64);
    /* 1/64 and the x values are exact floats, so only the e^2 term remains */
    const float e2 = 1.0f / 4096;
    Tensor *expected = tensor_from((const float[]){0.75f + e2, 12.0f + e2, 27.0f + e2}, SHAPE(3));
    expect_close(numeric, expected, 1e-6f, 1e-6f);
    Tensor *original = tensor_from((const float[]){0.5f, -2.0f, 3.0f}, SHAPE(3));
    cr_expect_eq(tensor_max_abs_diff(x, original), 0.0f, "x was not restored");
    tensor_free(x);
    tensor_free(numeric);
    tensor_free(expected);
    tensor_free(original);
}

Test(gradcheck, relative_error_is_against_the_largest_reference)
{
    Tensor *a = tensor_from((const float[]){1.0f, 2.5f, -4.0f}, SHAPE(3));
    Tensor *b = tensor_from((const float[]){1.0f, 2.0f, -4.0f}, SHAPE(3));
    cr_expect_float_eq(gradcheck_rel_error(a, b), 0.5 / 4.0, 1e-12);
    a->data[0] = NAN;
    cr_expect(isnan(gradcheck_rel_error(a, b)));
    tensor_free(a);
    tensor_free(b);
}

/* ---- linear ------------------------------------------------------------------ */

typedef struct {
    Tensor *x, *weight, *bias, *g;
} LinearCtx;

static double linear_loss(void *ctx)
{
    LinearCtx *c = ctx;
    Tensor *y = linear(c->x, c->weight, c->bias);
    double loss = gradcheck_dot_loss(y, c->g);
    tensor_free(y);
    return loss;
}

Test(grads_hand, linear_backward_worked_by_hand)
{
    /* x (2, 2), W (3, 2), grad_y (2, 3):
     *   grad_x = grad_y W      = [[1, 0, 2] W, [0, -1, 1] W]
     *   grad_W = grad_y^T x,   grad_b = column sums of grad_y */
    Tensor *x = tensor_from((const float[]){1, 2, 3, -1}, SHAPE(2, 2));
    Tensor *weight = tensor_from((const float[]){1, 0, 0, 1, 2, -3}, SHAPE(3, 2));
    Tensor *grad_y = tensor_from((const float[]){1, 0, 2, 0, -1, 1}, SHAPE(2, 3));
    Tensor *grad_weight = tensor_full(10.0f, SHAPE(3, 2));   /* added to, not overwritten */
    Tensor *grad_bias = tensor_zeros(SHAPE(3));
    Tensor *grad_x = linear_backward(x, weight, grad_y, grad_weight, grad_bias);

    /* row 0: 1*(1, 0) + 2*(2, -3) = (5, -6); row 1: -1*(0, 1) + 1*(2, -3) = (2, -4) */
    Tensor *expected_x = tensor_from((const float[]){5, -6, 2, -4}, SHAPE(2, 2));
    /* grad_W[j] = sum_r grad_y[r, j] x[r]: (1, 2), (-3, 1), 2(1, 2) + (3, -1) = (5, 3) */
    Tensor *expected_w = tensor_from((const float[]){11, 12, 7, 11, 15, 13}, SHAPE(3, 2));
    Tensor *expected_b = tensor_from((const float[]){1, -1, 3}, SHAPE(3));
    expect_close(grad_x, expected_x, 0.0f, 0.0f);
    expect_close(grad_weight, expected_w, 0.0f, 0.0f);
    expect_close(grad_bias, expected_b, 0.0f, 0.0f);
    Tensor *all[] = {x, weight, grad_y, grad_weight, grad_bias, grad_x,
                     expected_x, expected_w, expected_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

Test(grads_fd, linear_input_weight_and_bias_3d_input)
{
    Rng rng = rng_new(11);
    LinearCtx c;
    c.x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 3, 4));
    c.weight = tensor_normal(&rng, 0.0f, 0.5f, SHAPE(5, 4));
    c.bias = tensor_normal(&rng, 0.0f, 0.5f, SHAPE(5));
    c.g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 3, 5));
    Tensor *grad_weight = tensor_zeros(SHAPE(5, 4));
    Tensor *grad_bias = tensor_zeros(SHAPE(5));
    Tensor *grad_x = linear_backward(c.x, c.weight, c.g, grad_weight, grad_bias);

    Tensor *num_x = gradcheck_numeric(linear_loss, &c, c.x, FD_EPS);
    Tensor *num_w = gradcheck_numeric(linear_loss, &c, c.weight, FD_EPS);
    Tensor *num_b = gradcheck_numeric(linear_loss, &c, c.bias, FD_EPS);
    /* the loss is linear in each: only rounding separates the two */
    expect_grad("linear grad_x", grad_x, num_x, 1e-4);
    expect_grad("linear grad_weight", grad_weight, num_w, 1e-4);
    expect_grad("linear grad_bias", grad_bias, num_b, 1e-4);
    Tensor *all[] = {c.x, c.weight, c.bias, c.g, grad_weight, grad_bias, grad_x,
                     num_x, num_w, num_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

/* ---- softmax ------------------------------------------------------------------- */

Test(grads_hand, softmax_row_backward_of_1_2_3)
{
    /* p = softmax(1, 2, 3) = (0.090031, 0.244728, 0.665241);
     * g = (1, 0, 0): dS = p * (g - p0) = (p0 (1 - p0), -p1 p0, -p2 p0)
     * g = (0.5, -1, 2): <g, p> = 1.208264, dS = p * (g - 1.208264) */
    float p[3] = {1, 2, 3}, out[3];
    softmax_row(p, 3);
    softmax_row_backward(p, (const float[]){1, 0, 0}, out, 3);
    cr_expect(floats_allclose(out, (const float[]){0.081925069f, -0.022033045f, -0.059892025f},
                              3, 1e-7f, 1e-6f, stderr));
    softmax_row_backward(p, (const float[]){0.5f, -1, 2}, out, 3);
    cr_expect(floats_allclose(out, (const float[]){-0.05678847f, -0.521459773f, 0.578248243f},
                              3, 1e-7f, 1e-6f, stderr));
    /* a row of dS sums to 0: softmax ignores a shift shared by the row */
    cr_expect_float_eq(out[0] + out[1] + out[2], 0.0f, 1e-7f);
}

Test(grads_hand, masked_keys_and_empty_rows_get_exactly_zero)
{
    /* (1, 2, 4) scores, valid_lens (1, 2) = [[3, 0]]: row 0 masks key 3,
     * row 1 has no key. Gradients of any size (even huge) give exact 0s. */
    Tensor *scores = tensor_from((const float[]){0.3f, -1, 2, 5, 1, 2, 3, 4}, SHAPE(1, 2, 4));
    int lens[] = {3, 0};
    ValidLens *valid_lens = valid_lens_2d(lens, 1, 2);
    Tensor *weights = masked_softmax(scores, valid_lens);
    Tensor *grad_w = tensor_from((const float[]){1, 2, -3, 1e30f, 7, -8, 1e30f, -1e30f},
                                 SHAPE(1, 2, 4));
    Tensor *grad_s = masked_softmax_backward(weights, grad_w);
    cr_expect_eq(AT3(grad_s, 0, 0, 3), 0.0f);
    cr_expect(!signbit(AT3(grad_s, 0, 0, 3)), "a masked key's gradient is +0");
    for (int j = 0; j < 4; j++)
        cr_expect(AT3(grad_s, 0, 1, j) == 0.0f && !signbit(AT3(grad_s, 0, 1, j)),
                  "row with no key: grad_scores[0, 1, %d] = %g", j, AT3(grad_s, 0, 1, j));
    /* and the valid keys do get the formula's values */
    float row[3] = {0.3f, -1, 2}, expected[3];
    softmax_row(row, 3);
    softmax_row_backward(row, (const float[]){1, 2, -3}, expected, 3);
    cr_expect(floats_allclose(grad_s->data, expected, 3, 0.0f, 0.0f, stderr));
    cr_expect_gt(fabsf(expected[2]), 0.1f);
    tensor_free(scores);
    tensor_free(weights);
    tensor_free(grad_w);
    tensor_free(grad_s);
    valid_lens_free(valid_lens);
}

typedef struct {
    Tensor *scores, *g;
    const ValidLens *valid_lens;
} SoftmaxCtx;

static double softmax_loss(void *ctx)
{
    SoftmaxCtx *c = ctx;
    Tensor *w = masked_softmax(c->scores, c->valid_lens);
    double loss = gradcheck_dot_loss(w, c->g);
    tensor_free(w);
    return loss;
}

Test(grads_fd, masked_softmax_2d_valid_lens)
{
    Rng rng = rng_new(12);
    int lens[] = {1, 4, 0, 2, 3, 5};
    ValidLens *valid_lens = valid_lens_2d(lens, 2, 3);
    SoftmaxCtx c = {tensor_normal(&rng, 0.0f, 1.5f, SHAPE(2, 3, 5)),
                    tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 3, 5)), valid_lens};
    Tensor *weights = masked_softmax(c.scores, valid_lens);
    Tensor *analytic = masked_softmax_backward(weights, c.g);
    Tensor *numeric = gradcheck_numeric(softmax_loss, &c, c.scores, FD_EPS);
    expect_grad("masked_softmax grad_scores", analytic, numeric, FD_TOL);
    tensor_free(weights);
    tensor_free(analytic);
    tensor_free(numeric);
    tensor_free(c.scores);
    tensor_free(c.g);
    valid_lens_free(valid_lens);
}

/* ---- dot-product attention ------------------------------------------------------ */

typedef struct {
    Tensor *queries, *keys, *values, *g;
    const ValidLens *valid_lens;
    float p;
    Rng rng_start;   /* each forward starts here: the same coin flips every time */
} AttentionCtx;

static double attention_loss(void *ctx)
{
    AttentionCtx *c = ctx;
    Rng rng = c->rng_start;
    Dropout dropout = {c->p, true, &rng};
    Tensor *out = dot_product_attention(c->queries, c->keys, c->values, c->valid_lens,
                                        &dropout, NULL);
    double loss = gradcheck_dot_loss(out, c->g);
    tensor_free(out);
    return loss;
}

static void check_attention(int B, int T, int K, int d, int v, const ValidLens *valid_lens,
                            float p, uint64_t seed)
{
    Rng rng = rng_new(seed);
    AttentionCtx c;
    c.queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, d));
    c.keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, d));
    c.values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, v));
    c.g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, v));
    c.valid_lens = valid_lens;
    c.p = p;
    c.rng_start = rng_new(seed + 1000);

    Rng draw = c.rng_start;
    Dropout dropout = {p, true, &draw};
    AttentionCache cache;
    Tensor *out = dot_product_attention_cache(c.queries, c.keys, c.values, valid_lens,
                                             &dropout, &cache);
    /* the saving forward is the forward: same numbers, same flips */
    Rng again = c.rng_start;
    Dropout dropout_again = {p, true, &again};
    Tensor *weights_after = NULL;
    Tensor *plain = dot_product_attention(c.queries, c.keys, c.values, valid_lens,
                                          &dropout_again, &weights_after);
    cr_expect_eq(tensor_max_abs_diff(out, plain), 0.0f, "save changes the output");
    Tensor *dropped = attention_cache_dropped(&cache);
    cr_expect_eq(tensor_max_abs_diff(dropped, weights_after), 0.0f);
    cr_expect_eq(cache.dropout_scale != NULL, p > 0.0f);

    Tensor *dq = NULL, *dk = NULL, *dv = NULL;
    dot_product_attention_backward(c.queries, c.keys, c.values, &cache, c.g, &dq, &dk, &dv);
    Tensor *nq = gradcheck_numeric(attention_loss, &c, c.queries, FD_EPS);
    Tensor *nk = gradcheck_numeric(attention_loss, &c, c.keys, FD_EPS);
    Tensor *nv = gradcheck_numeric(attention_loss, &c, c.values, FD_EPS);
    expect_grad("attention grad_queries", dq, nq, FD_TOL);
    expect_grad("attention grad_keys", dk, nk, FD_TOL);
    expect_grad("attention grad_values", dv, nv, FD_TOL);

    /* NULL out-pointers: the others are the same numbers */
    Tensor *dk_only = NULL;
    dot_product_attention_backward(c.queries, c.keys, c.values, &cache, c.g, NULL, &dk_only,
                                   NULL);
    cr_expect_eq(tensor_max_abs_diff(dk_only, dk), 0.0f);

    Tensor *all[] = {c.queries, c.keys, c.values, c.g, out, plain, weights_after, dropped,
                     dq, dk, dv, nq, nk, nv, dk_only};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    attention_cache_free(&cache);
}

Test(grads_fd, attention_no_mask)
{
    check_attention(2, 3, 4, 5, 3, NULL, 0.0f, 21);
}

Test(grads_fd, attention_1d_valid_lens)
{
    ValidLens *valid_lens = valid_lens_1d((const int[]){2, 5}, 2);
    check_attention(2, 4, 5, 3, 2, valid_lens, 0.0f, 22);
    valid_lens_free(valid_lens);
}

Test(grads_fd, attention_2d_valid_lens_with_an_empty_row)
{
    ValidLens *valid_lens = valid_lens_2d((const int[]){0, 1, 3, 4, 2, 0}, 2, 3);
    check_attention(2, 3, 4, 4, 6, valid_lens, 0.0f, 23);
    valid_lens_free(valid_lens);
}

Test(grads_fd, attention_dropout_with_its_mask_fixed)
{
    ValidLens *valid_lens = valid_lens_1d((const int[]){3, 4}, 2);
    check_attention(2, 5, 4, 3, 3, valid_lens, 0.4f, 24);
    valid_lens_free(valid_lens);
}

Test(grads_hand, dropped_weights_pass_no_gradient_to_their_value)
{
    /* One query, two keys, dropout that drops key 1 for the query: grad_values
     * row 1 is exactly 0, row 0 is the kept weight times 1/(1-p) times dO. */
    Tensor *q = tensor_from((const float[]){1, 0}, SHAPE(1, 1, 2));
    Tensor *k = tensor_from((const float[]){1, 0, 0, 1}, SHAPE(1, 2, 2));
    Tensor *v = tensor_from((const float[]){1, 2, 3, 4}, SHAPE(1, 2, 2));
    AttentionCache cache = {tensor_from((const float[]){0.75f, 0.25f}, SHAPE(1, 1, 2)),
                            tensor_from((const float[]){2.0f, 0.0f}, SHAPE(1, 1, 2))};
    Tensor *g = tensor_from((const float[]){1, -1}, SHAPE(1, 1, 2));
    Tensor *dv = NULL, *dq = NULL;
    dot_product_attention_backward(q, k, v, &cache, g, &dq, NULL, &dv);
    Tensor *expected_v = tensor_from((const float[]){1.5f, -1.5f, 0, 0}, SHAPE(1, 2, 2));
    expect_close(dv, expected_v, 0.0f, 0.0f);
    /* dA = dO V^T = (-1, -1); dP = dA * scale = (-2, 0); <dP, P> = -1.5;
     * dS = P * (dP + 1.5) = (-0.375, 0.375); dQ = dS K / sqrt(2) */
    Tensor *expected_q = tensor_from((const float[]){-0.375f / sqrtf(2.0f), 0.375f / sqrtf(2.0f)},
                                     SHAPE(1, 1, 2));
    expect_close(dq, expected_q, 1e-7f, 1e-6f);
    Tensor *all[] = {q, k, v, g, dv, dq, expected_v, expected_q};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    attention_cache_free(&cache);
}

/* ---- the head split ------------------------------------------------------------ */

Test(grads_hand, head_maps_backward_are_their_inverses)
{
    /* L = sum(transpose_qkv(x) * G) is linear in x with gradient
     * transpose_qkv_backward(G), element for element, no rounding at all. */
    Rng rng = rng_new(31);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 3, 6));
    Tensor *g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(6, 3, 2));   /* (B*H, T, d), H = 3 */
    Tensor *grad_x = transpose_qkv_backward(g, 3);
    cr_assert(tensor_has_shape(grad_x, SHAPE(2, 3, 6)));
    /* x[b, t, h*d + i] went to out[b*H + h, t, i], so its gradient is g's there */
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 3; t++)
            for (int h = 0; h < 3; h++)
                for (int i = 0; i < 2; i++)
                    cr_expect_eq(AT3(grad_x, b, t, h * 2 + i), AT3(g, b * 3 + h, t, i));
    Tensor *back = transpose_output_backward(grad_x, 3);
    cr_expect_eq(tensor_max_abs_diff(back, g), 0.0f, "round trip is not exact");
    /* and <transpose_qkv(x), G> = <x, transpose_qkv_backward(G)> */
    Tensor *split = transpose_qkv(x, 3);
    cr_expect_float_eq(gradcheck_dot_loss(split, g), gradcheck_dot_loss(x, grad_x), 1e-12);
    Tensor *all[] = {x, g, grad_x, back, split};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

/* ---- the multi-head layer ------------------------------------------------------- */

typedef struct {
    MultiHeadAttention *layer;
    Tensor *queries, *keys, *values, *g;
    const ValidLens *valid_lens;
    bool training;
    Rng rng_start;
} LayerCtx;

/* Chapter 05's layer, or decoding's (attention_layer.h) for a layer whose query
 * heads share key-value heads: the same arguments and cache. */
static bool is_grouped(const MultiHeadAttention *layer)
{
    return layer->num_kv_heads != layer->num_heads;
}

static double layer_loss(void *ctx)
{
    LayerCtx *c = ctx;
    Rng rng = c->rng_start;
    MultiHeadCache cache;
    Tensor *out = (is_grouped(c->layer) ? grouped_forward_cache : multihead_forward_cache)(
        c->layer, c->queries, c->keys, c->values, c->valid_lens, c->training, &rng, &cache);
    multihead_cache_free(&cache);
    double loss = gradcheck_dot_loss(out, c->g);
    tensor_free(out);
    return loss;
}

typedef struct {
    int B, T, K, Dq, Dk, Dv, D, H;
    int G;   /* num_kv_heads; 0: H, the multi-head layer */
    bool bias, training;
    float dropout;
} LayerConfig;

static LayerCtx layer_ctx_new(LayerConfig cfg, const ValidLens *valid_lens, uint64_t seed)
{
    Rng rng = rng_new(seed);
    LayerCtx c;
    c.layer = multihead_new_grouped(cfg.Dq, cfg.Dk, cfg.Dv, cfg.D, cfg.H, cfg.G ? cfg.G : cfg.H,
                                    cfg.dropout, cfg.bias, &rng);
    c.queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(cfg.B, cfg.T, cfg.Dq));
    c.keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(cfg.B, cfg.K, cfg.Dk));
    c.values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(cfg.B, cfg.K, cfg.Dv));
    c.g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(cfg.B, cfg.T, cfg.D));
    c.valid_lens = valid_lens;
    c.training = cfg.training;
    c.rng_start = rng_new(seed + 1000);
    return c;
}

static void layer_ctx_free(LayerCtx *c)
{
    multihead_free(c->layer);
    tensor_free(c->queries);
    tensor_free(c->keys);
    tensor_free(c->values);
    tensor_free(c->g);
}

static void check_layer(LayerConfig cfg, const ValidLens *valid_lens, uint64_t seed)
{
    LayerCtx c = layer_ctx_new(cfg, valid_lens, seed);
    MultiHeadAttention *layer = c.layer;
    Rng rng = c.rng_start;
    MultiHeadCache cache;
    Tensor *out = (is_grouped(layer) ? grouped_forward_cache : multihead_forward_cache)(
        layer, c.queries, c.keys, c.values, valid_lens, c.training, &rng, &cache);
    MultiHeadGrads *grads = multihead_grads_new(layer);
    Tensor *dq = NULL, *dk = NULL, *dv = NULL;
    (is_grouped(layer) ? grouped_backward : multihead_backward)(layer, &cache, c.g, grads, &dq,
                                                                &dk, &dv, NULL);

    struct { const char *name; Tensor *param, *analytic; } checks[] = {
        {"grad_queries", c.queries, dq}, {"grad_keys", c.keys, dk},
        {"grad_values", c.values, dv},
        {"grad_W_q", layer->W_q, grads->W_q}, {"grad_W_k", layer->W_k, grads->W_k},
        {"grad_W_v", layer->W_v, grads->W_v}, {"grad_W_o", layer->W_o, grads->W_o},
        {"grad_b_q", layer->b_q, grads->b_q}, {"grad_b_v", layer->b_v, grads->b_v},
        {"grad_b_o", layer->b_o, grads->b_o},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        if (checks[i].param == NULL)
            continue;   /* no bias */
        Tensor *numeric = gradcheck_numeric(layer_loss, &c, checks[i].param, FD_EPS);
        expect_grad(checks[i].name, checks[i].analytic, numeric, FD_TOL);
        tensor_free(numeric);
    }
    if (cfg.bias) {
        /* b_k: its true gradient is 0 (chapter 05), so a relative error means
         * nothing; both must be rounding-small next to b_q's gradient. */
        Tensor *numeric = gradcheck_numeric(layer_loss, &c, layer->b_k, FD_EPS);
        float scale = tensor_max_abs(grads->b_q);
        cr_expect_lt(tensor_max_abs(grads->b_k), 1e-5f * scale, "grad_b_k %g next to %g",
                     (double)tensor_max_abs(grads->b_k), (double)scale);
        cr_expect_lt(tensor_max_abs(numeric), 1e-2f * scale);
        tensor_free(numeric);
    }
    tensor_free(out);
    tensor_free(dq);
    tensor_free(dk);
    tensor_free(dv);
    multihead_grads_free(grads);
    multihead_cache_free(&cache);
    layer_ctx_free(&c);
}

/* Grouped-query attention over a causal sequence, the training form of
 * 05_multihead/decoding.md's layer: W_k and W_v (G*d, D), each key-value
 * head read by H / G query heads, whose gradients add up in it. */
static void check_grouped_causal(int num_kv_heads, uint64_t seed)
{
    LayerConfig cfg = {.B = 2, .T = 5, .K = 5, .Dq = 8, .Dk = 8, .Dv = 8, .D = 8, .H = 4,
                       .G = num_kv_heads, .bias = true};
    ValidLens *causal = valid_lens_causal(2, 5);
    check_layer(cfg, causal, seed);
    valid_lens_free(causal);
}

Test(grads_fd, grouped_query_two_kv_heads_causal) { check_grouped_causal(2, 47); }
Test(grads_fd, multi_query_one_kv_head_causal) { check_grouped_causal(1, 48); }

Test(grads_fd, layer_cross_attention_bias_2d_valid_lens)
{
    LayerConfig cfg = {.B = 2, .T = 3, .K = 4, .Dq = 3, .Dk = 5, .Dv = 4, .D = 6, .H = 2,
                       .bias = true};
    ValidLens *valid_lens = valid_lens_2d((const int[]){4, 0, 2, 1, 3, 4}, 2, 3);
    check_layer(cfg, valid_lens, 41);
    valid_lens_free(valid_lens);
}

Test(grads_fd, layer_no_bias_1d_valid_lens_three_heads)
{
    LayerConfig cfg = {.B = 2, .T = 4, .K = 4, .Dq = 6, .Dk = 6, .Dv = 6, .D = 6, .H = 3};
    ValidLens *valid_lens = valid_lens_1d((const int[]){2, 4}, 2);
    check_layer(cfg, valid_lens, 42);
    valid_lens_free(valid_lens);
}

Test(grads_fd, layer_dropout_training_with_its_mask_fixed)
{
    LayerConfig cfg = {.B = 2, .T = 3, .K = 5, .Dq = 4, .Dk = 3, .Dv = 2, .D = 4, .H = 2,
                       .bias = true, .training = true, .dropout = 0.3f};
    check_layer(cfg, NULL, 43);
}

Test(grads_fd, layer_one_head)
{
    LayerConfig cfg = {.B = 1, .T = 5, .K = 3, .Dq = 4, .Dk = 4, .Dv = 4, .D = 4, .H = 1,
                       .bias = true};
    ValidLens *valid_lens = valid_lens_1d((const int[]){2}, 1);
    check_layer(cfg, valid_lens, 44);
    valid_lens_free(valid_lens);
}

Test(grads, parameter_gradients_accumulate_and_zero)
{
    LayerConfig cfg = {.B = 2, .T = 3, .K = 3, .Dq = 4, .Dk = 4, .Dv = 4, .D = 4, .H = 2,
                       .bias = true};
    LayerCtx c = layer_ctx_new(cfg, NULL, 51);
    MultiHeadCache cache;
    Tensor *out = multihead_forward_cache(c.layer, c.queries, c.keys, c.values, NULL, false,
                                         NULL, &cache);
    MultiHeadGrads *once = multihead_grads_new(c.layer);
    MultiHeadGrads *twice = multihead_grads_new(c.layer);
    Tensor *dq = NULL, *dq_no_grads = NULL, *concat = NULL;
    multihead_backward(c.layer, &cache, c.g, once, &dq, NULL, NULL, &concat);
    multihead_backward(c.layer, &cache, c.g, twice, NULL, NULL, NULL, NULL);
    multihead_backward(c.layer, &cache, c.g, twice, NULL, NULL, NULL, NULL);
    /* x + x is exact in floats: twice the gradient, bit for bit */
    Tensor *pairs[][2] = {{once->W_q, twice->W_q}, {once->W_o, twice->W_o},
                          {once->b_v, twice->b_v}, {once->b_o, twice->b_o}};
    for (size_t i = 0; i < 4; i++) {
        cr_expect_gt(tensor_max_abs(pairs[i][0]), 0.0f);
        for (size_t j = 0; j < pairs[i][0]->size; j++)
            cr_expect_eq(2.0f * pairs[i][0]->data[j], pairs[i][1]->data[j]);
    }
    multihead_grads_zero(twice);
    cr_expect_eq(tensor_max_abs(twice->W_k), 0.0f);
    cr_expect_eq(tensor_max_abs(twice->b_o), 0.0f);
    /* grads NULL: the input gradient alone, the same numbers */
    multihead_backward(c.layer, &cache, c.g, NULL, &dq_no_grads, NULL, NULL, NULL);
    cr_expect_eq(tensor_max_abs_diff(dq, dq_no_grads), 0.0f);
    /* grad_concat is dO W_o: W_o's input gradient */
    Tensor *g_rows = tensor_reshape(tensor_copy(c.g), SHAPE(6, 4));
    Tensor *expected_concat = matmul(g_rows, c.layer->W_o);
    cr_assert(tensor_has_shape(concat, SHAPE(2, 3, 4)));
    cr_expect(floats_allclose(concat->data, expected_concat->data, concat->size, 1e-6f, 1e-6f,
                              stderr));
    Tensor *all[] = {out, dq, dq_no_grads, concat, g_rows, expected_concat};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    multihead_grads_free(once);
    multihead_grads_free(twice);
    multihead_cache_free(&cache);
    layer_ctx_free(&c);
}

Test(grads_fd, a_missing_scale_is_caught)
{
    /* The classic mistake, forgetting 1/sqrt(d) in pass 1 backwards, makes
     * dQ and dK sqrt(d) times too large: the check must see it (relative
     * error sqrt(d) - 1 = 1 for d = 4, far above FD_TOL). */
    Rng rng = rng_new(25);
    AttentionCtx c;
    c.queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 3, 4));
    c.keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 3, 4));
    c.values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 3, 2));
    c.g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 3, 2));
    c.valid_lens = NULL;
    c.p = 0.0f;
    c.rng_start = rng_new(1);
    AttentionCache cache;
    Tensor *out = dot_product_attention_cache(c.queries, c.keys, c.values, NULL, NULL, &cache);
    Tensor *dq = NULL;
    dot_product_attention_backward(c.queries, c.keys, c.values, &cache, c.g, &dq, NULL, NULL);
    Tensor *numeric = gradcheck_numeric(attention_loss, &c, c.queries, FD_EPS);
    cr_expect_lt(gradcheck_rel_error(dq, numeric), FD_TOL);
    for (size_t i = 0; i < dq->size; i++)
        dq->data[i] *= 2.0f;   /* sqrt(4): the scale forgotten */
    double err = gradcheck_rel_error(dq, numeric);
    cr_expect(fabs(err - 1.0) < 0.01, "a missing scale gave relative error %g, not 1", err);
    Tensor *all[] = {c.queries, c.keys, c.values, c.g, out, dq, numeric};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    attention_cache_free(&cache);
}

/* ---- chapter 03's program ------------------------------------------------------ */

Test(grads_program, backward_runs_on_random_tokens_and_lists_its_options)
{
    RunResult r = run_program("03_self_attention/backward",
                              "--tokens 5 --dim 2 --seed 7 --jacobian-max 64");
    cr_expect_eq(r.status, 0, "backward exited with %d: %s", r.status, r.err ? r.err : "");
    cr_expect(r.err && r.err[0] == '\0', "backward wrote on stderr: %s", r.err);
    run_result_free(&r);
    const char *const options[] = {"--seed", "--tokens", "--dim", "--eps",
                                   "--jacobian-max", "--help"};
    expect_help_lists("03_self_attention/backward", options, 6);
}

Test(grads_hand, a_nearly_one_hot_row_keeps_its_accuracy)
{
    /* Scores far apart make one weight 0.99991 and the rest small; then
     * dS_j = p_j (g_j - <g, p>) subtracts two nearly equal numbers, and
     * float weights that sum to 1 + 1e-7 instead of 1 cost 5e-5 of
     * accuracy (measured without the division by the weights' sum in
     * softmax_row_backward; 3e-7 with it). The reference is the same
     * formula in double, from double weights. */
    const double scores[6] = {5.41, 2.86, -15.68, 8.641, 18.0, -5.799};
    const float g[6] = {0.7f, -1.3f, 0.2f, 2.1f, -0.4f, 1.1f};
    double p64[6], sum = 0.0, dot = 0.0;
    float p[6], out[6];
    for (int j = 0; j < 6; j++)
        sum += p64[j] = exp(scores[j] - 18.0);
    for (int j = 0; j < 6; j++) {
        p64[j] /= sum;
        dot += p64[j] * g[j];
        p[j] = (float)scores[j];
    }
    softmax_row(p, 6);
    softmax_row_backward(p, g, out, 6);
    double worst = 0.0, scale = 0.0;
    for (int j = 0; j < 6; j++) {
        const double expected = p64[j] * (g[j] - dot);
        worst = fmax(worst, fabs(out[j] - expected));
        scale = fmax(scale, fabs(expected));
    }
    cr_expect_lt(worst / scale, 1e-6, "relative error %g", worst / scale);
    cr_expect_gt(scale, 1e-4);
}

Test(grads_program, layer_backward_runs_for_every_head_count)
{
    const char *const runs[] = {"--heads 1 --head 0", "--heads 3 --head 2 --seed 4",
                                "--heads 6 --head 5 --seed 9"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        /* exit status 1 would mean the hand-worked head disagrees */
        RunResult r = run_program("05_multihead/backward", runs[i]);
        cr_expect_eq(r.status, 0, "%s: exit %d: %s", runs[i], r.status, r.err ? r.err : "");
        run_result_free(&r);
    }
    const char *const options[] = {"--seed", "--heads", "--head", "--help"};
    expect_help_lists("05_multihead/backward", options, 4);
}
