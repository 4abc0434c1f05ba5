/*
 * fast_check.c - the fast kernels equal the clear code, without Criterion:
 * what make portability runs under qemu-aarch64, where the vector code of
 * common/fast/ compiles to NEON instead of AVX. tests/test_fast.c checks
 * the same things and more on the build machine; this is its short form
 * for a machine (or an emulator) without the test library.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = query and key size, v = value size.
 *
 * Sizes do not divide the blocks (6 x 16 register tiles, k chunks of 512,
 * query blocks of 96, key blocks of 256), so every edge path runs. The
 * exit status is the verdict: 0 when every comparison holds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "fast/fast_exp.h"
#include "fast/fast_internal.h"
#include "fast/fast_matmul.h"
#include "fast/fast_multihead.h"
#include "fast/streaming_attention.h"
#include "multihead.h"
#include "ops.h"
#include "random.h"
#include "tensor.h"

static int failures;

/* fast against clear: |fast - clear| <= rtol * max|clear| everywhere, a
 * bound a missed or doubled term breaks by orders of magnitude */
static void expect_close(const char *what, const Tensor *fast, const Tensor *clear, float rtol)
{
    const float diff = tensor_max_abs_diff(fast, clear), scale = tensor_max_abs(clear);
    const bool ok = diff <= rtol * scale;
    printf("%-48s largest difference %.1e of %.3g: %s\n", what, (double)diff, (double)scale,
           ok ? "ok" : "FAILED");
    failures += !ok;
}

/* fast_matmul, fast_matmul_bt and fast_linear on 2 threads */
static void check_matmul(Rng *rng)
{
    Tensor *a = tensor_normal(rng, 0.0f, 1.0f, SHAPE(37, 600));
    Tensor *b = tensor_normal(rng, 0.0f, 1.0f, SHAPE(600, 45));
    Tensor *b_t = tensor_normal(rng, 0.0f, 1.0f, SHAPE(45, 600));
    Tensor *bias = tensor_normal(rng, 0.0f, 1.0f, SHAPE(45));
    Tensor *clear[3] = {matmul(a, b), matmul_bt(a, b_t), linear(a, b_t, bias)};
    Tensor *fast[3] = {fast_matmul(a, b, 2), fast_matmul_bt(a, b_t, 2), fast_linear(a, b_t, bias, 2)};
    expect_close("fast_matmul (37, 600) @ (600, 45)", fast[0], clear[0], 1e-5f);
    expect_close("fast_matmul_bt (37, 600) @ (45, 600)^T", fast[1], clear[1], 1e-5f);
    expect_close("fast_linear (37, 600) -> (37, 45)", fast[2], clear[2], 1e-5f);
    tensor_free_all(clear, 3);
    tensor_free_all(fast, 3);
    tensor_free_all((Tensor *[]){a, b, b_t, bias}, 4);
}

/* fast_linear_backward on 2 threads: the weight gradient is grad_y^T x,
 * the transposed product, here with more rows of grad_y^T (210) than one
 * band of packed strips */
static void check_linear_backward(Rng *rng)
{
    Tensor *x = tensor_normal(rng, 0.0f, 1.0f, SHAPE(300, 250));
    Tensor *weight = tensor_normal(rng, 0.0f, 1.0f, SHAPE(210, 250));
    Tensor *grad_y = tensor_normal(rng, 0.0f, 1.0f, SHAPE(300, 210));
    Tensor *clear_weight = tensor_zeros(SHAPE(210, 250)), *fast_weight = tensor_zeros(SHAPE(210, 250));
    Tensor *clear_x = linear_backward(x, weight, grad_y, clear_weight, NULL);
    Tensor *fast_x = fast_linear_backward(x, weight, grad_y, fast_weight, NULL, 2);
    expect_close("fast_linear_backward (300, 250) -> 210: grad x", fast_x, clear_x, 1e-5f);
    expect_close("fast_linear_backward (300, 250) -> 210: grad W", fast_weight, clear_weight,
                 1e-5f);
    tensor_free_all((Tensor *[]){x, weight, grad_y, clear_weight, fast_weight, clear_x, fast_x},
                    7);
}

/* fast_exp_array against expf from underflow to overflow, within 1 ulp */
static void check_exp(void)
{
    enum { N = 200003 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    if (x == NULL || y == NULL) {
        fprintf(stderr, "fast_check: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < N; i++)
        x[i] = -104.0f + 193.0f * (float)i / (float)(N - 1);   /* -104 .. 89 */
    fast_exp_array(x, y, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        /* positive floats in order are integers in order: ulps apart */
        const float want = expf(x[i]);
        int32_t got_bits, want_bits;
        memcpy(&got_bits, &y[i], sizeof got_bits);
        memcpy(&want_bits, &want, sizeof want_bits);
        bad += !(y[i] >= 0.0f && abs(got_bits - want_bits) <= 1);
    }
    printf("%-48s %d of %d beyond 1 ulp of expf: %s\n", "fast_exp_array on [-104, 89]", bad, N,
           bad == 0 ? "ok" : "FAILED");
    failures += bad != 0;
    free(x);
    free(y);
}

/* streaming attention, forward and backward, under valid_lens (B, T) on
 * keys (B, K) */
static void check_streaming(Rng *rng, int B, int T, int K, const ValidLens *valid_lens,
                            const char *mask)
{
    enum { d = 20, v = 12 };
    Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, d));
    Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, d));
    Tensor *values = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, v));
    Tensor *grad_output = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, v));
    AttentionCache cache = {0};
    Tensor *clear = dot_product_attention_cache(queries, keys, values, valid_lens, NULL, &cache);
    Tensor *clear_grads[3], *fast_grads[3], *logsumexp = NULL;
    dot_product_attention_backward(queries, keys, values, &cache, grad_output, &clear_grads[0],
                                   &clear_grads[1], &clear_grads[2]);
    Tensor *fast = streaming_attention_cache(queries, keys, values, valid_lens, 2, &logsumexp);
    streaming_attention_backward(queries, keys, values, valid_lens, fast, logsumexp, grad_output,
                                 2, &fast_grads[0], &fast_grads[1], &fast_grads[2]);
    const char *names[4] = {"streaming_attention", "streaming backward: grad queries",
                            "streaming backward: grad keys", "streaming backward: grad values"};
    const Tensor *fast_all[4] = {fast, fast_grads[0], fast_grads[1], fast_grads[2]};
    const Tensor *clear_all[4] = {clear, clear_grads[0], clear_grads[1], clear_grads[2]};
    for (int i = 0; i < 4; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s, %s", names[i], mask);
        expect_close(what, fast_all[i], clear_all[i], 1e-5f);
    }
    tensor_free_all(clear_grads, 3);
    tensor_free_all(fast_grads, 3);
    tensor_free_all((Tensor *[]){queries, keys, values, grad_output, clear, fast, logsumexp}, 7);
    attention_cache_free(&cache);
}

/* a 2-D mask that leaves one query of each sequence without a key, and
 * the causal mask on one sequence (its key blocks shared by two threads) */
static void check_streaming_masks(Rng *rng)
{
    enum { B = 2, T = 100, K = 300 };
    int lens[B * T];
    for (int i = 0; i < B * T; i++)
        lens[i] = i % T == 7 ? 0 : 1 + (int)((i * 37L) % K);
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    check_streaming(rng, B, T, K, valid_lens, "2-D valid_lens");
    valid_lens_free(valid_lens);
    ValidLens *causal = valid_lens_causal(1, 250);
    check_streaming(rng, 1, 250, 250, causal, "causal");
    valid_lens_free(causal);
}

/* the fast multi-head layer, forward and backward, cross-attention with
 * 1-D valid_lens and biases */
static void check_multihead(Rng *rng)
{
    enum { B = 2, T = 50, K = 70, Dq = 9, Dk = 7, Dv = 5, D = 24, H = 4 };
    MultiHeadAttention *layer = multihead_new(Dq, Dk, Dv, D, H, 0.0f, true, rng);
    Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, Dq));
    Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, Dk));
    Tensor *values = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, Dv));
    Tensor *grad_output = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, D));
    ValidLens *valid_lens = valid_lens_1d((const int[]){K, 33}, B);

    MultiHeadCache cache = {0};
    FastMultiHeadCache fast_cache = {0};
    MultiHeadGrads *clear_grads = multihead_grads_new(layer), *fast_grads = multihead_grads_new(layer);
    Tensor *clear_in[3], *fast_in[3];
    Tensor *clear = multihead_forward_cache(layer, queries, keys, values, valid_lens, false, NULL,
                                            &cache);
    multihead_backward(layer, &cache, grad_output, clear_grads, &clear_in[0], &clear_in[1],
                       &clear_in[2], NULL);
    Tensor *fast = fast_multihead_forward_cache(layer, queries, keys, values, valid_lens, 2,
                                                &fast_cache);
    fast_multihead_backward(layer, &fast_cache, grad_output, fast_grads, &fast_in[0], &fast_in[1],
                            &fast_in[2], 2);
    expect_close("fast_multihead_forward", fast, clear, 1e-5f);
    expect_close("fast_multihead_backward: grad queries", fast_in[0], clear_in[0], 1e-5f);
    expect_close("fast_multihead_backward: grad keys", fast_in[1], clear_in[1], 1e-5f);
    expect_close("fast_multihead_backward: grad values", fast_in[2], clear_in[2], 1e-5f);
    expect_close("fast_multihead_backward: grad W_q", fast_grads->W_q, clear_grads->W_q, 1e-5f);
    expect_close("fast_multihead_backward: grad W_o", fast_grads->W_o, clear_grads->W_o, 1e-5f);
    expect_close("fast_multihead_backward: grad b_v", fast_grads->b_v, clear_grads->b_v, 1e-5f);
    tensor_free_all(clear_in, 3);
    tensor_free_all(fast_in, 3);
    tensor_free_all((Tensor *[]){queries, keys, values, grad_output, clear, fast}, 6);
    multihead_cache_free(&cache);
    fast_multihead_cache_free(&fast_cache);
    multihead_grads_free(clear_grads);
    multihead_grads_free(fast_grads);
    valid_lens_free(valid_lens);
    multihead_free(layer);
}

int main(void)
{
    Rng rng = rng_new(23);
    printf("fast kernels against the clear code, vectors of %d floats\n", fast_vector_width());
    check_matmul(&rng);
    check_linear_backward(&rng);
    check_exp();
    check_streaming_masks(&rng);
    check_multihead(&rng);
    printf("%s\n", failures == 0 ? "fast_check: every fast kernel equals the clear code"
                                 : "fast_check: FAILED");
    return failures == 0 ? 0 : 1;
}
