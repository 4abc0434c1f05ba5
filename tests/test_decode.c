/*
 * test_decode.c - decoding with a key-value cache and grouped-query
 * attention (common/kv_cache.c, the grouped layer of common/attention_layer.c),
 * against the full causal layer, against multi-head attention with repeated
 * key-value heads, and against PyTorch 1.13.
 *
 * Legend: B = batch_size, T = tokens, H = num_heads, G = num_kv_heads,
 * D = num_hiddens, d = D / H.
 *
 * The PyTorch references are in tests/fixtures/decode/<case>/, made by
 * tests/fixtures/make_decode_fixtures.py.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention_layer.h"
#include "fast/fast_decode.h"
#include "heads.h"
#include "helpers.h"
#include "io/npy.h"
#include "kv_cache.h"
#include "multihead.h"
#include "ops.h"
#include "random.h"
#include "tensor.h"

#define FIXTURES "tests/fixtures/decode"

/* ---- repeating key-value heads ------------------------------------------------ */

Test(repeat_kv_heads, each_head_repeated_in_a_row_and_gradients_summed)
{
    /* B = 2, G = 2, H = 4, T = 1, d = 2: sequence b's heads (b0, b1) become
     * (b0, b0, b1, b1), as torch.repeat_interleave(kv, 2, dim=1) gives;
     * tiling (b0, b1, b0, b1) would give query head 1 the wrong keys. */
    Tensor *x = tensor_from((const float[]){1, 2, 3, 4, 5, 6, 7, 8}, SHAPE(4, 1, 2));
    Tensor *out = repeat_kv_heads(x, 2, 4);
    Tensor *expected = tensor_from((const float[]){1, 2, 1, 2, 3, 4, 3, 4,
                                                   5, 6, 5, 6, 7, 8, 7, 8}, SHAPE(8, 1, 2));
    cr_expect_eq(tensor_max_abs_diff(out, expected), 0.0f);
    /* the gradient of a head is the sum of its copies' gradients */
    Tensor *grad = tensor_from((const float[]){1, 0, 10, 0, 0, 1, 0, 20,
                                               2, 3, 30, 40, -1, -1, 5, 5}, SHAPE(8, 1, 2));
    Tensor *grad_x = repeat_kv_heads_backward(grad, 2, 4);
    Tensor *expected_grad = tensor_from((const float[]){11, 0, 0, 21, 32, 43, 4, 4},
                                        SHAPE(4, 1, 2));
    cr_expect_eq(tensor_max_abs_diff(grad_x, expected_grad), 0.0f);
    TENSOR_FREE(x, out, expected, grad, grad_x, expected_grad);
}

/* ---- the cache changes nothing ------------------------------------------------- */

static Tensor *random_tokens(Rng *rng, int B, int T, int D)
{
    return tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, D));
}

/* grouped_forward_cache in evaluation mode, its cache dropped; with
 * weights, the attention weights as (B, H, T, K) (new) */
static Tensor *grouped_forward(const MultiHeadAttention *layer, const Tensor *queries,
                               const Tensor *keys, const Tensor *values,
                               const ValidLens *valid_lens, Tensor **weights)
{
    MultiHeadCache cache;
    Tensor *out = grouped_forward_cache(layer, queries, keys, values, valid_lens, false, NULL,
                                        &cache);
    if (weights != NULL)
        *weights = tensor_reshape(tensor_copy(cache.attention.weights),
                                  SHAPE(queries->shape[0], layer->num_heads, queries->shape[1],
                                        keys->shape[1]));
    multihead_cache_free(&cache);
    return out;
}

/* Decoding T tokens one at a time equals the full causal layer at every
 * step: the clear step computes the same products in the same order, so
 * the two agree to the last bit; the tolerance is the promise, 1e-6 of the
 * output's size. */
static void check_decode_equals_causal(int H, int G, uint64_t seed)
{
    Rng rng = rng_new(seed);
    const int B = 3, T = 9, D = 12;
    MultiHeadAttention *layer = multihead_new_grouped(D, D, D, D, H, G, 0.0f, true, &rng);
    Tensor *tokens = random_tokens(&rng, B, T, D);
    Tensor *full = causal_forward(layer, tokens);
    Tensor *decoded = decode_sequence(layer, tokens);
    const float largest = tensor_max_abs(full);
    cr_expect_gt(largest, 0.1f);
    cr_expect_leq(tensor_max_abs_diff(decoded, full), 1e-6f * largest,
                  "H %d G %d: decoded differs from the causal layer by %g", H, G,
                  (double)tensor_max_abs_diff(decoded, full));
    /* and the mask matters: without it token 0 would see the future */
    Tensor *unmasked = grouped_forward(layer, tokens, tokens, tokens, NULL, NULL);
    cr_expect_gt(fabsf(unmasked->data[0] - decoded->data[0]) +
                 fabsf(unmasked->data[1] - decoded->data[1]), 1e-3f);
    TENSOR_FREE(tokens, full, decoded, unmasked);
    multihead_free(layer);
}

Test(decode, multi_head_cache_equals_causal_layer) { check_decode_equals_causal(4, 4, 1); }
Test(decode, grouped_cache_equals_causal_layer) { check_decode_equals_causal(6, 2, 2); }
Test(decode, multi_query_cache_equals_causal_layer) { check_decode_equals_causal(4, 1, 3); }

Test(decode, cache_rows_hold_each_tokens_keys_and_values)
{
    /* after 3 steps, row t of head g of sequence b is token t's projection */
    Rng rng = rng_new(7);
    const int B = 2, T = 3, D = 8, H = 4, G = 2, d = 2;
    MultiHeadAttention *layer = multihead_new_grouped(D, D, D, D, H, G, 0.0f, true, &rng);
    Tensor *tokens = random_tokens(&rng, B, T, D);
    KVCache *cache = kv_cache_new(B, G, 5, d);
    for (int t = 0; t < T; t++) {
        Tensor *token = tensor_zeros(SHAPE(B, D));
        for (int b = 0; b < B; b++)
            memcpy(token->data + b * D, &AT3(tokens, b, t, 0), D * sizeof(float));
        tensor_free(decode_step(layer, cache, token));
        tensor_free(token);
    }
    cr_expect_eq(cache->length, 3);
    Tensor *k = linear(tokens, layer->W_k, layer->b_k);   /* (B, T, G*d) */
    Tensor *v = linear(tokens, layer->W_v, layer->b_v);
    for (int b = 0; b < B; b++)
        for (int g = 0; g < G; g++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++) {
                    cr_expect_eq(kv_cache_key(cache, b, g, t)[i], AT3(k, b, t, g * d + i));
                    cr_expect_eq(kv_cache_value(cache, b, g, t)[i], AT3(v, b, t, g * d + i));
                }
    TENSOR_FREE(tokens, k, v);
    kv_cache_free(cache);
    multihead_free(layer);
}

static void fill_cache_past_capacity(void)
{
    KVCache *cache = kv_cache_new(1, 1, 1, 2);
    Tensor *kv = tensor_ones(SHAPE(1, 2));
    kv_cache_append(cache, kv, kv);
    kv_cache_append(cache, kv, kv);
}

Test(decode, a_full_cache_stops_with_one_line)
{
    expect_stops_with(fill_cache_past_capacity,
                      "kv_cache_append: the cache is full: its capacity is 1 tokens\n");
}

/* ---- grouping is repetition ---------------------------------------------------- */

/* weight (G*d, Din) -> (H*d, Din): each head's d rows repeated H / G times */
static Tensor *repeat_rows(const Tensor *w, int G, int H)
{
    const int d = w->shape[0] / G;
    const int cols = w->ndim == 2 ? w->shape[1] : 1;
    Tensor *as_heads = tensor_reshape(tensor_copy(w), SHAPE(G, d, cols));
    Tensor *repeated = repeat_kv_heads(as_heads, G, H);   /* (H, d, cols) */
    tensor_free(as_heads);
    return w->ndim == 2 ? tensor_reshape(repeated, SHAPE(H * d, cols))
                        : tensor_reshape(repeated, SHAPE(H * d));
}

Test(grouped, equals_multi_head_with_key_value_heads_repeated)
{
    Rng rng = rng_new(11);
    const int B = 2, T = 4, K = 5, D = 12, H = 6, G = 2;
    MultiHeadAttention *grouped = multihead_new_grouped(D, 7, 5, D, H, G, 0.0f, true, &rng);
    MultiHeadAttention repeated = *grouped;
    repeated.num_kv_heads = H;
    repeated.W_k = repeat_rows(grouped->W_k, G, H);
    repeated.W_v = repeat_rows(grouped->W_v, G, H);
    repeated.b_k = repeat_rows(grouped->b_k, G, H);
    repeated.b_v = repeat_rows(grouped->b_v, G, H);
    cr_assert_eq(repeated.W_k->shape[0], D);

    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, D));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, 7));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, 5));
    ValidLens *valid_lens = valid_lens_1d((const int[]){5, 3}, B);
    Tensor *w_grouped = NULL, *w_repeated = NULL;
    Tensor *a = grouped_forward(grouped, queries, keys, values, valid_lens, &w_grouped);
    Tensor *b = multihead_forward(&repeated, queries, keys, values, valid_lens, false, NULL,
                                  &w_repeated);
    cr_expect_eq(tensor_max_abs_diff(a, b), 0.0f);
    cr_expect_eq(tensor_max_abs_diff(w_grouped, w_repeated), 0.0f);
    /* query heads 0, 1, 2 share key head 0: with queries that differ, their
     * weights differ even though their keys are the same */
    cr_expect_gt(fabsf(AT4(w_grouped, 0, 0, 0, 0) - AT4(w_grouped, 0, 1, 0, 0)), 1e-4f);
    TENSOR_FREE(queries, keys, values, a, b, w_grouped, w_repeated, repeated.W_k, repeated.W_v,
                repeated.b_k, repeated.b_v);
    valid_lens_free(valid_lens);
    multihead_free(grouped);
}

static void plain_layer_on_shared_heads(void)
{
    Rng rng = rng_new(3);
    MultiHeadAttention *layer = multihead_new_grouped(8, 8, 8, 8, 4, 2, 0.0f, true, &rng);
    Tensor *x = tensor_ones(SHAPE(1, 2, 8));
    multihead_forward(layer, x, x, x, NULL, false, NULL, NULL);
}

Test(grouped, chapter_05s_layer_sends_shared_heads_to_the_grouped_one)
{
    expect_stops_with(plain_layer_on_shared_heads,
                      "check_all_kv_heads: the layer shares 2 key-value heads between 4 query "
                      "heads: run it with grouped_forward_cache (attention_layer.h)\n");
}

Test(grouped, all_kv_heads_is_the_multi_head_layer_drawn_alike)
{
    /* G = H draws the same numbers as multihead_new: chapter 05's layer */
    Rng r1 = rng_new(5), r2 = rng_new(5);
    MultiHeadAttention *a = multihead_new(8, 8, 8, 8, 2, 0.0f, true, &r1);
    MultiHeadAttention *b = multihead_new_grouped(8, 8, 8, 8, 2, 2, 0.0f, true, &r2);
    cr_expect_eq(tensor_max_abs_diff(a->W_k, b->W_k), 0.0f);
    cr_expect_eq(tensor_max_abs_diff(a->b_o, b->b_o), 0.0f);
    cr_expect_eq(a->num_kv_heads, 2);
    multihead_free(a);
    multihead_free(b);
}

/* ---- against PyTorch ---------------------------------------------------------- */

static Tensor *fixture(const char *name, const char *file)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s/%s.npy", FIXTURES, name, file);
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert(x, "%s", err);
    return x;
}

/* The fixture's layer and PyTorch's outputs; the cached decoding, the full
 * causal layer and its backward all agree with them. */
static void check_fixture(const char *name, int H, int G)
{
    MultiHeadAttention layer = {.query_size = 16, .key_size = 16, .value_size = 16,
                                .num_hiddens = 16, .num_heads = H, .num_kv_heads = G,
                                .bias = true};
    const char *names[] = {"W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o"};
    Tensor **slots[] = {&layer.W_q, &layer.W_k, &layer.W_v, &layer.W_o,
                        &layer.b_q, &layer.b_k, &layer.b_v, &layer.b_o};
    for (int i = 0; i < 8; i++)
        *slots[i] = fixture(name, names[i]);
    cr_assert_eq(layer.W_k->shape[0], G * 16 / H);
    Tensor *tokens = fixture(name, "tokens");
    Tensor *expected = fixture(name, "expected_outputs");
    Tensor *grad_output = fixture(name, "grad_output");

    Tensor *decoded = decode_sequence(&layer, tokens);
    cr_expect(tensor_allclose(decoded, expected, 1e-5f, 1e-5f, stderr), "%s: decoded", name);

    ValidLens *causal = valid_lens_causal(tokens->shape[0], tokens->shape[1]);
    MultiHeadCache saved;
    Tensor *full = grouped_forward_cache(&layer, tokens, tokens, tokens, causal, false, NULL,
                                         &saved);
    cr_expect(tensor_allclose(full, expected, 1e-5f, 1e-5f, stderr), "%s: causal layer", name);
    MultiHeadGrads *grads = multihead_grads_new(&layer);
    Tensor *dq = NULL, *dk = NULL, *dv = NULL;
    grouped_backward(&layer, &saved, grad_output, grads, &dq, &dk, &dv, NULL);
    /* the tokens are queries, keys and values at once: three gradients add */
    for (size_t i = 0; i < dq->size; i++)
        dq->data[i] += dk->data[i] + dv->data[i];
    const Tensor *analytic[] = {grads->W_q, grads->W_k, grads->W_v, grads->W_o,
                                grads->b_q, grads->b_k, grads->b_v, grads->b_o, dq};
    const char *grad_names[] = {"expected_grad_W_q", "expected_grad_W_k", "expected_grad_W_v",
                                "expected_grad_W_o", "expected_grad_b_q", "expected_grad_b_k",
                                "expected_grad_b_v", "expected_grad_b_o", "expected_grad_tokens"};
    for (int i = 0; i < 9; i++) {
        Tensor *want = fixture(name, grad_names[i]);
        /* b_k's gradient is 0 up to rounding (chapter 05): an absolute bound */
        cr_expect(tensor_allclose(analytic[i], want, 2e-5f, 1e-4f, stderr), "%s: %s", name,
                  grad_names[i]);
        tensor_free(want);
    }
    TENSOR_FREE(tokens, expected, grad_output, decoded, full, dq, dk, dv);
    for (int i = 0; i < 8; i++)
        tensor_free(*slots[i]);
    valid_lens_free(causal);
    multihead_cache_free(&saved);
    multihead_grads_free(grads);
}

Test(decode_pytorch, multi_head_four_kv_heads) { check_fixture("heads4_kv4", 4, 4); }
Test(decode_pytorch, grouped_two_kv_heads) { check_fixture("heads4_kv2", 4, 2); }
Test(decode_pytorch, multi_query_one_kv_head) { check_fixture("heads4_kv1", 4, 1); }

Test(decode_pytorch, fixtures_are_not_trivial)
{
    /* heads that share keys still attend differently, and the layers of
     * different G give different outputs */
    Tensor *a = fixture("heads4_kv1", "expected_outputs");
    Tensor *b = fixture("heads4_kv4", "expected_outputs");
    cr_expect_gt(tensor_max_abs(a), 0.1f);
    cr_expect_gt(tensor_max_abs_diff(a, b), 0.05f);
    TENSOR_FREE(a, b);
}

/* ---- the fast step ------------------------------------------------------------ */

/* fast_decode_step against decode_step over 40 tokens: the same cache
 * contents, outputs within rounding of the sums' order (not bit-equal) */
static void check_fast_step(int H, int G, int d, uint64_t seed)
{
    Rng rng = rng_new(seed);
    const int B = 2, T = 40, D = H * d;
    MultiHeadAttention *layer = multihead_new_grouped(D, D, D, D, H, G, 0.0f, true, &rng);
    Tensor *tokens = random_tokens(&rng, B, T, D);
    KVCache *clear = kv_cache_new(B, G, T, d), *fast = kv_cache_new(B, G, T, d);
    float worst = 0.0f;
    for (int t = 0; t < T; t++) {
        Tensor *token = tensor_zeros(SHAPE(B, D));
        for (int b = 0; b < B; b++)
            memcpy(token->data + b * D, &AT3(tokens, b, t, 0), D * sizeof(float));
        Tensor *a = decode_step(layer, clear, token);
        Tensor *f = fast_decode_step(layer, fast, token);
        const float diff = tensor_max_abs_diff(f, a) / tensor_max_abs(a);
        worst = diff > worst ? diff : worst;
        TENSOR_FREE(token, a, f);
    }
    cr_expect_lt(worst, 1e-5f, "H %d G %d d %d: fast step differs by %g relative", H, G, d,
                 (double)worst);
    TENSOR_FREE(tokens);
    kv_cache_free(clear);
    kv_cache_free(fast);
    multihead_free(layer);
}

Test(fast_decode, multi_head_equals_clear_step) { check_fast_step(4, 4, 16, 21); }
Test(fast_decode, grouped_equals_clear_step) { check_fast_step(8, 2, 64, 22); }
Test(fast_decode, multi_query_odd_head_size_equals_clear_step) { check_fast_step(3, 1, 13, 23); }

Test(fast_decode, stream_read_sums_every_float)
{
    /* 1000 floats, not a multiple of the vector block: 0 + 1 + ... + 999 */
    float *x = malloc(1000 * sizeof(float));
    for (int i = 0; i < 1000; i++)
        x[i] = (float)i;
    cr_expect_float_eq(fast_stream_read(x, 1000), 499500.0f, 0.5f);
    cr_expect_float_eq(fast_stream_read(x + 1, 3), 6.0f, 0.0f);
    free(x);
}

/* ---- the program: --from DIR --to DIR ---------------------------------------- */

static void check_program_on_fixture(const char *name, int H, int G)
{
    char dir[64], args[512], path[256], err[NPY_ERR_LEN];
    scratch_dir_make(dir, sizeof dir, "decode_to");
    snprintf(args, sizeof args, "--from %s/%s --heads %d --kv-heads %d --to %s", FIXTURES, name,
             H, G, dir);
    RunResult r = run_program("05_multihead/decode", args);
    cr_expect_eq(r.status, 0, "decode %s: %s", args, r.err);
    snprintf(path, sizeof path, "%s/outputs.npy", dir);
    Tensor *outputs = npy_load(path, err, sizeof err);
    cr_assert(outputs, "%s", err);
    Tensor *expected = fixture(name, "expected_outputs");
    cr_expect(tensor_allclose(outputs, expected, 1e-5f, 1e-5f, stderr), "%s", name);
    TENSOR_FREE(outputs, expected);
    run_result_free(&r);
    scratch_dir_remove(dir);
}

Test(decode_program, from_files_equals_pytorch_for_every_grouping)
{
    check_program_on_fixture("heads4_kv4", 4, 4);
    check_program_on_fixture("heads4_kv2", 4, 2);
    check_program_on_fixture("heads4_kv1", 4, 1);
}

Test(decode_program, file_mode_is_the_decode_files_tool)
{
    const char *const lines[] = {
        "--from " FIXTURES "/heads4_kv2 --heads 4 --kv-heads 2",
        "--capacity 9 --kv-heads 1 --from " FIXTURES "/heads4_kv1 --heads 4",
        "--from " FIXTURES "/heads4_kv2 --heads 4 --kv-heads 2 --capacity 3",
        "--heads 4",
        "--from " FIXTURES "/heads4_kv2 --heads 4 --kv-heads 3",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        expect_same_as_tool("05_multihead/decode", "05_multihead/decode_files", lines[i]);
    RunResult r = run_program("05_multihead/decode", "--from " FIXTURES "/heads4_kv2 --heads 4 "
                              "--kv-heads 2");
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(r.out && strstr(r.out, "decoded " FIXTURES "/heads4_kv2/tokens.npy (2, 7, 16)"),
              "decode --from printed: %s", r.out ? r.out : "");
    run_result_free(&r);
}
