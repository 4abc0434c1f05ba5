/* kv_cache_append.c - grades exercise 5.3, one token written into the
 * key-value cache, against kv_cache_append (common/kv_cache.c): two caches
 * holding the same earlier tokens get the same new one, and must then hold
 * the same bits everywhere and the same length. */
#include "exercises.h"
#include "grader.h"

#include <string.h>

/* The cache's flat index of (b, g, t, j) as "[b, g, t, j]". */
static const char *slot_name(char *buf, size_t len, const KVCache *c, size_t flat)
{
    int d = c->head_size, T_max = c->capacity, G = c->num_kv_heads;
    snprintf(buf, len, "[b %d, head %d, position %d, feature %d]",
             (int)(flat / ((size_t)G * T_max * d)), (int)(flat / ((size_t)T_max * d) % (size_t)G),
             (int)(flat / (size_t)d % (size_t)T_max), (int)(flat % (size_t)d));
    return buf;
}

static void expect_same_cache(const char *what, const KVCache *want, const float *want_data,
                              const float *have_data)
{
    size_t n = (size_t)want->batch_size * want->num_kv_heads * want->capacity * want->head_size;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&want_data[i], &have_data[i], sizeof(float)) == 0)
            continue;
        char slot[128];
        slot_name(slot, sizeof slot, want, i);
        int t = (int)(i / (size_t)want->head_size % (size_t)want->capacity);
        expect_that(false, t == want->length - 1 ? 3 : 2,
                    "%s %s is %.6g, must be %.6g: a cache that held %d tokens writes the new "
                    "one at position %d and leaves every other position as it was", what, slot,
                    (double)have_data[i], (double)want_data[i], want->length - 1,
                    want->length - 1);
    }
}

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 100, 1, 3);
    int G = index == 1 ? 1 : draw_size(rng, index, 100, 1, 3);
    int d = index == 2 ? 1 : draw_size(rng, index, 100, 1, 4);
    int capacity = draw_size(rng, index, 100, 1, 5);
    int filled = index == 0 ? 0 : draw_int(rng, 0, capacity - 1);
    case_describe("B = %d, G = %d, d = %d, capacity %d, %d tokens cached before", batch, G, d,
                  capacity, filled);
    KVCache *want = kv_cache_new(batch, G, capacity, d), *have = kv_cache_new(batch, G, capacity, d);
    for (int t = 0; t < filled; t++) {
        Tensor *k = case_keep(draw_normal(rng, 1.0f, SHAPE(batch, G * d)));
        Tensor *v = case_keep(draw_normal(rng, 1.0f, SHAPE(batch, G * d)));
        kv_cache_append(want, k, v);
        kv_cache_append(have, k, v);
    }
    const Tensor *k = case_input("k", draw_normal(rng, 1.0f, SHAPE(batch, G * d)));
    const Tensor *v = case_input("v", draw_normal(rng, 1.0f, SHAPE(batch, G * d)));
    kv_cache_append(want, k, v);

    case_calling();
    my_kv_cache_append(have, k, v);
    case_called();

    int length = have->length;
    if (length != want->length) {
        kv_cache_free(want);
        kv_cache_free(have);
        expect_that(false, 2,
                    "the cache's length is %d after one token was added to %d: it must "
                    "advance by exactly 1", length, filled);
    }
    /* copied out, so that the caches can be freed before a check leaves */
    size_t n = (size_t)batch * G * capacity * d;
    Tensor *keys_want = case_keep(tensor_from(want->keys, SHAPE((int)n)));
    Tensor *keys_have = case_keep(tensor_from(have->keys, SHAPE((int)n)));
    Tensor *values_want = case_keep(tensor_from(want->values, SHAPE((int)n)));
    Tensor *values_have = case_keep(tensor_from(have->values, SHAPE((int)n)));
    KVCache shape = *want;
    kv_cache_free(want);
    kv_cache_free(have);
    expect_same_cache("keys", &shape, keys_want->data, keys_have->data);
    expect_same_cache("values", &shape, values_want->data, values_have->data);
}

const Exercise exercise = {"kv_cache_append", "05_multihead", "5.3", 100, grade_case,
                           "kv_cache_append decode_step", NULL};
