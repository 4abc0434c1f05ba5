/*
 * test_fast.c - the fast versions equal the clear ones:
 *   fast_threads.c          every share of a parallel loop runs once, on
 *                           any thread count, nested or from two threads
 *   fast_matmul.c           against matmul / matmul_bt / linear (ops.c)
 *   fast_exp.c              against libm's expf over the whole float range
 *   streaming_attention.c   against dot_product_attention (attention.c),
 *                           its backward against dot_product_attention_backward
 *   fast_multihead.c        against multihead_forward (multihead.c), its
 *                           backward against multihead_backward
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, v = value size.
 *
 * Sizes are chosen not to divide the block sizes: 6 x 16 register tiles
 * (12 x 32 with AVX-512), k chunks of 512, column chunks of 512, query blocks of 96, key blocks of
 * 256. Speed is never tested here; `make bench` measures it.
 */
#define _POSIX_C_SOURCE 200809L   /* fork, alarm */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "fast/fast_exp.h"
#include "fast/fast_internal.h"
#include "fast/fast_layer_norm.h"
#include "fast/fast_matmul.h"
#include "helpers.h"
#include "learn/layer_norm.h"
#include "multihead.h"
#include "fast/fast_multihead.h"
#include "fast/fast_threads.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "fast/streaming_attention.h"
#include "tensor.h"

/* ---- the workers ------------------------------------------------------------- */

/* What a parallel loop of the tests records: how often each share ran,
 * and, with nested set, a loop of 3 shares inside each share. */
typedef struct {
    atomic_int runs[16];
    atomic_int nested_runs[3];
    bool nested;
} ShareCount;

static void count_nested(void *arg, int thread)
{
    atomic_fetch_add(&((ShareCount *)arg)->nested_runs[thread], 1);
}

static void count_share(void *arg, int thread)
{
    ShareCount *count = arg;
    atomic_fetch_add(&count->runs[thread], 1);
    if (count->nested)
        fast_parallel(3, count_nested, count);
}

/* calls loops of num_threads shares; expects each share to have run calls
 * times, and the nested shares calls * num_threads times */
static void expect_each_share_once(ShareCount *count, int num_threads, int calls)
{
    for (int t = 0; t < 16; t++)
        cr_expect_eq(atomic_load(&count->runs[t]), t < num_threads ? calls : 0,
                     "%d threads: share %d ran %d times in %d calls", num_threads, t,
                     atomic_load(&count->runs[t]), calls);
    for (int t = 0; count->nested && t < 3; t++)
        cr_expect_eq(atomic_load(&count->nested_runs[t]), calls * num_threads,
                     "nested share %d ran %d times", t, atomic_load(&count->nested_runs[t]));
}

Test(fast_threads, every_share_runs_once_per_call_on_any_thread_count)
{
    /* thread counts going up and down: workers started by one call wait
     * for the next, and those a call does not need sit it out */
    const int counts[] = {1, 2, 5, 3, 16, 2, 1, 7};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        ShareCount count = {0};
        for (int call = 0; call < 500; call++)
            fast_parallel(counts[i], count_share, &count);
        expect_each_share_once(&count, counts[i], 500);
    }
    /* stopped, the workers start again on the next call */
    fast_threads_stop();
    ShareCount count = {0};
    fast_parallel(4, count_share, &count);
    expect_each_share_once(&count, 4, 1);
}

Test(fast_threads, a_loop_inside_a_share_runs_all_its_shares)
{
    ShareCount count = {.nested = true};
    for (int call = 0; call < 100; call++)
        fast_parallel(2, count_share, &count);
    expect_each_share_once(&count, 2, 100);
}

static void *loop_from_a_thread(void *arg)
{
    for (int call = 0; call < 300; call++)
        fast_parallel(3, count_share, arg);
    return NULL;
}

Test(fast_threads, two_threads_calling_at_once_both_get_every_share)
{
    /* one owns the workers at a time; the other runs its shares itself */
    ShareCount first = {0}, second = {0};
    pthread_t other;
    cr_assert_eq(pthread_create(&other, NULL, loop_from_a_thread, &second), 0);
    loop_from_a_thread(&first);
    pthread_join(other, NULL);
    expect_each_share_once(&first, 3, 300);
    expect_each_share_once(&second, 3, 300);
}

/* one thread more for each FAST_FLOPS_PER_THREAD of work, never more than
 * asked for, never fewer than one */
Test(fast_threads, a_thread_for_each_share_of_work_it_is_worth)
{
    const double per = FAST_FLOPS_PER_THREAD;
    cr_expect_eq(fast_threads_worth(2, 0.0), 1);
    cr_expect_eq(fast_threads_worth(2, 0.9 * per), 1);    /* d2l-sized: one thread */
    cr_expect_eq(fast_threads_worth(2, 1.0 * per), 2);
    cr_expect_eq(fast_threads_worth(4, 2.5 * per), 3);
    cr_expect_eq(fast_threads_worth(4, 4.0 * per), 4);
    cr_expect_eq(fast_threads_worth(4, 1e15), 4);
    cr_expect_eq(fast_threads_worth(0, 1e15), 1);
}

Test(fast_threads, a_forked_child_runs_every_share)
{
    /* fork copies the calling thread alone: the child must not wait for
     * the parent's workers (the benchmark forks a child per line); alarm
     * turns a wait into a failure */
    ShareCount count = {0};
    fast_parallel(2, count_share, &count);
    /* long enough for the worker to stop polling and sleep */
    nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        alarm(20);
        ShareCount in_child = {0};
        for (int call = 0; call < 50; call++)
            fast_parallel(3, count_share, &in_child);
        _exit(atomic_load(&in_child.runs[2]) == 50 ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the forked child's loops did not run every share (status %d)", status);
}

/* ---- fast matmul ------------------------------------------------------------- */

/* A sum of k products rounded in any order, with or without fused
 * multiply-adds, is within k * eps * sum_p |a_ip b_pj| of the exact sum; two
 * such sums are within twice that of each other. The bound is per element,
 * from |A| @ |B|, so a wrong element (a missed or doubled product) is far
 * outside it. */
static void expect_product_close(const float *actual, const float *expected,
                                 const float *magnitude, int m, int n, int k, const char *what)
{
    int shown = 0, bad = 0;
    for (int i = 0; i < m * n; i++) {
        float tolerance = 2.0f * (float)(k + 1) * FLT_EPSILON * magnitude[i] + 1e-30f;
        if (!(fabsf(actual[i] - expected[i]) <= tolerance)) {
            if (shown++ < 5)
                fprintf(stderr, "%s: element (%d, %d) is %.9g, expected %.9g (tolerance %.3g)\n",
                        what, i / n, i % n, (double)actual[i], (double)expected[i],
                        (double)tolerance);
            bad++;
        }
    }
    cr_expect_eq(bad, 0, "%s: %d of %d elements differ from the clear matmul", what, bad, m * n);
}

static float *random_floats(Rng *rng, size_t count)
{
    float *x = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        x[i] = rng_normal(rng);
    return x;
}

static float *absolute(const float *x, size_t count)
{
    float *y = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        y[i] = fabsf(x[i]);
    return y;
}

/* A (m, k) @ B (k, n), both forms, 1 and 2 threads, against the clear kernels. */
static void check_matmul(int m, int k, int n)
{
    Rng rng = rng_new((uint64_t)(m * 1000003 + k * 1009 + n));
    float *a = random_floats(&rng, (size_t)m * k);
    float *b = random_floats(&rng, (size_t)k * n);      /* (k, n) */
    float *b_t = malloc((size_t)k * n * sizeof(float));  /* the same matrix as (n, k) */
    for (int p = 0; p < k; p++)
        for (int j = 0; j < n; j++)
            b_t[(size_t)j * k + p] = b[(size_t)p * n + j];
    float *abs_a = absolute(a, (size_t)m * k), *abs_b = absolute(b, (size_t)k * n);
    float *expected = malloc((size_t)m * n * sizeof(float));
    float *magnitude = malloc((size_t)m * n * sizeof(float));
    float *actual = malloc((size_t)m * n * sizeof(float));
    float *actual_2 = malloc((size_t)m * n * sizeof(float));
    matmul_raw(a, b, expected, m, k, n);
    matmul_raw(abs_a, abs_b, magnitude, m, k, n);

    char what[96];
    for (int threads = 1; threads <= 2; threads++) {
        fast_matmul_raw(a, b, actual, m, k, n, threads);
        snprintf(what, sizeof what, "fast_matmul_raw (%d, %d, %d), %d threads", m, k, n, threads);
        expect_product_close(actual, expected, magnitude, m, n, k, what);
        fast_matmul_bt_raw(a, b_t, actual_2, m, k, n, threads);
        snprintf(what, sizeof what, "fast_matmul_bt_raw (%d, %d, %d), %d threads", m, k, n, threads);
        expect_product_close(actual_2, expected, magnitude, m, n, k, what);
        /* Threads split the rows; every element is still summed by one
         * thread in the same order, so the answers are bit for bit equal. */
        cr_expect(memcmp(actual, actual_2, (size_t)m * n * sizeof(float)) == 0,
                  "(%d, %d, %d): B and B^T forms differ bitwise", m, k, n);
    }
    free(a); free(b); free(b_t); free(abs_a); free(abs_b);
    free(expected); free(magnitude); free(actual); free(actual_2);
}

Test(fast_matmul, equals_clear_on_sizes_that_do_not_divide_the_blocks)
{
    check_matmul(1, 1, 1);
    check_matmul(5, 3, 7);          /* smaller than one register tile */
    check_matmul(6, 16, 16);        /* exactly one AVX2 tile */
    check_matmul(12, 40, 32);       /* exactly one AVX-512 tile */
    check_matmul(13, 37, 29);
    check_matmul(61, 600, 45);      /* k crosses a 512 chunk */
    check_matmul(20, 513, 530);     /* k one past a chunk, n crosses 512 */
    check_matmul(14, 1100, 40);     /* k in three chunks */
}

/* B^T (n, k) packed into panels: each value lands at its place, and the
 * columns past n are zeros, whatever the memory held (NaN here), for n
 * below, at and past a square of 8 and a panel, k in and past squares. */
Test(fast_matmul, transposed_panels_hold_every_value_and_zeros_past_n)
{
    const int nr = 2 * fast_vector_width();   /* FAST_NR of the kernels as built */
    const int ns[] = {1, 5, 8, 13, 16, 17, 33}, ks[] = {1, 7, 8, 20};
    Rng rng = rng_new(21);
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
            const int n = ns[i], k = ks[j];
            float *b_t = random_floats(&rng, (size_t)n * k);
            const size_t size = fast_panels_size(k, n);
            cr_assert_eq(size, (size_t)(n + nr - 1) / nr * nr * k);
            float *panels = fast_alloc_panels(size);
            for (size_t e = 0; e < size; e++)
                panels[e] = NAN;
            fast_pack_panels(b_t, (size_t)k, true, k, n, panels);
            int wrong = 0;
            for (int col = 0; col < (n + nr - 1) / nr * nr; col++)
                for (int p = 0; p < k; p++) {
                    const float got = panels[((size_t)(col / nr) * k + p) * nr + col % nr];
                    const float want = col < n ? b_t[(size_t)col * k + p] : 0.0f;
                    wrong += memcmp(&got, &want, sizeof got) != 0;
                }
            cr_expect_eq(wrong, 0, "n %d, k %d: %d values out of place", n, k, wrong);
            free(b_t);
            fast_free_panels(panels);
        }
}

Test(fast_matmul, threads_give_bitwise_the_same_answer)
{
    const int m = 97, k = 70, n = 33;
    Rng rng = rng_new(11);
    float *a = random_floats(&rng, (size_t)m * k), *b = random_floats(&rng, (size_t)k * n);
    float *c1 = malloc((size_t)m * n * sizeof(float)), *c2 = malloc((size_t)m * n * sizeof(float));
    float *c3 = malloc((size_t)m * n * sizeof(float));
    fast_matmul_raw(a, b, c1, m, k, n, 1);
    fast_matmul_raw(a, b, c2, m, k, n, 2);
    fast_matmul_raw(a, b, c3, m, k, n, 5);
    cr_expect(memcmp(c1, c2, (size_t)m * n * sizeof(float)) == 0, "1 and 2 threads differ");
    cr_expect(memcmp(c1, c3, (size_t)m * n * sizeof(float)) == 0, "1 and 5 threads differ");
    free(a); free(b); free(c1); free(c2); free(c3);
}

/* Tall products, as a layer's projections are: threads take blocks of
 * rows in turn, whichever comes first, over B packed once (one chunk of
 * it, or all of it packed beforehand, k and n then over several chunks).
 * Whichever thread sums a row, the sums are the same: 1, 2 and 3 threads
 * give the same bits, and the clear product's values. */
Test(fast_matmul, rows_taken_in_blocks_give_the_same_bits_on_any_thread_count)
{
    enum { m = 1000, k = 600, n = 560, k1 = 300, n1 = 200 };
    Rng rng = rng_new(14);
    float *a = random_floats(&rng, (size_t)m * k), *b = random_floats(&rng, (size_t)k * n);
    float *expected = malloc((size_t)m * n * sizeof(float));
    float *magnitude = malloc((size_t)m * n * sizeof(float));
    float *abs_a = absolute(a, (size_t)m * k), *abs_b = absolute(b, (size_t)k * n);
    float *panels = fast_alloc_panels(fast_panels_size(k, n));
    fast_pack_panels(b, n, false, k, n, panels);
    float *c[3], *c1[3];
    for (int t = 0; t < 3; t++) {
        c[t] = malloc((size_t)m * n * sizeof(float));
        c1[t] = malloc((size_t)m * n1 * sizeof(float));
        /* the first k1 columns of A and the (k1, n1) corner of B: one chunk */
        fast_gemm(m, n1, k1, a, k, false, b, n, false, c1[t], n1, false, t + 1);
        /* accumulating onto C = 1 */
        for (size_t i = 0; i < (size_t)m * n; i++)
            c[t][i] = 1.0f;
        fast_gemm_packed(m, n, k, a, k, panels, NULL, c[t], n, true, t + 1);
    }
    for (int t = 1; t < 3; t++) {
        cr_expect(memcmp(c1[t], c1[0], (size_t)m * n1 * sizeof(float)) == 0,
                  "fast_gemm (%d, %d, %d): %d threads differ from 1", m, k1, n1, t + 1);
        cr_expect(memcmp(c[t], c[0], (size_t)m * n * sizeof(float)) == 0,
                  "fast_gemm_packed (%d, %d, %d): %d threads differ from 1", m, k, n, t + 1);
    }
    matmul_raw(a, b, expected, m, k, n);
    matmul_raw(abs_a, abs_b, magnitude, m, k, n);
    for (size_t i = 0; i < (size_t)m * n; i++)
        c[2][i] -= 1.0f;
    expect_product_close(c[2], expected, magnitude, m, n, k + 2, "fast_gemm_packed, 3 threads");
    /* with a bias: each row starts from it, and C's own values (NaN here)
     * are never read, accumulating or not */
    float *bias = random_floats(&rng, n);
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < (size_t)m * n; i++)
            c[t][i] = NAN;
        fast_gemm_packed(m, n, k, a, k, panels, bias, c[t], n, t == 1, 2 * t + 1);
    }
    cr_expect(memcmp(c[1], c[0], (size_t)m * n * sizeof(float)) == 0,
              "fast_gemm_packed with a bias: 3 threads differ from 1");
    for (size_t i = 0; i < (size_t)m * n; i++)
        c[0][i] -= bias[i % n];
    expect_product_close(c[0], expected, magnitude, m, n, k + 2, "fast_gemm_packed, bias");
    free(bias);
    /* the corner product against the clear one on the same corner */
    float *a1 = malloc((size_t)m * k1 * sizeof(float)), *b1 = malloc((size_t)k1 * n1 * sizeof(float));
    for (int i = 0; i < m; i++)
        memcpy(a1 + (size_t)i * k1, a + (size_t)i * k, (size_t)k1 * sizeof(float));
    for (int p = 0; p < k1; p++)
        memcpy(b1 + (size_t)p * n1, b + (size_t)p * n, (size_t)n1 * sizeof(float));
    float *abs_a1 = absolute(a1, (size_t)m * k1), *abs_b1 = absolute(b1, (size_t)k1 * n1);
    matmul_raw(a1, b1, expected, m, k1, n1);
    matmul_raw(abs_a1, abs_b1, magnitude, m, k1, n1);
    expect_product_close(c1[2], expected, magnitude, m, n1, k1, "fast_gemm, 3 threads");
    for (int t = 0; t < 3; t++) {
        free(c[t]);
        free(c1[t]);
    }
    free(a); free(b); free(expected); free(magnitude); free(abs_a); free(abs_b); fast_free_panels(panels);
    free(a1); free(b1); free(abs_a1); free(abs_b1);
}

/* fast_gemm on views inside bigger matrices, accumulating onto C: the
 * strides must be honoured and nothing outside the view touched. */
Test(fast_matmul, strided_views_and_accumulate)
{
    const int m = 11, n = 19, k = 23, lda = 30, ldb = 25, ldc = 40;
    Rng rng = rng_new(12);
    float *a = random_floats(&rng, (size_t)m * lda);
    float *b = random_floats(&rng, (size_t)n * ldb);          /* B^T rows (n, k) at stride ldb */
    float *c = random_floats(&rng, (size_t)m * ldc);
    float *c_before = malloc((size_t)m * ldc * sizeof(float));
    memcpy(c_before, c, (size_t)m * ldc * sizeof(float));
    fast_gemm(m, n, k, a, lda, false, b, ldb, true, c, ldc, true, 2);
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            float expected = c_before[(size_t)i * ldc + j], magnitude = fabsf(expected);
            if (j < n)
                for (int p = 0; p < k; p++) {
                    float term = a[(size_t)i * lda + p] * b[(size_t)j * ldb + p];
                    expected += term;
                    magnitude += fabsf(term);
                }
            float got = c[(size_t)i * ldc + j];
            float tolerance = j < n ? 2.0f * (k + 2) * FLT_EPSILON * magnitude : 0.0f;
            if (!(fabsf(got - expected) <= tolerance) && bad++ < 5)
                fprintf(stderr, "c[%d][%d] = %.9g, expected %.9g\n", i, j, (double)got,
                        (double)expected);
        }
    cr_expect_eq(bad, 0, "%d elements wrong (columns past n must be untouched)", bad);
    free(a); free(b); free(c); free(c_before);
}

Test(fast_matmul, tensor_forms_and_linear_equal_clear)
{
    Rng rng = rng_new(13);
    Tensor *a = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 14, 9));
    Tensor *b = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 9, 17));
    Tensor *b_t = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 17, 9));
    Tensor *expected = matmul(a, b), *actual = fast_matmul(a, b, 2);
    expect_close(actual, expected, 1e-5f, 1e-5f);
    tensor_free(expected);
    tensor_free(actual);
    expected = matmul_bt(a, b_t);
    actual = fast_matmul_bt(a, b_t, 2);
    expect_close(actual, expected, 1e-5f, 1e-5f);
    tensor_free(expected);
    tensor_free(actual);

    /* linear with and without bias, on a 3-D input: y = x W^T + b */
    Tensor *weight = tensor_uniform(&rng, -0.3f, 0.3f, SHAPE(21, 9));
    Tensor *bias = tensor_uniform(&rng, -0.3f, 0.3f, SHAPE(21));
    for (int with_bias = 0; with_bias <= 1; with_bias++) {
        expected = linear(a, weight, with_bias ? bias : NULL);
        actual = fast_linear(a, weight, with_bias ? bias : NULL, 2);
        cr_expect(tensor_has_shape(actual, SHAPE(3, 14, 21)));
        expect_close(actual, expected, 1e-5f, 1e-5f);
        tensor_free(expected);
        tensor_free(actual);
    }
    tensor_free(a); tensor_free(b); tensor_free(b_t); tensor_free(weight); tensor_free(bias);
}

/* ---- fast exp ---------------------------------------------------------------- */

/* The distance between a and the reference r in units of the spacing of
 * floats at r (2^-149 for subnormals and zero). */
static double ulp_error(float a, float r)
{
    double spacing = ldexp(1.0, -149);
    if (r != 0.0f && isfinite(r)) {
        int e;
        frexpf(fabsf(r), &e);                  /* |r| in [2^(e-1), 2^e) */
        double normal_spacing = ldexp(1.0, e - 24);
        if (normal_spacing > spacing)
            spacing = normal_spacing;
    }
    return fabs((double)a - (double)r) / spacing;
}

/* Compare fast_exp_array with expf on count floats x[i]; returns the worst
 * error in ulp, and counts mismatches of the special results (0, inf, NaN). */
static double worst_exp_error(const float *x, size_t count, int *special_mismatches,
                              float *worst_x)
{
    float *y = malloc(count * sizeof(float));
    fast_exp_array(x, y, count);
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        float r = expf(x[i]);
        if (isnan(r) || isinf(r) || isnan(y[i]) || isinf(y[i])) {
            bool same = (isnan(r) && isnan(y[i])) || (isinf(r) && r == y[i]);
            if (!same && (*special_mismatches)++ < 5)
                fprintf(stderr, "exp(%a): fast %a, expf %a\n", (double)x[i], (double)y[i],
                        (double)r);
            continue;
        }
        double e = ulp_error(y[i], r);
        if (e > worst) {
            worst = e;
            *worst_x = x[i];
        }
    }
    free(y);
    return worst;
}

/* The bound fast_exp.h promises: 1 ulp from libm's expf. It is what was
 * measured on every one of the 2^32 floats against glibc's expf, built with
 * and without FMA, by gcc and by clang. A coefficient off by 3% in its
 * sixth term already breaks it (2 ulp), and so does any lost bit in the
 * range reduction. */
#define EXP_MAX_ULP 1.0

Test(fast_exp, within_1_ulp_of_expf_over_the_whole_float_range)
{
    /* Every 4099th bit pattern: a prime stride, so all exponents, signs and
     * fraction patterns are visited, including NaNs and infinities. */
    const uint64_t stride = 4099;
    size_t count = (size_t)((1ull << 32) / stride) + 1;
    float *x = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        uint32_t bits = (uint32_t)(i * stride);
        memcpy(&x[i], &bits, sizeof bits);
    }
    int special = 0;
    float worst_x = 0.0f;
    double worst = worst_exp_error(x, count, &special, &worst_x);
    cr_expect_eq(special, 0, "%d special results (0, inf, NaN) differ from expf", special);
    cr_expect(worst <= EXP_MAX_ULP, "worst error %.3f ulp at x = %a", worst, (double)worst_x);
    free(x);
}

Test(fast_exp, every_float_near_underflow_and_overflow)
{
    /* All floats in [-104, -86] (results from 0 through the subnormals to
     * the smallest normals) and in [88, 89] (the overflow edge), one by one. */
    const float ranges[2][2] = {{-104.0f, -86.0f}, {88.0f, 89.0f}};
    for (int r = 0; r < 2; r++) {
        size_t count = 0, cap = 1 << 20;
        float *x = malloc(cap * sizeof(float));
        for (float v = ranges[r][0]; v <= ranges[r][1]; v = nextafterf(v, INFINITY)) {
            if (count == cap)
                x = realloc(x, (cap *= 2) * sizeof(float));
            x[count++] = v;
        }
        int special = 0;
        float worst_x = 0.0f;
        double worst = worst_exp_error(x, count, &special, &worst_x);
        cr_expect_eq(special, 0, "[%g, %g]: %d special results differ", (double)ranges[r][0],
                     (double)ranges[r][1], special);
        cr_expect(worst <= EXP_MAX_ULP, "[%g, %g]: worst error %.3f ulp at x = %a",
                  (double)ranges[r][0], (double)ranges[r][1], worst, (double)worst_x);
        free(x);
    }
}

Test(fast_exp, special_values_are_exact)
{
    /* masked scores: exp(-inf) is exactly +0 */
    float zero = fast_expf(-INFINITY);
    cr_expect(zero == 0.0f && !signbit(zero), "exp(-inf) = %a", (double)zero);
    cr_expect(fast_expf(-1e30f) == 0.0f);
    /* -103.9720840454101562 is the largest float whose exp is below
     * 2^-150 (half the smallest subnormal): 0. The next float up gives the
     * smallest subnormal, 2^-149. */
    cr_expect(fast_expf(-0x1.9fe36ap+6f) == 0.0f, "got %a", (double)fast_expf(-0x1.9fe36ap+6f));
    cr_expect(fast_expf(-0x1.9fe368p+6f) == 0x1p-149f, "got %a", (double)fast_expf(-0x1.9fe368p+6f));
    /* overflow: 88.72283172607421875 is the last finite result */
    cr_expect(isfinite(fast_expf(0x1.62e42ep+6f)));
    cr_expect(isinf(fast_expf(0x1.62e430p+6f)) && fast_expf(0x1.62e430p+6f) > 0.0f);
    cr_expect(isinf(fast_expf(INFINITY)) && fast_expf(INFINITY) > 0.0f);
    cr_expect(isnan(fast_expf(NAN)));
    cr_expect(fast_expf(0.0f) == 1.0f);
    cr_expect(fast_expf(-0.0f) == 1.0f);
    cr_expect_float_eq(fast_expf(1.0f), 2.71828182845904524f, 2.5e-7f);
}

Test(fast_exp, shift_sum_is_a_softmax_numerator)
{
    /* 37 values: two whole vectors of 16 (or four of 8) and a tail, so both
     * the vector loop and the padded last vector run; one masked (-inf) */
    float row[37], expected[37];
    const float shift = 1.75f;
    double expected_sum = 0.0;
    for (int j = 0; j < 37; j++) {
        row[j] = j == 6 ? -INFINITY : 0.17f * (float)j - 2.0f;
        expected[j] = expf(row[j] - shift);
        expected_sum += expected[j];
    }
    float sum = fast_exp_shift_sum(row, 37, shift);
    cr_expect(row[6] == 0.0f, "the masked score must give exactly 0, got %a", (double)row[6]);
    cr_expect(floats_allclose(row, expected, 37, 0.0f, 3e-7f, stderr));
    cr_expect_float_eq(sum, (float)expected_sum, 1e-6f * (float)expected_sum);
    /* in place and out of place give the same */
    float x[10] = {-3, -2.5f, -1, -0.5f, 0, 0.25f, 1, 2, 10, -50}, y[10], z[10];
    fast_exp_array(x, y, 10);
    memcpy(z, x, sizeof z);
    fast_exp_array(z, z, 10);
    cr_expect(memcmp(y, z, sizeof y) == 0);
}

Test(fast_exp, weights_within_1_ulp_and_flushed_below_minus_87)
{
    /* fast_exp_sub on arguments from -100 to +10 (x - shift, shifts of
     * every size), 4001 of them, so the padded last vector runs too:
     * within 1 ulp of expf from -87 up, exactly 0 below, and -inf gives 0 */
    enum { N = 4001 };
    float *x = malloc(N * sizeof(float)), *shift = malloc(N * sizeof(float));
    float *y = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        shift[i] = (float)((i * 7919) % 200) - 100.0f;
        x[i] = shift[i] + (-100.0f + 110.0f * (float)i / (N - 1));
    }
    x[17] = -INFINITY;
    fast_exp_sub(x, shift, y, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const float arg = x[i] - shift[i];
        const bool ok = arg < -87.0f ? y[i] == 0.0f : ulp_error(y[i], expf(arg)) <= 1.0;
        if (!ok && bad++ < 5)
            fprintf(stderr, "exp(%a) = %a, expf %a\n", (double)arg, (double)y[i],
                    (double)expf(arg));
    }
    cr_expect(bad == 0, "%d of %d weights off", bad, N);
    cr_expect(y[17] == 0.0f);
    free(x); free(shift); free(y);
}

Test(fast_exp, row_max_over_every_length)
{
    /* every length from 1 to 70 (whole groups of four vectors, single
     * vectors and a partial last one, with 8 or 16 floats a vector), the
     * largest value at each place in turn, behind -inf and a NaN that is
     * passed over; the floats past n are larger still and must not be read */
    enum { N = 70 };
    float row[N + 16];
    for (int n = 1; n <= N; n++)
        for (int at = 0; at < n; at++) {
            for (int j = 0; j < N + 16; j++)
                row[j] = j >= n ? 1e30f : -0.01f * (float)((j * 37) % 101) - 1.0f;
            row[at] = 0.5f + 0.001f * (float)n;
            if (n > 2) {
                row[(at + 1) % n] = -INFINITY;
                row[(at + 2) % n] = NAN;
            }
            const float max = fast_row_max(row, (size_t)n);
            cr_expect(max == row[at], "n %d, largest at %d: got %g, not %g", n, at,
                      (double)max, (double)row[at]);
        }
}

/* The padded forms read the last vector whole: over every length from 1
 * to 70, with NaN, inf and huge values in the padding after n, the same
 * maximum, the same sum and the same n weights, bit for bit, as the plain
 * forms, and the padding of the exps set to 0. */
Test(fast_exp, padded_forms_are_the_plain_ones_bit_for_bit)
{
    enum { N = 70, PAD = 16 };
    const float junk[4] = {NAN, INFINITY, 1e30f, -INFINITY};
    for (int n = 1; n <= N; n++) {
        const int end = (n + fast_vector_width() - 1) / fast_vector_width() *
                        fast_vector_width();
        float plain[N + PAD], padded[N + PAD];
        for (int j = 0; j < N + PAD; j++)
            plain[j] = j >= n ? junk[j % 4] : 0.37f * (float)((j * 29) % 17) - 2.5f;
        if (n > 3)
            plain[n / 2] = -INFINITY;   /* a masked score */
        memcpy(padded, plain, sizeof plain);
        const float max = fast_row_max(plain, (size_t)n);
        const float max_padded = fast_row_max_padded(padded, (size_t)n);
        cr_expect(memcmp(&max, &max_padded, sizeof max) == 0, "n %d: max %a, padded %a", n,
                  (double)max, (double)max_padded);
        const float sum = fast_exp_shift_sum(plain, (size_t)n, max);
        const float sum_padded = fast_exp_shift_sum_padded(padded, (size_t)n, max);
        cr_expect(memcmp(&sum, &sum_padded, sizeof sum) == 0, "n %d: sum %a, padded %a", n,
                  (double)sum, (double)sum_padded);
        cr_expect(memcmp(plain, padded, (size_t)n * sizeof(float)) == 0, "n %d: weights", n);
        for (int j = n; j < end; j++)
            cr_expect(padded[j] == 0.0f, "n %d: padding [%d] is %g, not 0", n, j,
                      (double)padded[j]);
        for (int j = end; j < N + PAD; j++)
            cr_expect(memcmp(&padded[j], &plain[j], sizeof(float)) == 0,
                      "n %d: [%d] past the last vector was written", n, j);
    }
}

/* ---- streaming attention ----------------------------------------------------- */

/* atol 1e-5 of the output's magnitude, as the fast path promises */
static void expect_attention_equal(int B, int T, int K, int d, int v, const ValidLens *valid_lens,
                                   uint64_t seed)
{
    Rng rng = rng_new(seed);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, d));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, d));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, v));
    /* Huge values behind the mask (keys that no query of the sequence may
     * see): a masked key that leaked into a sum would show at once. */
    if (valid_lens != NULL)
        for (int b = 0; b < B; b++) {
            int longest = 0;
            for (int q = 0; q < T; q++)
                if (valid_len_at(valid_lens, b, q) > longest)
                    longest = valid_len_at(valid_lens, b, q);
            for (int j = longest; j < K; j++)
                for (int c = 0; c < v; c++)
                    AT3(values, b, j, c) = 1e6f;
        }
    Tensor *expected = dot_product_attention(queries, keys, values, valid_lens, NULL, NULL);
    const float atol = 1e-5f * tensor_max_abs(expected);
    for (int threads = 1; threads <= 2; threads++) {
        Tensor *actual = streaming_attention(queries, keys, values, valid_lens, threads);
        cr_expect(tensor_has_shape(actual, SHAPE(B, T, v)));
        cr_expect(tensor_allclose(actual, expected, atol, 0.0f, stderr),
                  "streaming (B %d, T %d, K %d, d %d, v %d, %s mask, %d threads) differs",
                  B, T, K, d, v, valid_lens == NULL ? "no" : valid_lens->ndim == 1 ? "1-D" : "2-D",
                  threads);
        tensor_free(actual);
    }
    tensor_free(queries); tensor_free(keys); tensor_free(values); tensor_free(expected);
}

Test(streaming_attention, unmasked_equals_clear)
{
    expect_attention_equal(2, 4, 6, 5, 3, NULL, 21);        /* smaller than any block */
    expect_attention_equal(2, 200, 300, 20, 20, NULL, 22);   /* 96 and 256 do not divide */
    expect_attention_equal(1, 97, 520, 64, 64, NULL, 23);    /* three key blocks, the last of 8 */
}

Test(streaming_attention, cross_attention_equals_clear)
{
    /* queries and keys of different counts, values of another size */
    expect_attention_equal(3, 7, 290, 12, 5, NULL, 24);
    expect_attention_equal(2, 150, 33, 8, 40, NULL, 25);
}

Test(streaming_attention, masked_1d_equals_clear)
{
    const int lens[3] = {3, 257, 1};     /* one inside a block, one past it, one key */
    ValidLens *valid_lens = valid_lens_1d(lens, 3);
    expect_attention_equal(3, 100, 300, 16, 9, valid_lens, 26);
    valid_lens_free(valid_lens);
}

Test(streaming_attention, masked_2d_equals_clear_and_empty_rows_are_zero)
{
    enum { B = 2, T = 110, K = 270, d = 10, v = 7 };
    int lens[B * T];
    Rng rng = rng_new(27);
    for (int i = 0; i < B * T; i++)
        lens[i] = (int)rng_below(&rng, K + 1);   /* anything from 0 to K */
    lens[0] = 0;                                 /* rows with no key at all */
    lens[T + 100] = 0;
    for (int q = 12; q < 24; q++)                /* a whole tile of them, in a block */
        lens[T + q] = 0;                         /* that the other tiles see in part */
    lens[5] = K;
    lens[6] = 256;                               /* exactly one key block */
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    expect_attention_equal(B, T, K, d, v, valid_lens, 28);

    Rng data = rng_new(29);
    Tensor *queries = tensor_normal(&data, 0.0f, 1.0f, SHAPE(B, T, d));
    Tensor *keys = tensor_normal(&data, 0.0f, 1.0f, SHAPE(B, K, d));
    Tensor *values = tensor_normal(&data, 0.0f, 1.0f, SHAPE(B, K, v));
    Tensor *out = streaming_attention(queries, keys, values, valid_lens, 2);
    for (int c = 0; c < v; c++) {
        cr_expect(AT3(out, 0, 0, c) == 0.0f, "a query with no key must give exactly 0");
        cr_expect(AT3(out, 1, 100, c) == 0.0f, "a query with no key must give exactly 0");
        for (int q = 12; q < 24; q++)
            cr_expect(AT3(out, 1, q, c) == 0.0f, "a query with no key must give exactly 0");
    }
    tensor_free(queries); tensor_free(keys); tensor_free(values); tensor_free(out);
    valid_lens_free(valid_lens);
}

Test(streaming_attention, one_key_gives_its_value)
{
    /* valid_len 1: the weight of key 0 is exactly 1, the output its value */
    Rng rng = rng_new(30);
    Tensor *queries = tensor_normal(&rng, 0.0f, 3.0f, SHAPE(1, 5, 4));
    Tensor *keys = tensor_normal(&rng, 0.0f, 3.0f, SHAPE(1, 20, 4));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, 20, 3));
    const int lens[1] = {1};
    ValidLens *valid_lens = valid_lens_1d(lens, 1);
    Tensor *out = streaming_attention(queries, keys, values, valid_lens, 1);
    for (int q = 0; q < 5; q++)
        for (int c = 0; c < 3; c++)
            cr_expect_float_eq(AT3(out, 0, q, c), AT3(values, 0, 0, c), 1e-6f);
    tensor_free(queries); tensor_free(keys); tensor_free(values); tensor_free(out);
    valid_lens_free(valid_lens);
}

Test(streaming_attention, nan_spreads_like_clear)
{
    /* a NaN in one query spoils that query's output and no other; a NaN in
     * a key spoils every query that sees that key */
    enum { B = 1, T = 5, K = 40, d = 4, v = 3 };
    Rng rng = rng_new(37);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, d));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, d));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, v));
    AT3(queries, 0, 1, 2) = NAN;
    AT3(keys, 0, 30, 0) = NAN;
    const int lens[T] = {40, 40, 20, 31, 30};   /* queries 0, 1, 3 see key 30 */
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    Tensor *expected = dot_product_attention(queries, keys, values, valid_lens, NULL, NULL);
    Tensor *actual = streaming_attention(queries, keys, values, valid_lens, 1);
    for (int q = 0; q < T; q++)
        for (int c = 0; c < v; c++) {
            bool nan_expected = isnan(AT3(expected, 0, q, c)), nan_actual = isnan(AT3(actual, 0, q, c));
            cr_expect_eq(nan_actual, nan_expected, "query %d: NaN %d, clear NaN %d", q,
                         nan_actual, nan_expected);
            if (!nan_expected)
                cr_expect_float_eq(AT3(actual, 0, q, c), AT3(expected, 0, q, c), 1e-5f);
        }
    cr_expect(isnan(AT3(actual, 0, 1, 0)) && isnan(AT3(actual, 0, 3, 0)) &&
              !isnan(AT3(actual, 0, 2, 0)) && !isnan(AT3(actual, 0, 4, 0)));
    tensor_free(queries); tensor_free(keys); tensor_free(values);
    tensor_free(expected); tensor_free(actual);
    valid_lens_free(valid_lens);
}

/* ---- causal attention: blocks in the future are skipped ------------------------ */

Test(streaming_attention, causal_never_reads_a_block_wholly_in_the_future)
{
    /* An infinite value in the last key: the clear version multiplies it
     * by its weight 0 for every earlier query (0 * inf = NaN), so every
     * output is NaN there. The streaming one reads that key's block only
     * for the queries of the blocks that reach it: the first two blocks of
     * 96 queries end at key 191 and never read key 299, so their outputs
     * stay finite; query 299 sees the key and gets inf or NaN. */
    enum { n = 300, d = 8 };
    Rng rng = rng_new(66);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, n, d));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, n, d));
    for (int c = 0; c < d; c++)
        AT3(values, 0, n - 1, c) = INFINITY;
    ValidLens *causal = valid_lens_causal(1, n);
    Tensor *out = streaming_attention(x, x, values, causal, 2);
    for (int q = 0; q < 2 * STREAM_BLOCK_QUERIES; q++)
        for (int c = 0; c < d; c++)
            cr_expect(isfinite(AT3(out, 0, q, c)), "query %d read a key block in its future", q);
    cr_expect(!isfinite(AT3(out, 0, n - 1, 0)), "query %d must see key %d", n - 1, n - 1);
    tensor_free(x); tensor_free(values); tensor_free(out);
    valid_lens_free(causal);
}

/* ---- fast multi-head layer ---------------------------------------------------- */

static void expect_multihead_equal(int B, int T, int K, int Dq, int Dk, int Dv, int D, int H,
                                   bool bias, const ValidLens *valid_lens, uint64_t seed)
{
    Rng rng = rng_new(seed);
    MultiHeadAttention *layer = multihead_new(Dq, Dk, Dv, D, H, 0.0f, bias, &rng);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, Dq));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, Dk));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, Dv));
    Tensor *expected = multihead_forward(layer, queries, keys, values, valid_lens, false, NULL, NULL);
    const float atol = 1e-5f * tensor_max_abs(expected);
    Tensor *one = fast_multihead_forward(layer, queries, keys, values, valid_lens, 1);
    Tensor *two = fast_multihead_forward(layer, queries, keys, values, valid_lens, 2);
    cr_expect(tensor_has_shape(one, SHAPE(B, T, D)));
    cr_expect(tensor_allclose(one, expected, atol, 0.0f, stderr),
              "fast layer (B %d, T %d, K %d, D %d, H %d) differs from multihead_forward",
              B, T, K, D, H);
    /* each (sequence, head) job is computed the same way by any thread */
    cr_expect(memcmp(one->data, two->data, one->size * sizeof(float)) == 0,
              "1 and 2 threads differ");
    tensor_free(one); tensor_free(two); tensor_free(expected);
    tensor_free(queries); tensor_free(keys); tensor_free(values);
    multihead_free(layer);
}

Test(multihead_fast, d2l_toy_check_equals_clear)
{
    /* d2l's check: num_hiddens 100, 5 heads (d = 20), batch 2, 4 queries,
     * 6 key-value pairs, valid_lens [3, 2] */
    const int lens[2] = {3, 2};
    ValidLens *valid_lens = valid_lens_1d(lens, 2);
    expect_multihead_equal(2, 4, 6, 100, 100, 100, 100, 5, false, valid_lens, 31);
    expect_multihead_equal(2, 4, 6, 100, 100, 100, 100, 5, true, valid_lens, 32);
    valid_lens_free(valid_lens);
}

Test(multihead_fast, cross_attention_with_2d_mask_equals_clear)
{
    /* d = 32: whole panels of FAST_NR columns with AVX2 (16), the path that
     * packs W once; with AVX-512 (32 columns) d = 32 is one whole panel too */
    enum { B = 2, T = 50, K = 270 };
    int lens[B * T];
    Rng rng = rng_new(33);
    for (int i = 0; i < B * T; i++)
        lens[i] = (int)rng_below(&rng, K + 1);
    lens[7] = 0;
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    expect_multihead_equal(B, T, K, 24, 40, 18, 64, 2, true, valid_lens, 34);
    expect_multihead_equal(B, T, K, 24, 40, 18, 64, 4, false, NULL, 35);   /* d = 16 */
    expect_multihead_equal(1, 130, 97, 30, 30, 30, 48, 8, true, NULL, 36);  /* d = 6 */
    valid_lens_free(valid_lens);
}

/* Self-attention, where one tensor is the queries, keys and values (the
 * same pointer), projects a head's K and V, and Q too, in one product of
 * stacked columns. Each output is the same sum as with three products, so
 * the layer must give the clear layer's values and the same bits as a call
 * whose inputs are copies (different pointers, nothing stacked).
 * shared: 3 queries = keys = values, 2 keys = values, 0 none. */
static void expect_stacked_equal(int B, int T, int K, int D, int H, bool bias, int shared,
                                 const ValidLens *valid_lens, uint64_t seed)
{
    Rng rng = rng_new(seed);
    const int in = 48;
    MultiHeadAttention *layer = multihead_new(in, in, in, D, H, 0.0f, bias, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, in));
    Tensor *other = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, in));
    Tensor *queries = shared == 3 ? x : other, *keys = x;
    Tensor *values = shared >= 2 ? x : tensor_copy(x);
    /* the same numbers at other addresses: nothing is stacked */
    Tensor *queries_copy = tensor_copy(queries), *keys_copy = tensor_copy(x),
           *values_copy = tensor_copy(x);
    Tensor *expected = multihead_forward(layer, queries, keys, values, valid_lens, false, NULL, NULL);
    const float atol = 1e-5f * tensor_max_abs(expected);
    Tensor *unstacked = fast_multihead_forward(layer, queries_copy, keys_copy, values_copy,
                                               valid_lens, 1);
    for (int threads = 1; threads <= 2; threads++) {
        Tensor *actual = fast_multihead_forward(layer, queries, keys, values, valid_lens, threads);
        cr_expect(tensor_allclose(actual, expected, atol, 0.0f, stderr),
                  "shared %d (B %d, T %d, K %d, D %d, H %d), %d threads: differs from "
                  "multihead_forward", shared, B, T, K, D, H, threads);
        cr_expect(memcmp(actual->data, unstacked->data, actual->size * sizeof(float)) == 0,
                  "shared %d (B %d, T %d, K %d, D %d, H %d), %d threads: not the bits of "
                  "separate projections", shared, B, T, K, D, H, threads);
        tensor_free(actual);
    }
    tensor_free(expected); tensor_free(unstacked);
    tensor_free(queries_copy); tensor_free(keys_copy); tensor_free(values_copy);
    if (shared < 2)
        tensor_free(values);
    tensor_free(x); tensor_free(other);
    multihead_free(layer);
}

Test(multihead_fast_stacked, self_attention_same_bits_as_separate_projections)
{
    /* d = 64 and 32: whole panels, stacked; T = K = 301 crosses a chunk of
     * 256 keys; causal and per-sequence valid_lens */
    const int lens[2] = {301, 150};
    ValidLens *valid_lens = valid_lens_1d(lens, 2);
    ValidLens *causal = valid_lens_causal(2, 301);
    expect_stacked_equal(2, 301, 301, 128, 2, true, 3, NULL, 81);
    expect_stacked_equal(2, 301, 301, 128, 2, false, 3, valid_lens, 82);
    expect_stacked_equal(2, 301, 301, 128, 4, true, 3, causal, 83);
    expect_stacked_equal(1, 7, 7, 96, 3, true, 3, NULL, 84);
    valid_lens_free(valid_lens);
    valid_lens_free(causal);
}

Test(multihead_fast_stacked, keys_equal_values_other_queries)
{
    /* keys = values stacked, queries apart: T != K, odd both */
    int lens[2 * 37];
    Rng rng = rng_new(85);
    for (int i = 0; i < 2 * 37; i++)
        lens[i] = (int)rng_below(&rng, 263 + 1);
    ValidLens *valid_lens = valid_lens_2d(lens, 2, 37);
    expect_stacked_equal(2, 37, 263, 128, 2, true, 2, valid_lens, 86);
    expect_stacked_equal(2, 37, 263, 128, 4, false, 2, NULL, 87);
    valid_lens_free(valid_lens);
}

Test(multihead_fast_stacked, nothing_shared_and_d_not_whole_panels)
{
    /* all three tensors apart; and d = 20, 6 (not a multiple of any panel
     * width): the per-head products, whatever is shared */
    expect_stacked_equal(2, 37, 263, 128, 2, true, 0, NULL, 88);
    expect_stacked_equal(2, 41, 41, 100, 5, true, 3, NULL, 89);
    expect_stacked_equal(2, 33, 270, 48, 8, false, 2, NULL, 90);
}

/* ---- backward: fast linear, streaming attention, fast layer --------------------- */

/* A random product given with A transposed: A^T (k, m), B (k, n), and
 * the clear product A B with its magnitude |A| |B| to check it against. */
typedef struct {
    float *a_t, *b, *expected, *magnitude;
} TransposedProduct;

static TransposedProduct transposed_product_new(int m, int n, int k, uint64_t seed)
{
    Rng rng = rng_new(seed);
    TransposedProduct t = {random_floats(&rng, (size_t)k * m), random_floats(&rng, (size_t)k * n),
                           malloc((size_t)m * n * sizeof(float)),
                           malloc((size_t)m * n * sizeof(float))};
    float *a = malloc((size_t)m * k * sizeof(float));
    for (int p = 0; p < k; p++)
        for (int i = 0; i < m; i++)
            a[(size_t)i * k + p] = t.a_t[(size_t)p * m + i];
    float *abs_a = absolute(a, (size_t)m * k), *abs_b = absolute(t.b, (size_t)k * n);
    matmul_raw(a, t.b, t.expected, m, k, n);
    matmul_raw(abs_a, abs_b, t.magnitude, m, k, n);
    free(a); free(abs_a); free(abs_b);
    return t;
}

static void transposed_product_free(TransposedProduct *t)
{
    free(t->a_t); free(t->b); free(t->expected); free(t->magnitude);
}

/* A given transposed, A^T (k, m): fast_gemm (a_transposed) and
 * fast_block_at against the clear product of the transposed copy, k past
 * one 512 chunk, m not a multiple of the tile's rows, with and without
 * accumulating. */
Test(fast_backward, transposed_a_equals_clear)
{
    enum { m = 29, n = 33, k = 520 };
    TransposedProduct product = transposed_product_new(m, n, k, 39);
    float *a_t = product.a_t, *b = product.b;
    float *expected = product.expected, *magnitude = product.magnitude;
    float *actual = malloc((size_t)m * n * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        fast_gemm(m, n, k, a_t, m, true, b, n, false, actual, n, false, threads);
        expect_product_close(actual, expected, magnitude, m, n, k, "fast_gemm, A transposed");
        /* accumulating onto C = 1 gives 1 + A B */
        for (int i = 0; i < m * n; i++)
            actual[i] = 1.0f;
        fast_gemm(m, n, k, a_t, m, true, b, n, false, actual, n, true, threads);
        for (int i = 0; i < m * n; i++)
            actual[i] -= 1.0f;
        expect_product_close(actual, expected, magnitude, m, n, k + 2,
                             "fast_gemm, A transposed, accumulated");
    }
    /* the block kernel on its own, B as panels, k in two chunks; a
     * panel is fast_panels_size(k, 1) floats (this file does not see the
     * fast files' tile constants) */
    float *panels = fast_alloc_panels(fast_panels_size(k, n));
    fast_pack_panels(b, n, false, k, n, panels);
    fast_block_at(m, n, k, a_t, m, panels, fast_panels_size(k, 1), actual, n, false);
    expect_product_close(actual, expected, magnitude, m, n, k, "fast_block_at");
    fast_free_panels(panels);
    free(actual);
    transposed_product_free(&product);
}

/* A weight gradient's shape, C small and k long: A^T's rows are packed a
 * band at a time (several bands here, the last one short, with a short
 * last strip), k runs over several chunks, and the columns or rows are
 * shared out between threads; every thread count gives the same bits. */
Test(fast_backward, transposed_a_in_several_bands_same_bits_on_any_thread_count)
{
    enum { m = 413, n = 71, k = 777 };
    TransposedProduct product = transposed_product_new(m, n, k, 42);
    float *a_t = product.a_t, *b = product.b;
    float *expected = product.expected, *magnitude = product.magnitude;
    float *actual[3];
    for (int t = 0; t < 3; t++) {
        actual[t] = malloc((size_t)m * n * sizeof(float));
        fast_gemm(m, n, k, a_t, m, true, b, n, false, actual[t], n, false, t + 1);
    }
    expect_product_close(actual[0], expected, magnitude, m, n, k, "fast_gemm, A transposed, 1 thread");
    for (int t = 1; t < 3; t++)
        cr_expect(memcmp(actual[t], actual[0], (size_t)m * n * sizeof(float)) == 0,
                  "fast_gemm, A transposed: %d threads differ from 1", t + 1);
    /* the square form, threads sharing columns: B as large as A */
    fast_gemm(n, n, k, b, n, true, b, n, false, actual[1], n, false, 1);
    fast_gemm(n, n, k, b, n, true, b, n, false, actual[2], n, false, 2);
    cr_expect(memcmp(actual[1], actual[2], (size_t)n * n * sizeof(float)) == 0,
              "fast_gemm, A transposed (B^T B): 2 threads differ from 1");
    for (int t = 0; t < 3; t++)
        free(actual[t]);
    transposed_product_free(&product);
}

/* Every gradient within 1e-5 of its own largest magnitude, as the fast
 * path promises; the name says which one differs. */
static void expect_gradient_close(const Tensor *actual, const Tensor *expected, float scale,
                                  const char *name, const char *where)
{
    cr_expect(actual != NULL && tensor_has_shape(actual, expected->ndim, expected->shape),
              "%s (%s): missing or wrong shape", name, where);
    if (actual == NULL)
        return;
    cr_expect(tensor_allclose(actual, expected, 1e-5f * scale, 0.0f, stderr),
              "%s (%s) differs from the clear backward", name, where);
}

Test(fast_backward, gemm_at_and_linear_backward_equal_clear)
{
    /* rows (the weight gradient's k) past a 512 chunk, sizes not
     * multiples of the tile, a short last group of the transposed kernel */
    enum { rows = 601, in = 37, out = 45 };
    Rng rng = rng_new(40);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, rows / 3 + 1, in));
    Tensor *weight = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out, in));
    Tensor *grad_y = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, rows / 3 + 1, out));
    Tensor *grad_weight = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out, in));   /* added into */
    Tensor *grad_bias = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out));
    Tensor *fast_weight = tensor_copy(grad_weight), *fast_bias = tensor_copy(grad_bias);
    Tensor *expected = linear_backward(x, weight, grad_y, grad_weight, grad_bias);
    for (int threads = 1; threads <= 3; threads += 2) {
        Tensor *fw = tensor_copy(fast_weight), *fb = tensor_copy(fast_bias);
        Tensor *actual = fast_linear_backward(x, weight, grad_y, fw, fb, threads);
        const char *where = threads == 1 ? "1 thread" : "3 threads";
        expect_gradient_close(actual, expected, tensor_max_abs(expected), "grad_x", where);
        expect_gradient_close(fw, grad_weight, tensor_max_abs(grad_weight), "grad_weight", where);
        expect_gradient_close(fb, grad_bias, tensor_max_abs(grad_bias), "grad_bias", where);
        tensor_free(actual); tensor_free(fw); tensor_free(fb);
    }
    tensor_free(x); tensor_free(weight); tensor_free(grad_y); tensor_free(grad_weight);
    tensor_free(grad_bias); tensor_free(fast_weight); tensor_free(fast_bias); tensor_free(expected);
}

static bool same_bits(const Tensor *a, const Tensor *b)
{
    return a->size == b->size && memcmp(a->data, b->data, a->size * sizeof(float)) == 0;
}

/* Large enough that the rows and the column sums are shared out
 * (columns in several chunks, the last one short): every output the same bits on 1, 2 and 3
 * threads, and the bias gradient the sum of grad_y's rows taken in order,
 * in double, as the clear rule says. */
Test(fast_backward, linear_and_its_backward_give_the_same_bits_on_any_thread_count)
{
    enum { rows = 1201, in = 70, out = 530 };
    Rng rng = rng_new(41);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(rows, in));
    Tensor *weight = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out, in));
    Tensor *bias = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out));
    Tensor *grad_y = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(rows, out));
    Tensor *y[3], *grad_x[3], *grad_weight[3], *grad_bias[3];
    for (int t = 0; t < 3; t++) {
        y[t] = fast_linear(x, weight, bias, t + 1);
        grad_weight[t] = tensor_zeros(SHAPE(out, in));
        grad_bias[t] = tensor_copy(bias);   /* added into */
        grad_x[t] = fast_linear_backward(x, weight, grad_y, grad_weight[t], grad_bias[t], t + 1);
    }
    for (int t = 1; t < 3; t++) {
        cr_expect(same_bits(y[t], y[0]), "fast_linear: %d threads differ from 1", t + 1);
        cr_expect(same_bits(grad_x[t], grad_x[0]), "grad_x: %d threads differ from 1", t + 1);
        cr_expect(same_bits(grad_weight[t], grad_weight[0]), "grad_weight: %d threads", t + 1);
        cr_expect(same_bits(grad_bias[t], grad_bias[0]), "grad_bias: %d threads", t + 1);
    }
    for (int c = 0; c < out; c++) {
        double sum = 0.0;
        for (int r = 0; r < rows; r++)
            sum += grad_y->data[(size_t)r * out + c];
        cr_expect_eq(grad_bias[2]->data[c], bias->data[c] + (float)sum,
                     "grad_bias[%d] = %.9g, expected %.9g", c, (double)grad_bias[2]->data[c],
                     (double)(bias->data[c] + (float)sum));
    }
    /* each row of y starts from the bias: y - bias is x W^T */
    Tensor *expected = linear(x, weight, bias);
    expect_gradient_close(y[2], expected, tensor_max_abs(expected), "fast_linear", "3 threads");
    for (int t = 0; t < 3; t++)
        TENSOR_FREE(y[t], grad_x[t], grad_weight[t], grad_bias[t]);
    TENSOR_FREE(x, weight, bias, grad_y, expected);
}

/* A weight's gradient from its input packed once (fast_weight_grad_packed)
 * against fast_linear_backward_raw's: the same bits, for rows past a chunk
 * of k (FAST_KC), widths that are not whole panels, and a gradient that
 * already holds a sum (it is added to). */
Test(fast_backward, weight_gradient_from_a_packed_input_is_the_same_bits)
{
    const int shapes[][3] = {{5, 40, 7}, {384, 128, 128}, {700, 70, 33}, {1030, 32, 64}};
    Rng rng = rng_new(43);
    FastGemmScratch scratch;
    fast_gemm_scratch_alloc(&scratch);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int rows = shapes[i][0], in = shapes[i][1], out = shapes[i][2];
        Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(rows, in));
        Tensor *weight = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out, in));
        Tensor *grad_y = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(rows, out));
        Tensor *want = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(out, in)), *got = tensor_copy(want);
        fast_linear_backward_raw(rows, in, out, x->data, weight->data, grad_y->data, NULL,
                                 want->data, NULL, 1);
        float *panels = fast_alloc_panels(fast_panels_size(rows, in));
        fast_pack_panels(x->data, (size_t)in, false, rows, in, panels);
        fast_weight_grad_packed(rows, in, out, panels, grad_y->data, got->data, &scratch);
        cr_expect(same_bits(got, want), "(%d, %d, %d): the packed input's gradient differs",
                  rows, in, out);
        fast_free_panels(panels);
        TENSOR_FREE(x, weight, grad_y, want, got);
    }
    fast_gemm_scratch_free(&scratch);
}

/* The streaming backward against dot_product_attention_backward on the
 * same inputs, with 1, 2 and 3 threads; masked keys and queries with no
 * key must get exactly 0. */
static void expect_attention_backward_equal(int B, int T, int K, int d, int v,
                                            const ValidLens *valid_lens, uint64_t seed)
{
    Rng rng = rng_new(seed);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, d));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, d));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, v));
    Tensor *grad_output = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, v));
    AttentionCache cache = {0};
    Tensor *clear_out = dot_product_attention_cache(queries, keys, values, valid_lens, NULL, &cache);
    Tensor *expected[3];
    dot_product_attention_backward(queries, keys, values, &cache, grad_output, &expected[0],
                                   &expected[1], &expected[2]);
    const char *names[3] = {"grad_queries", "grad_keys", "grad_values"};
    char where[96];
    for (int threads = 1; threads <= 3; threads++) {
        Tensor *lse = NULL;
        Tensor *output = streaming_attention_cache(queries, keys, values, valid_lens, threads, &lse);
        cr_expect(tensor_has_shape(lse, SHAPE(B, T)));
        Tensor *actual[3];
        streaming_attention_backward(queries, keys, values, valid_lens, output, lse, grad_output,
                                     threads, &actual[0], &actual[1], &actual[2]);
        snprintf(where, sizeof where, "B %d, T %d, K %d, d %d, v %d, %s mask, %d threads", B, T,
                 K, d, v, valid_lens == NULL ? "no" : valid_lens->ndim == 1 ? "1-D" : "2-D",
                 threads);
        for (int i = 0; i < 3; i++)
            expect_gradient_close(actual[i], expected[i], tensor_max_abs(expected[i]), names[i],
                                  where);
        /* exact zeros: keys past every length of their sequence, queries
         * that see no key (their lse is -inf) */
        for (int b = 0; b < B; b++) {
            int longest = 0;
            for (int q = 0; q < T; q++) {
                int len = valid_lens ? valid_len_at(valid_lens, b, q) : K;
                longest = len > longest ? len : longest;
                if (len == 0) {
                    cr_expect(isinf(AT2(lse, b, q)) && AT2(lse, b, q) < 0);
                    for (int c = 0; c < d; c++)
                        cr_expect(AT3(actual[0], b, q, c) == 0.0f, "query %d sees no key", q);
                }
            }
            for (int j = longest; j < K; j++) {
                for (int c = 0; c < d; c++)
                    cr_expect(AT3(actual[1], b, j, c) == 0.0f, "key %d is masked", j);
                for (int c = 0; c < v; c++)
                    cr_expect(AT3(actual[2], b, j, c) == 0.0f, "key %d is masked", j);
            }
        }
        for (int i = 0; i < 3; i++)
            tensor_free(actual[i]);
        tensor_free(output);
        tensor_free(lse);
    }
    for (int i = 0; i < 3; i++)
        tensor_free(expected[i]);
    attention_cache_free(&cache);
    tensor_free(clear_out); tensor_free(queries); tensor_free(keys); tensor_free(values);
    tensor_free(grad_output);
}

Test(streaming_backward, unmasked_equals_clear)
{
    expect_attention_backward_equal(2, 4, 6, 5, 3, NULL, 41);       /* smaller than any block */
    expect_attention_backward_equal(2, 200, 300, 20, 20, NULL, 42);  /* blocks do not divide */
    expect_attention_backward_equal(1, 97, 520, 64, 64, NULL, 43);   /* one sequence: keys split */
}

Test(streaming_backward, cross_attention_equals_clear)
{
    expect_attention_backward_equal(3, 7, 290, 12, 5, NULL, 44);
    expect_attention_backward_equal(2, 150, 33, 8, 40, NULL, 45);
}

Test(streaming_backward, masked_equals_clear_with_exact_zeros)
{
    const int lens_1d[3] = {3, 197, 1};   /* inside a key block, past one, a single key */
    ValidLens *valid_lens = valid_lens_1d(lens_1d, 3);
    expect_attention_backward_equal(3, 100, 300, 16, 9, valid_lens, 46);
    valid_lens_free(valid_lens);

    enum { B = 2, T = 110, K = 270 };
    int lens[B * T];
    Rng rng = rng_new(47);
    for (int i = 0; i < B * T; i++)
        lens[i] = (int)rng_below(&rng, 200);   /* keys 200 .. 269 are seen by no query */
    lens[0] = 0;                               /* queries with no key */
    lens[T + 100] = 0;
    lens[6] = 96;                              /* exactly one key block */
    valid_lens = valid_lens_2d(lens, B, T);
    expect_attention_backward_equal(B, T, K, 10, 7, valid_lens, 48);
    valid_lens_free(valid_lens);

    /* one sequence, 2-D lengths: its keys are split between threads */
    int lens_one[130];
    for (int q = 0; q < 130; q++)
        lens_one[q] = q % 5 == 0 ? 0 : 1 + (q * 37) % 250;
    valid_lens = valid_lens_2d(lens_one, 1, 130);
    expect_attention_backward_equal(1, 130, 250, 24, 24, valid_lens, 49);
    valid_lens_free(valid_lens);
}

/* Under valid_lens_causal query i sees keys 0 .. i: a block of queries
 * reads the key blocks up to its own last query and never one past it,
 * and the backward pairs a key block only with the query blocks that see
 * it. Forward and gradients against the clear masked attention, for n = 1,
 * n below one block, n not a multiple of either block size, one sequence
 * (its keys split between threads by block pairs) and several (batch x
 * heads). */
Test(streaming_backward, causal_forward_and_backward_equal_clear_masked)
{
    const int sizes[][2] = {{1, 1}, {2, 7}, {3, 90}, {1, 95}, {1, 250}, {2, 300}, {3, 197},
                            {1, 523}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int B = sizes[i][0], n = sizes[i][1];
        ValidLens *causal = valid_lens_causal(B, n);
        expect_attention_equal(B, n, n, 16, 12, causal, 60 + i);
        expect_attention_backward_equal(B, n, n, 12, 20, causal, 70 + i);
        valid_lens_free(causal);
    }
}

/* Causal attention run twice on each thread count gives the same bits:
 * the output on every count (a query block is computed the same way by
 * any thread), the gradients on a given count (their dQ parts are added
 * in a fixed order). n = 523 is a multiple of neither block size, and
 * with 2 to 4 threads each sequence's keys are split into parts. */
Test(streaming_backward, causal_gives_the_same_bits_on_every_run)
{
    enum { B = 3, n = 523, d = 16 };
    Rng rng = rng_new(80);
    Tensor *q = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, n, d));
    Tensor *k = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, n, d));
    Tensor *v = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, n, d));
    Tensor *g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, n, d));
    ValidLens *causal = valid_lens_causal(B, n);
    Tensor *lse_one, *out_one = streaming_attention_cache(q, k, v, causal, 1, &lse_one);
    for (int threads = 1; threads <= 4; threads++) {
        Tensor *runs[2][3], *lse = NULL, *out = NULL;
        for (int run = 0; run < 2; run++) {
            TENSOR_FREE(out, lse);
            out = streaming_attention_cache(q, k, v, causal, threads, &lse);
            cr_expect(memcmp(out->data, out_one->data, out->size * sizeof(float)) == 0 &&
                          memcmp(lse->data, lse_one->data, lse->size * sizeof(float)) == 0,
                      "causal forward: %d threads differ from 1", threads);
            streaming_attention_backward(q, k, v, causal, out, lse, g, threads, &runs[run][0],
                                         &runs[run][1], &runs[run][2]);
        }
        for (int i = 0; i < 3; i++) {
            cr_expect(memcmp(runs[0][i]->data, runs[1][i]->data,
                             runs[0][i]->size * sizeof(float)) == 0,
                      "causal gradient %d: two runs on %d threads differ", i, threads);
            tensor_free(runs[0][i]);
            tensor_free(runs[1][i]);
        }
        TENSOR_FREE(out, lse);
    }
    TENSOR_FREE(q, k, v, g, out_one, lse_one);
    valid_lens_free(causal);
}

Test(streaming_backward, sequences_give_bitwise_the_same_answer_on_any_thread_count)
{
    /* with at least as many sequences as threads, each sequence is one
     * thread's job, computed the same way whichever thread takes it */
    Rng rng = rng_new(50);
    Tensor *q = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(4, 50, 8));
    Tensor *k = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(4, 70, 8));
    Tensor *v = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(4, 70, 6));
    Tensor *g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(4, 50, 6));
    Tensor *lse, *out = streaming_attention_cache(q, k, v, NULL, 1, &lse);
    Tensor *one[3], *two[3];
    streaming_attention_backward(q, k, v, NULL, out, lse, g, 1, &one[0], &one[1], &one[2]);
    streaming_attention_backward(q, k, v, NULL, out, lse, g, 2, &two[0], &two[1], &two[2]);
    for (int i = 0; i < 3; i++) {
        cr_expect(memcmp(one[i]->data, two[i]->data, one[i]->size * sizeof(float)) == 0,
                  "gradient %d: 1 and 2 threads differ", i);
        tensor_free(one[i]);
        tensor_free(two[i]);
    }
    /* a NULL pointer: that gradient is not wanted, the others still come */
    Tensor *only_keys = NULL;
    streaming_attention_backward(q, k, v, NULL, out, lse, g, 2, NULL, &only_keys, NULL);
    cr_expect(tensor_has_shape(only_keys, SHAPE(4, 70, 8)));
    tensor_free(only_keys);
    tensor_free(q); tensor_free(k); tensor_free(v); tensor_free(g); tensor_free(out);
    tensor_free(lse);
}

/* The fast layer's backward against multihead_backward: input gradients,
 * all four weights and biases. */
static void expect_multihead_backward_equal(int B, int T, int K, int Dq, int Dk, int Dv, int D,
                                            int H, bool bias, const ValidLens *valid_lens,
                                            uint64_t seed)
{
    Rng rng = rng_new(seed);
    MultiHeadAttention *layer = multihead_new(Dq, Dk, Dv, D, H, 0.0f, bias, &rng);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, Dq));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, Dk));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, K, Dv));
    Tensor *grad_output = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, D));
    MultiHeadCache cache;
    Tensor *clear_out = multihead_forward_cache(layer, queries, keys, values, valid_lens, false,
                                               NULL, &cache);
    MultiHeadGrads *expected = multihead_grads_new(layer);
    Tensor *expected_in[3];
    multihead_backward(layer, &cache, grad_output, expected, &expected_in[0], &expected_in[1],
                       &expected_in[2], NULL);

    char where[128];
    snprintf(where, sizeof where, "B %d, T %d, K %d, D %d, H %d, bias %d, %s mask", B, T, K, D,
             H, bias, valid_lens == NULL ? "no" : valid_lens->ndim == 1 ? "1-D" : "2-D");
    MultiHeadGrads *runs[2];
    Tensor *first_in[3] = {NULL, NULL, NULL};
    for (int threads = 1; threads <= 2; threads++) {
        FastMultiHeadCache fast_cache;
        Tensor *out = fast_multihead_forward_cache(layer, queries, keys, values, valid_lens,
                                                  threads, &fast_cache);
        Tensor *plain = fast_multihead_forward(layer, queries, keys, values, valid_lens, threads);
        cr_expect(memcmp(out->data, plain->data, out->size * sizeof(float)) == 0,
                  "%s: forward_cache and forward differ", where);
        MultiHeadGrads *grads = runs[threads - 1] = multihead_grads_new(layer);
        Tensor *in[3];
        fast_multihead_backward(layer, &fast_cache, grad_output, grads, &in[0], &in[1], &in[2],
                                threads);
        const char *in_names[3] = {"grad_queries", "grad_keys", "grad_values"};
        /* When every query sees one key (T = K = 1 under a causal mask),
         * each weight is exactly 1 and the gradients through the scores
         * (the queries', the keys', W_q's, W_k's, the biases') are 0 up to
         * rounding: exactly 0 in the clear code, a few 1e-8 in the fast
         * one on some vector widths. An all-zero expected gradient takes
         * the value side's scale (grad_values, grad W_v). */
        for (int i = 0; i < 3; i++) {
            float scale = tensor_max_abs(expected_in[i]);
            expect_gradient_close(in[i], expected_in[i],
                                  scale != 0.0f ? scale : tensor_max_abs(expected_in[2]),
                                  in_names[i], where);
        }
        Tensor *const want[8] = {expected->W_q, expected->W_k, expected->W_v, expected->W_o,
                                 expected->b_q, expected->b_k, expected->b_v, expected->b_o};
        Tensor *const got[8] = {grads->W_q, grads->W_k, grads->W_v, grads->W_o,
                                grads->b_q, grads->b_k, grads->b_v, grads->b_o};
        const char *names[8] = {"grad W_q", "grad W_k", "grad W_v", "grad W_o",
                                "grad b_q", "grad b_k", "grad b_v", "grad b_o"};
        for (int i = 0; i < (bias ? 8 : 4); i++) {
            /* b_k's gradient is 0 up to rounding (every softmax row
             * ignores a shift shared by its keys): its own magnitude is
             * rounding noise, so W_k's sets the scale */
            float scale = i == 5 ? tensor_max_abs(expected->W_k) : tensor_max_abs(want[i]);
            if (scale == 0.0f)   /* one key per query: see above */
                scale = tensor_max_abs(expected->W_v);
            expect_gradient_close(got[i], want[i], scale, names[i], where);
        }
        if (threads == 1) {
            for (int i = 0; i < 3; i++)
                first_in[i] = in[i];
        } else {
            /* each (sequence, head) job and each row of a product is
             * computed the same way by any thread */
            for (int i = 0; i < 3; i++) {
                cr_expect(memcmp(in[i]->data, first_in[i]->data, in[i]->size * sizeof(float)) == 0,
                          "%s: %s differs between 1 and 2 threads", where, in_names[i]);
                tensor_free(in[i]);
                tensor_free(first_in[i]);
            }
            cr_expect(memcmp(runs[0]->W_q->data, runs[1]->W_q->data,
                             runs[0]->W_q->size * sizeof(float)) == 0,
                      "%s: grad W_q differs between 1 and 2 threads", where);
        }
        tensor_free(out);
        tensor_free(plain);
        fast_multihead_cache_free(&fast_cache);
    }
    multihead_grads_free(runs[0]);
    multihead_grads_free(runs[1]);
    for (int i = 0; i < 3; i++)
        tensor_free(expected_in[i]);
    multihead_grads_free(expected);
    multihead_cache_free(&cache);
    tensor_free(clear_out); tensor_free(queries); tensor_free(keys); tensor_free(values);
    tensor_free(grad_output);
    multihead_free(layer);
}

Test(multihead_fast_backward, d2l_toy_check_equals_clear)
{
    const int lens[2] = {3, 2};
    ValidLens *valid_lens = valid_lens_1d(lens, 2);
    expect_multihead_backward_equal(2, 4, 6, 100, 100, 100, 100, 5, false, valid_lens, 51);
    expect_multihead_backward_equal(2, 4, 6, 100, 100, 100, 100, 5, true, valid_lens, 52);
    valid_lens_free(valid_lens);
}

Test(multihead_fast_backward, cross_attention_masks_and_head_counts_equal_clear)
{
    enum { B = 2, T = 50, K = 130 };
    int lens[B * T];
    Rng rng = rng_new(53);
    for (int i = 0; i < B * T; i++)
        lens[i] = (int)rng_below(&rng, K + 1);
    lens[7] = 0;   /* a query with no key */
    ValidLens *valid_lens = valid_lens_2d(lens, B, T);
    expect_multihead_backward_equal(B, T, K, 24, 40, 18, 64, 2, true, valid_lens, 54);   /* d 32 */
    expect_multihead_backward_equal(B, T, K, 24, 40, 18, 64, 4, false, NULL, 55);        /* d 16 */
    expect_multihead_backward_equal(1, 130, 97, 30, 30, 30, 48, 8, true, NULL, 56);      /* d 6 */
    expect_multihead_backward_equal(3, 20, 20, 16, 16, 16, 16, 1, true, NULL, 57);       /* 1 head */
    valid_lens_free(valid_lens);
    const int lens_1d[3] = {0, 20, 7};   /* a whole sequence that sees no key */
    valid_lens = valid_lens_1d(lens_1d, 3);
    expect_multihead_backward_equal(3, 20, 20, 16, 16, 16, 16, 8, true, valid_lens, 58);
    valid_lens_free(valid_lens);
}

Test(multihead_fast_backward, causal_equals_clear)
{
    /* batch 2, 4 heads of d 16, n = 130: two query blocks, the second
     * partly in the future of the first key block */
    ValidLens *causal = valid_lens_causal(2, 130);
    expect_multihead_equal(2, 130, 130, 64, 64, 64, 64, 4, true, causal, 82);
    expect_multihead_backward_equal(2, 130, 130, 64, 64, 64, 64, 4, true, causal, 80);
    valid_lens_free(causal);
    causal = valid_lens_causal(3, 1);
    expect_multihead_backward_equal(3, 1, 1, 16, 16, 16, 16, 2, true, causal, 81);
    valid_lens_free(causal);
}

Test(multihead_fast_backward, parameter_gradients_accumulate)
{
    /* two backward passes add twice the gradients, as PyTorch's .grad does */
    Rng rng = rng_new(59);
    MultiHeadAttention *layer = multihead_new(12, 12, 12, 16, 2, 0.0f, true, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 9, 12));
    Tensor *g = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 9, 16));
    FastMultiHeadCache cache;
    Tensor *out = fast_multihead_forward_cache(layer, x, x, x, NULL, 2, &cache);
    MultiHeadGrads *once = multihead_grads_new(layer), *twice = multihead_grads_new(layer);
    fast_multihead_backward(layer, &cache, g, once, NULL, NULL, NULL, 2);
    fast_multihead_backward(layer, &cache, g, twice, NULL, NULL, NULL, 2);
    fast_multihead_backward(layer, &cache, g, twice, NULL, NULL, NULL, 2);
    Tensor *doubled = tensor_copy(once->W_v);
    for (size_t i = 0; i < doubled->size; i++)
        doubled->data[i] *= 2.0f;
    expect_close(twice->W_v, doubled, 1e-6f * tensor_max_abs(doubled), 0.0f);
    for (int c = 0; c < 16; c++)
        cr_expect_float_eq(twice->b_o->data[c], 2.0f * once->b_o->data[c], 1e-5f);
    tensor_free(doubled); tensor_free(out); tensor_free(x); tensor_free(g);
    multihead_grads_free(once); multihead_grads_free(twice);
    fast_multihead_cache_free(&cache);
    multihead_free(layer);
}

/* One forward + backward from nothing kept: its output and input
 * gradients, and the addresses of its cached Q, K, V and concat. */
typedef struct {
    Tensor *output, *grad_q, *grad_k, *grad_v;
    const float *cached[4];
} LayerStep;

static LayerStep layer_step(const MultiHeadAttention *layer, const Tensor *x, const Tensor *grad_y,
                            int threads)
{
    FastMultiHeadCache cache;
    LayerStep step;
    step.output = fast_multihead_forward_cache(layer, x, x, x, NULL, threads, &cache);
    fast_multihead_backward(layer, &cache, grad_y, NULL, &step.grad_q, &step.grad_k, &step.grad_v,
                            threads);
    const Tensor *const cached[4] = {cache.Q, cache.K, cache.V, cache.concat};
    for (int i = 0; i < 4; i++)
        step.cached[i] = cached[i]->data;
    fast_multihead_cache_free(&cache);
    return step;
}

static bool same_step(const LayerStep *a, const LayerStep *b)
{
    return same_bits(a->output, b->output) && same_bits(a->grad_q, b->grad_q) &&
           same_bits(a->grad_k, b->grad_k) && same_bits(a->grad_v, b->grad_v);
}

static void layer_step_free(LayerStep *step)
{
    TENSOR_FREE(step->output, step->grad_q, step->grad_k, step->grad_v);
}

/* how many of the n addresses are among the m of pool */
static int count_among(const float *const *addresses, int n, const float *const *pool, int m)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++)
            if (addresses[i] == pool[j]) {
                count++;
                break;
            }
    return count;
}

/* the addresses of a step's cached Q, K, V, concat, output and input
 * gradients */
static void step_addresses(const LayerStep *step, const float *addresses[8])
{
    for (int i = 0; i < 4; i++)
        addresses[i] = step->cached[i];
    addresses[4] = step->output->data;
    addresses[5] = step->grad_q->data;
    addresses[6] = step->grad_k->data;
    addresses[7] = step->grad_v->data;
}

/* fast_multihead_cache_free keeps Q, K, V and concat for the next call:
 * the next cache of the same sizes is made in that memory, and nothing it
 * computes changes (every kept tensor is overwritten whole). Another size
 * takes fresh memory and is just as right. */
Test(multihead_fast, memory_kept_between_calls_is_reused_and_changes_nothing)
{
    Rng rng = rng_new(95);
    MultiHeadAttention *layer = multihead_new(48, 48, 48, 64, 4, 0.0f, true, &rng);
    Tensor *x[3] = {tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 37, 48)),
                    tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 37, 48)),
                    tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 20, 48))};
    Tensor *grad_y[3] = {tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 37, 64)),
                         tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 37, 64)),
                         tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 20, 64))};
    for (int threads = 1; threads <= 2; threads++) {
        LayerStep alone[3], after[3];
        for (int i = 0; i < 3; i++) {   /* each from nothing kept */
            fast_multihead_release_memory();
            alone[i] = layer_step(layer, x[i], grad_y[i], threads);
        }
        fast_multihead_release_memory();
        for (int i = 0; i < 3; i++)     /* one after the other */
            after[i] = layer_step(layer, x[i], grad_y[i], threads);
        for (int i = 0; i < 3; i++)
            cr_expect(same_step(&after[i], &alone[i]),
                      "%d threads, step %d after the others: not the bits of a step alone",
                      threads, i);
        /* step 1 has step 0's sizes: its forward's five tensors of that
         * size (Q, K, V, concat, output) are taken from the eight step 0
         * kept, its four cached tensors among them, oldest first */
        const float *forward1[5] = {after[1].cached[0], after[1].cached[1], after[1].cached[2],
                                    after[1].cached[3], after[1].output->data};
        cr_expect_geq(count_among(forward1, 5, after[0].cached, 4), 1,
                      "%d threads: the second forward is not in the memory the first kept",
                      threads);
        for (int i = 0; i < 3; i++) {
            layer_step_free(&alone[i]);
            layer_step_free(&after[i]);
        }
    }
    /* the forward without a cache keeps its concatenated heads the same way */
    Tensor *first = fast_multihead_forward(layer, x[0], x[0], x[0], NULL, 2);
    Tensor *second = fast_multihead_forward(layer, x[0], x[0], x[0], NULL, 2);
    cr_expect(same_bits(first, second), "a forward after another differs");
    fast_multihead_release_memory();
    TENSOR_FREE(first, second, x[0], x[1], x[2], grad_y[0], grad_y[1], grad_y[2]);
    multihead_free(layer);
}

/* An output and input gradients given back (fast_multihead_give_back) are
 * written over by the next forward + backward of the same sizes, as is the
 * backward's gradient of V, which the layer keeps itself; that step gives
 * the bits of a step from nothing kept. */
Test(multihead_fast, results_given_back_are_written_over_and_change_nothing)
{
    Rng rng = rng_new(96);
    /* inputs as wide as the heads: every tensor of the step has one size */
    MultiHeadAttention *layer = multihead_new(64, 64, 64, 64, 4, 0.0f, true, &rng);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 37, 64));
    Tensor *grad_y = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 37, 64));
    for (int threads = 1; threads <= 2; threads++) {
        fast_multihead_release_memory();
        LayerStep alone = layer_step(layer, x, grad_y, threads);
        fast_multihead_release_memory();
        LayerStep first = layer_step(layer, x, grad_y, threads);
        const float *held[8], *written[8];
        step_addresses(&first, held);
        Tensor *const results[4] = {first.output, first.grad_q, first.grad_k, first.grad_v};
        for (int i = 0; i < 4; i++)
            fast_multihead_give_back(results[i]);
        fast_multihead_give_back(NULL);   /* nothing, as with free */
        /* Four tensors of the results' size, made now: had the results
         * been freed, not given back, malloc would put these in their
         * memory, and the second step could not be found there. */
        Tensor *others[4];
        for (int i = 0; i < 4; i++)
            others[i] = tensor_empty(SHAPE(2, 37, 64));
        LayerStep second = layer_step(layer, x, grad_y, threads);
        cr_expect(same_step(&second, &alone),
                  "%d threads: a step after results were given back differs from one alone",
                  threads);
        /* the second step's nine tensors of this size are the nine the
         * first kept or gave back: of the eight seen here, all but the
         * one in the first's gradient of V */
        step_addresses(&second, written);
        cr_expect_geq(count_among(written, 8, held, 8), 7,
                     "%d threads: the second step is not in the memory the first gave back",
                     threads);
        layer_step_free(&alone);
        layer_step_free(&second);
        tensor_free_all(others, 4);
    }
    fast_multihead_release_memory();
    TENSOR_FREE(x, grad_y);
    multihead_free(layer);
}

/* ---- the programs --------------------------------------------------------------- */

/* Whether a ratio printed to 2 decimals can be a / b, where a and b are
 * times printed to 2 decimals: each true time is within 0.005 of its
 * print, so the true ratio lies between (a - 0.005) / (b + 0.005) and
 * (a + 0.005) / (b - 0.005), with no upper end when b prints as 0.00;
 * the print is within 0.005 of it, plus 0.0001 for the division. A
 * bound from the printed times alone, a / b (1 +- 0.005 / a + 0.005 / b),
 * is too tight when a time is near 0.005 ms (it failed once in CI). */
static bool ratio_of_rounded(double printed, double a, double b)
{
    const double h = 0.005, slack = 0.0051;
    const double low = a > h ? (a - h) / (b + h) : 0.0;
    const double high = b > h ? (a + h) / (b - h) : INFINITY;
    return printed >= low - slack && printed <= high + slack;
}

Test(fast_programs, bench_runs_a_small_configuration)
{
    /* every line names its configuration, pass, implementation and
     * threads; the numbers themselves are timings and are not checked */
    RunResult r = run_program("05_multihead/bench", "--config 2,40,32,4 --repeats 3");
    cr_assert_eq(r.status, 0, "bench exited with %d: %s", r.status, r.err);
    const char *const expected[] = {
        "(2, 40, 32, 4)                 forward  clear        1 ",
        "(2, 40, 32, 4)                 forward  fast         1 ",
        "(2, 40, 32, 4)                 forward  fast         2 ",
        "(2, 40, 32, 4)                 fwd+bwd  clear        1 ",
        "(2, 40, 32, 4)                 fwd+bwd  fast         1 ",
        "(2, 40, 32, 4)                 fwd+bwd  fast         2 ",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        cr_expect(strstr(r.out, expected[i]), "no line '%s':\n%s", expected[i], r.out);
    cr_expect(strstr(r.out, "failed") == NULL, "a line failed:\n%s", r.out);
    /* the speed-ups are ratios of this run's own medians, and no target
     * from another machine is held against it */
    cr_expect(strstr(r.out, "Target") == NULL && strstr(r.out, " met") == NULL, "%s", r.out);
    double clear_ms, fast_1_ms, fast_2_ms, clear_ratio, threads_ratio;
    const char *clear = strstr(r.out, expected[0]), *fast_1 = strstr(r.out, expected[1]);
    const char *fast_2 = strstr(r.out, expected[2]), *ratios = strstr(r.out, "1/2 threads\n");
    cr_assert(clear && fast_1 && fast_2 && ratios, "%s", r.out);
    cr_assert_eq(sscanf(clear + strlen(expected[0]), "%lf", &clear_ms), 1);
    cr_assert_eq(sscanf(fast_1 + strlen(expected[1]), "%lf", &fast_1_ms), 1);
    cr_assert_eq(sscanf(fast_2 + strlen(expected[2]), "%lf", &fast_2_ms), 1);
    cr_assert_eq(sscanf(strstr(ratios, "forward") + strlen("forward"), "%lfx %lfx", &clear_ratio,
                        &threads_ratio), 2, "%s", ratios);
    /* beside each median, the best of the same 3 runs: never above it */
    for (int i = 0; i < 3; i++) {
        double median_ms, best_ms;
        int runs;
        const char *line = strstr(r.out, expected[i]);
        cr_assert_eq(sscanf(line + strlen(expected[i]), "%lf %lf %d", &median_ms, &best_ms, &runs),
                     3, "%s", line);
        cr_expect(best_ms > 0.0 && best_ms <= median_ms && runs == 3, "%s", line);
    }
    const double a[2] = {clear_ms, fast_1_ms}, got[2] = {clear_ratio, threads_ratio};
    for (int i = 0; i < 2; i++)
        cr_expect(ratio_of_rounded(got[i], a[i], fast_2_ms), "ratio %d: %s", i, r.out);
    cr_expect(strstr(r.out, "PyTorch/fast") == NULL, "PyTorch compared without --pytorch-ms");
    run_result_free(&r);
}

Test(fast_programs, bench_prints_causal_beside_full_and_their_ratio)
{
    RunResult r = run_program("05_multihead/bench", "--config 2,40,32,4 --repeats 3");
    cr_assert_eq(r.status, 0, "bench exited with %d: %s", r.status, r.err);
    /* full and causal attention on the heads, forward and forward +
     * backward, each on 1 and 2 threads; the ratio table holds full's
     * time over causal's, from the two lines above it: their medians,
     * then their best runs */
    const char *const passes[2] = {"attn fwd", "attn f+b"};
    const char *table = strstr(r.out, "full/causal    best/best\n");
    cr_assert(table, "no causal table:\n%s", r.out);
    for (int p = 0; p < 2; p++)
        for (int threads = 1; threads <= 2; threads++) {
            char full_head[96], causal_head[96], ratio_head[96];
            snprintf(full_head, sizeof full_head, "%-30s %-8s %-6s %7d ", "(2, 40, 32, 4)",
                     passes[p], "fast", threads);
            snprintf(causal_head, sizeof causal_head, "%-30s %-8s %-6s %7d ",
                     "(2, 40, 32, 4) causal", passes[p], "fast", threads);
            snprintf(ratio_head, sizeof ratio_head, "%-30s %-8s %7d ", "(2, 40, 32, 4)",
                     passes[p], threads);
            const char *full = strstr(r.out, full_head), *causal = strstr(r.out, causal_head);
            const char *ratio = strstr(table, ratio_head);
            cr_assert(full && causal && ratio, "missing '%s', '%s' or '%s':\n%s", full_head,
                      causal_head, ratio_head, r.out);
            double full_ms[2], causal_ms[2], printed[2];   /* median, best */
            cr_assert_eq(sscanf(full + strlen(full_head), "%lf %lf", &full_ms[0], &full_ms[1]), 2);
            cr_assert_eq(sscanf(causal + strlen(causal_head), "%lf %lf", &causal_ms[0],
                                &causal_ms[1]), 2);
            cr_assert_eq(sscanf(ratio + strlen(ratio_head), "%lfx %lfx", &printed[0],
                                &printed[1]), 2, "%s", ratio);
            for (int i = 0; i < 2; i++)
                cr_expect(ratio_of_rounded(printed[i], full_ms[i], causal_ms[i]),
                          "%s, %d threads, ratio %d: %s", passes[p], threads, i, r.out);
        }
    run_result_free(&r);
}

Test(fast_programs, help_lists_every_option)
{
    const char *const bench_options[] = {"--seed", "--repeats", "--threads", "--clear-max",
                                         "--quick", "--config", "--pytorch-ms", "--help"};
    const char *const streaming_options[] = {"--seed", "--block", "--batch", "--queries",
                                             "--keys", "--dim", "--threads", "--help"};
    RunResult r = run_program("05_multihead/bench", "--help");
    cr_expect_eq(r.status, 0);
    for (size_t i = 0; i < sizeof bench_options / sizeof bench_options[0]; i++)
        cr_expect(strstr(r.out, bench_options[i]), "bench --help lacks %s", bench_options[i]);
    run_result_free(&r);
    r = run_program("03_self_attention/streaming", "--help");
    cr_expect_eq(r.status, 0);
    for (size_t i = 0; i < sizeof streaming_options / sizeof streaming_options[0]; i++)
        cr_expect(strstr(r.out, streaming_options[i]), "streaming --help lacks %s",
                  streaming_options[i]);
    run_result_free(&r);
}

Test(fast_programs, streaming_program_checks_itself_at_other_sizes)
{
    /* Status 0 says both of the program's comparisons held: the worked
     * example streamed equals softmax at once, and streaming_attention
     * equals dot_product_attention. Blocks of 4 and 1, and Part 2 on odd
     * sizes with 2 threads. */
    RunResult r = run_program("03_self_attention/streaming",
                              "--block 4 --batch 3 --queries 101 --keys 263 --dim 24 "
                              "--threads 2 --seed 5");
    cr_assert_eq(r.status, 0, "streaming exited with %d: %s", r.status, r.err);
    cr_expect_str_empty(r.err);
    /* blocks 0..3 and 4..5: the last block's two scores */
    cr_expect(strstr(r.out, "[1.4849, -0.1414]"), "%s", r.out);
    /* the output, once computed at once and once streamed */
    cr_expect(strstr(strstr(r.out, "[1.0550, 0.4547]") + 1, "[1.0550, 0.4547]"), "%s", r.out);
    run_result_free(&r);
    r = run_program("03_self_attention/streaming", "--block 1");
    cr_assert_eq(r.status, 0);
    /* the last block holds one score; the streamed output is unchanged */
    cr_expect(strstr(r.out, "score [-0.1414]\n"), "%s", r.out);
    cr_expect(strstr(strstr(r.out, "[1.0550, 0.4547]") + 1, "[1.0550, 0.4547]"), "%s", r.out);
    run_result_free(&r);
}

/* ---- layer norm, rows side by side ------------------------------------------------- */

/* The fast layer norm gives the clear one's bits, forward and backward
 * (y, the statistics, grad_x added to, the parameters' gradients added
 * to): for row counts that fill no group, one, several and a part of one,
 * and widths that are a part of a square, whole squares and squares and
 * a part; with rows far from 0 (cancellation in the variance) and
 * constant rows (a variance of 0). Nothing past the last row is written. */
Test(fast_layer_norm, the_clear_bits_forward_and_backward)
{
    const int all_rows[] = {1, 3, 15, 16, 17, 40, 48};
    const int widths[] = {1, 2, 7, 16, 17, 40, 128};
    Rng rng = rng_new(31);
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 7; b++) {
            const int R = all_rows[a], D = widths[b];
            const size_t n = (size_t)R * D;
            float *x = checked_malloc(n, sizeof *x), *dy = checked_malloc(n, sizeof *dy);
            float *y[2], *dx[2], *stats[2], *params[2];   /* [0] clear, [1] fast */
            float w[128], bias[128];
            for (size_t i = 0; i < n; i++) {
                const int row = (int)(i / (size_t)D);
                x[i] = row % 5 == 3 ? 2.5f   /* a constant row */
                       : (row % 5 == 4 ? 1000.0f : 0.0f) + (float)rng_normal(&rng);
                dy[i] = (float)rng_normal(&rng);
            }
            for (int j = 0; j < D; j++) {
                w[j] = 1.0f + 0.1f * (float)rng_normal(&rng);
                bias[j] = 0.1f * (float)rng_normal(&rng);
            }
            for (int v = 0; v < 2; v++) {
                y[v] = checked_malloc(n + 1, sizeof(float));
                dx[v] = checked_malloc(n + 1, sizeof(float));
                stats[v] = checked_malloc(2 * (size_t)R + 2, sizeof(float));
                params[v] = checked_malloc(2 * (size_t)D, sizeof(float));
                y[v][n] = dx[v][n] = stats[v][R] = stats[v][2 * R + 1] = 7.0f;
                for (size_t i = 0; i < n; i++)
                    dx[v][i] = 0.5f;   /* added to */
                for (int j = 0; j < 2 * D; j++)
                    params[v][j] = 0.25f;
            }
            layer_norm_forward(x, w, bias, y[0], stats[0], stats[0] + R + 1, R, D);
            fast_layer_norm_forward(x, w, bias, LAYER_NORM_EPS, y[1], stats[1], stats[1] + R + 1,
                                    R, D);
            layer_norm_backward(dy, x, w, stats[0], stats[0] + R + 1, dx[0], params[0],
                                params[0] + D, R, D);
            fast_layer_norm_backward(dy, x, w, stats[1], stats[1] + R + 1, dx[1], params[1],
                                     params[1] + D, R, D);
            cr_assert(memcmp(y[0], y[1], (n + 1) * sizeof(float)) == 0,
                      "(%d, %d): y differs (or was written past its end)", R, D);
            cr_assert(memcmp(stats[0], stats[1], (2 * (size_t)R + 2) * sizeof(float)) == 0,
                      "(%d, %d): mean or rstd differs", R, D);
            cr_assert(memcmp(dx[0], dx[1], (n + 1) * sizeof(float)) == 0,
                      "(%d, %d): grad_x differs", R, D);
            cr_assert(memcmp(params[0], params[1], 2 * (size_t)D * sizeof(float)) == 0,
                      "(%d, %d): grad_weight or grad_bias differs", R, D);
            for (int v = 0; v < 2; v++) {
                free(y[v]);
                free(dx[v]);
                free(stats[v]);
                free(params[v]);
            }
            free(x);
            free(dy);
        }
}
