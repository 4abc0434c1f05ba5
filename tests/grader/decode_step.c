/* decode_step.c - grades exercise 5.8, one decoding step with a key-value
 * cache (05_multihead/backward.md), against decode_step (common/kv_cache.c):
 * two caches holding the same earlier tokens get the same new one, through
 * layers with H = G, grouped key-value heads (G < H) and G = 1, and must
 * then give the same output and hold the same keys and values. */
#include "exercises.h"
#include "grader.h"
#include "ops.h"
#include "softmax.h"

#include <math.h>
#include <string.h>

/* The output the step gives when the token attends to the T cached tokens
 * only, not to itself: q (B, D) -> (B, D), new. */
static Tensor *without_itself(const MultiHeadAttention *layer, const KVCache *before,
                              const Tensor *q)
{
    const int H = layer->num_heads, G = layer->num_kv_heads, D = layer->num_hiddens;
    const int d = D / H, B = before->batch_size, T = before->length;
    Tensor *concat = case_keep(tensor_zeros(SHAPE(B, D)));
    float *scores = case_keep(tensor_zeros(SHAPE(T > 0 ? T : 1)))->data;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H && T > 0; h++) {
            const int g = h / (H / G);
            const float *q_row = q->data + (size_t)b * D + (size_t)h * d;
            for (int t = 0; t < T; t++) {
                const float *k_row = kv_cache_key(before, b, g, t);
                float dot = 0.0f;
                for (int i = 0; i < d; i++)
                    dot += q_row[i] * k_row[i];
                scores[t] = dot / sqrtf((float)d);
            }
            softmax_row(scores, T);
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++)
                    concat->data[(size_t)b * D + (size_t)h * d + i] +=
                        scores[t] * kv_cache_value(before, b, g, t)[i];
        }
    return linear(concat, layer->W_o, layer->b_o);
}

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 100, 1, 3);
    int H = index == 0 ? 1 : draw_int(rng, 1, 4), d = draw_size(rng, index, 100, 1, 4);
    int G = index % 3 == 0 ? H : index % 3 == 1 ? 1 : (H % 2 == 0 ? H / 2 : H);
    int D = H * d, capacity = large_case(index, 100) ? draw_int(rng, 200, 400)
                                                      : draw_size(rng, index, 100, 2, 6);
    int filled = index == 3 ? 0 : draw_int(rng, 1, capacity - 1);
    bool bias = index % 2 == 0;
    case_describe("B = %d, D = %d, H = %d, G = %d (d = %d), bias %s, %d tokens cached before",
                  batch, D, H, G, d, bias ? "on" : "off", filled);
    MultiHeadAttention *made = multihead_new_grouped(D, D, D, D, H, G, 0.0f, bias, rng);
    MultiHeadAttention layer = *made;   /* its tensors freed with the case */
    Tensor *params[] = {layer.W_q, layer.W_k, layer.W_v, layer.W_o,
                        layer.b_q, layer.b_k, layer.b_v, layer.b_o};
    static const char *const names[] = {"W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o"};
    for (int i = 0; i < (bias ? 8 : 4); i++) {
        for (size_t j = 0; j < params[i]->size; j++)
            params[i]->data[j] *= 3.0f;   /* so that the scores matter */
        case_input(names[i], params[i]);
    }
    made->W_q = made->W_k = made->W_v = made->W_o = NULL;
    made->b_q = made->b_k = made->b_v = made->b_o = NULL;
    multihead_free(made);

    KVCache *want = kv_cache_new(batch, G, capacity, d), *have = kv_cache_new(batch, G, capacity, d);
    for (int t = 0; t < filled; t++) {
        Tensor *k = draw_normal(rng, 1.0f, SHAPE(batch, G * d));
        Tensor *v = draw_normal(rng, 1.0f, SHAPE(batch, G * d));
        kv_cache_append(want, k, v);
        kv_cache_append(have, k, v);
        TENSOR_FREE(k, v);
    }
    const Tensor *token = case_input("token", draw_normal(rng, 1.0f, SHAPE(batch, D)));
    Tensor *q = case_keep(linear(token, layer.W_q, layer.b_q));
    Tensor *missing_self = case_keep(without_itself(&layer, want, q));
    Tensor *expected = case_keep(decode_step(&layer, want, token));

    case_calling();
    Tensor *got = case_keep(my_decode_step(&layer, have, token));
    case_called();

    /* copied out, so that the caches can be freed before a check leaves */
    int length = have->length;
    const size_t n = (size_t)batch * G * capacity * d;
    float *slots[4] = {want->keys, have->keys, want->values, have->values};
    bool same = true;
    for (int i = 0; i < 4; i += 2)
        for (size_t j = 0; j < n; j++) {
            int t = (int)(j / (size_t)d % (size_t)capacity);
            same = same && (t > filled || memcmp(&slots[i][j], &slots[i + 1][j], sizeof(float)) == 0);
        }
    kv_cache_free(want);
    kv_cache_free(have);
    expect_that(length == filled + 1, 1, "the cache holds %d tokens after the step, %d + 1 "
                "wanted: the new token joins it", length, filled);
    expect_that(same, 1, "the cache's keys or values differ from decode_step's after the "
                "step: the new token's k and v go in at position %d", filled);
    expect_tensor("output", got, SHAPE(batch, D), 3);
    bool like_missing = tensor_allclose(got, missing_self, 1e-4f, 1e-4f, NULL) ||
                        (filled == 0 && !tensor_allclose(got, expected, 1e-4f, 1e-4f, NULL));
    expect_that(!like_missing || tensor_allclose(expected, missing_self, 1e-4f, 1e-4f, NULL), 1,
                "the token attends to the %d tokens before it but not to itself: the causal "
                "mask keeps keys 0 .. %d, its own included, so its key and value join the "
                "cache before it attends", filled, filled);
    expect_finite("output", got, 1);
    expect_close("output", expected, got, 1e-4, 1e-4, G < H ? 2 : 3);
}

const Exercise exercise = {"decode_step", "05_multihead", "5.8", 100, grade_case,
                           "decode_step decode_sequence", "backward.md"};
