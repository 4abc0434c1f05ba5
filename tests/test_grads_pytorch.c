/*
 * test_grads_pytorch.c - the multi-head layer's backward (common/multihead.c)
 * against PyTorch autograd.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * The references are in tests/fixtures/grads/<case>/, made by
 * tests/fixtures/make_grad_fixtures.py (its README lists the cases): the
 * gradients of L = sum(output * grad_output) with respect to the inputs and
 * every weight and bias, computed by autograd in float64. Every gradient of
 * the C layer (float32) must be within 1e-5 of PyTorch's, relative to the
 * largest magnitude of PyTorch's.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gradcheck.h"
#include "helpers.h"
#include "io/npy.h"
#include "multihead.h"
#include "tensor.h"

#define FIXTURES "tests/fixtures/grads"
#define PYTORCH_TOL 1e-5

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

static ValidLens *load_valid_lens(const char *dir)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
    if (access(path, F_OK) != 0)
        return NULL;
    NpyInts ints;
    cr_assert_eq(npy_load_ints(path, &ints, err, sizeof err), 0, "%s", err);
    ValidLens *valid_lens = ints.ndim == 1
                                ? valid_lens_1d(ints.data, ints.shape[0])
                                : valid_lens_2d(ints.data, ints.shape[0], ints.shape[1]);
    npy_ints_free(&ints);
    return valid_lens;
}

/* The names of the layer's parameters, as the fixture files call them. */
static const char *const PARAM_NAMES[8] = {"W_q", "W_k", "W_v", "W_o",
                                           "b_q", "b_k", "b_v", "b_o"};

typedef struct {
    MultiHeadAttention *layer;
    Tensor *queries, *keys, *values, *grad_output;
    ValidLens *valid_lens;
    /* what the backward gave, in PARAM_NAMES order after the three inputs */
    Tensor *grad[11];
    MultiHeadGrads *grads;
} Case;

static Tensor **param_slot(MultiHeadAttention *layer, int i)
{
    Tensor **slots[8] = {&layer->W_q, &layer->W_k, &layer->W_v, &layer->W_o,
                         &layer->b_q, &layer->b_k, &layer->b_v, &layer->b_o};
    return slots[i];
}

/* Load a fixture, run the layer forward and backward on it. */
static Case case_run(const char *dir, int num_heads)
{
    Case c = {0};
    c.queries = load_required(dir, "queries");
    c.keys = load_required(dir, "keys");
    c.values = load_required(dir, "values");
    c.grad_output = load_required(dir, "grad_output");
    c.valid_lens = load_valid_lens(dir);
    MultiHeadAttention *layer = calloc(1, sizeof *layer);
    for (int i = 0; i < 8; i++)
        *param_slot(layer, i) = i < 4 ? load_required(dir, PARAM_NAMES[i])
                                      : load_or_null(dir, PARAM_NAMES[i]);
    layer->bias = layer->b_q != NULL;
    layer->query_size = c.queries->shape[2];
    layer->key_size = c.keys->shape[2];
    layer->value_size = c.values->shape[2];
    layer->num_hiddens = layer->W_q->shape[0];
    layer->num_heads = num_heads;
    layer->num_kv_heads = num_heads;
    c.layer = layer;

    MultiHeadCache cache;
    Tensor *output = multihead_forward_cache(layer, c.queries, c.keys, c.values, c.valid_lens,
                                            false, NULL, &cache);
    Tensor *expected_output = load_required(dir, "expected_output");
    cr_expect(gradcheck_rel_error(output, expected_output) < PYTORCH_TOL,
              "%s: output differs from PyTorch", dir);
    tensor_free(output);
    tensor_free(expected_output);

    c.grads = multihead_grads_new(layer);
    multihead_backward(layer, &cache, c.grad_output, c.grads, &c.grad[0], &c.grad[1],
                       &c.grad[2], NULL);
    multihead_cache_free(&cache);
    Tensor *param_grads[8] = {c.grads->W_q, c.grads->W_k, c.grads->W_v, c.grads->W_o,
                              c.grads->b_q, c.grads->b_k, c.grads->b_v, c.grads->b_o};
    for (int i = 0; i < 8; i++)
        c.grad[3 + i] = param_grads[i];
    return c;
}

static void case_free(Case *c)
{
    multihead_free(c->layer);
    for (int i = 0; i < 3; i++)
        tensor_free(c->grad[i]);
    multihead_grads_free(c->grads);
    tensor_free(c->queries);
    tensor_free(c->keys);
    tensor_free(c->values);
    tensor_free(c->grad_output);
    valid_lens_free(c->valid_lens);
}

static void check_case(const char *name, int num_heads)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    Case c = case_run(dir, num_heads);
    const char *names[11] = {"queries", "keys", "values"};
    for (int i = 0; i < 8; i++)
        names[3 + i] = PARAM_NAMES[i];

    double b_q_scale = 0.0;
    for (int i = 0; i < 11; i++) {
        char file[64];
        snprintf(file, sizeof file, "expected_grad_%s", names[i]);
        Tensor *expected = load_or_null(dir, file);
        cr_expect_eq(expected != NULL, c.grad[i] != NULL, "%s: grad_%s present on one side only",
                     name, names[i]);
        if (expected == NULL || c.grad[i] == NULL) {
            tensor_free(expected);
            continue;
        }
        cr_assert(tensor_has_shape(c.grad[i], expected->ndim, expected->shape),
                  "%s: grad_%s has the wrong shape", name, names[i]);
        double err;
        if (i == 3 + 4)
            b_q_scale = tensor_max_abs(expected);
        if (i == 3 + 5) {
            /* b_k's true gradient is 0: both sides hold rounding noise, so
             * the error is measured against b_q's gradient instead */
            err = tensor_max_abs_diff(c.grad[i], expected) / b_q_scale;
        } else {
            err = gradcheck_rel_error(c.grad[i], expected);
        }
        cr_expect(err < PYTORCH_TOL, "%s: grad_%s differs from PyTorch by %.3g (relative)",
                  name, names[i], err);
        tensor_free(expected);
    }
    case_free(&c);
}

Test(grads_pytorch, self_attention_biases_no_mask) { check_case("self_bias_nomask", 2); }
Test(grads_pytorch, no_biases_1d_valid_lens)        { check_case("nobias_1d", 3); }
Test(grads_pytorch, biases_2d_valid_lens_empty_rows) { check_case("bias_2d_empty_rows", 4); }
Test(grads_pytorch, cross_attention_kdim_vdim)      { check_case("cross_kdim_vdim", 4); }
Test(grads_pytorch, eight_heads_a_sequence_without_keys) { check_case("cross_empty_sequence", 8); }
Test(grads_pytorch, one_head_2d_valid_lens)         { check_case("one_head_2d", 1); }
Test(grads_pytorch, query_key_value_sizes_differ)   { check_case("query_size_2d", 2); }
Test(grads_pytorch, d2l_toy_sizes)                  { check_case("d2l_toy", 5); }
Test(grads_pytorch, eight_heads_biases)             { check_case("eight_heads_bias", 8); }

Test(grads_pytorch, rows_without_keys_get_exactly_zero)
{
    /* bias_2d_empty_rows: valid_lens [[1, 0, 5], [2, 4, 0]]. Queries (0, 1)
     * and (1, 2) see no key in any head: no path leads from them to the
     * output, so their gradient is exactly 0 here, and in PyTorch's too. */
    Case c = case_run(FIXTURES "/bias_2d_empty_rows", 4);
    Tensor *expected = load_required(FIXTURES "/bias_2d_empty_rows", "expected_grad_queries");
    const int empty[2][2] = {{0, 1}, {1, 2}};
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < c.queries->shape[2]; i++) {
            cr_expect_eq(AT3(c.grad[0], empty[e][0], empty[e][1], i), 0.0f);
            cr_expect_eq(AT3(expected, empty[e][0], empty[e][1], i), 0.0f);
        }
    /* while the other queries do get a gradient */
    cr_expect_gt(fabsf(AT3(c.grad[0], 0, 0, 0)) + fabsf(AT3(c.grad[0], 0, 2, 0)), 1e-3f);
    tensor_free(expected);
    case_free(&c);
}

Test(grads_pytorch, fixtures_are_not_trivial)
{
    /* A reference a broken backward could match by accident is no test:
     * gradients of clear size, different from row to row, and b_k's near 0
     * only because of the softmax, not because everything is small. */
    Case c = case_run(FIXTURES "/self_bias_nomask", 2);
    Tensor *gk = load_required(FIXTURES "/self_bias_nomask", "expected_grad_keys");
    Tensor *gbk = load_required(FIXTURES "/self_bias_nomask", "expected_grad_b_k");
    Tensor *gbq = load_required(FIXTURES "/self_bias_nomask", "expected_grad_b_q");
    cr_expect_gt(tensor_max_abs(gk), 0.1f);
    cr_expect_gt(fabsf(AT3(gk, 0, 0, 0) - AT3(gk, 0, 1, 0)), 1e-3f);
    cr_expect_gt(tensor_max_abs(gbq), 0.1f);
    cr_expect_lt(tensor_max_abs(gbk), 1e-12f);
    tensor_free(gk);
    tensor_free(gbk);
    tensor_free(gbq);
    case_free(&c);
}
