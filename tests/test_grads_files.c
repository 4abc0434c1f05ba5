/*
 * test_grads_files.c - the gradient files of `05_multihead/multihead --from
 * DIR --to DIR`: with DIR/grad_output.npy = G, the program writes
 * grad_<name>.npy, the gradients of L = sum(output * G) with respect to the
 * inputs and every weight and bias.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value sizes.
 *
 * On random configurations (sizes, heads, biases, masks with rows that see
 * no key), drawn here and never stored as fixtures, every file is compared
 * with a float64 reference: the layer written out again below in double,
 * differentiated by central differences (step 1e-6, accurate to about
 * 1e-9 in double). It shares no code with common/, so a wrong formula in
 * the backward cannot hide in it. Every gradient must be within 1e-4 of the
 * reference, relative to the reference's largest magnitude. The PyTorch
 * fixtures in tests/fixtures/grads/ run through the program too.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "io/npy.h"
#include "random.h"
#include "tensor.h"

#define PROGRAM "05_multihead/multihead"
#define FILE_TOL 1e-4

/* ---- a layer in double ---------------------------------------------------------- */

enum { NUM_ARRAYS = 11, MAX_LENS = 64 };

/* Inputs and parameters in the files' order; a bias of count 0 is absent. */
static const char *const NAMES[NUM_ARRAYS] = {"queries", "keys", "values", "W_q", "W_k",
                                             "W_v", "W_o", "b_q", "b_k", "b_v", "b_o"};

typedef struct {
    int B, T, K, Dq, Dk, Dv, D, H;
    bool bias;
    int lens_ndim;            /* 0: no mask, 1: (B,), 2: (B, T) */
    int lens[MAX_LENS];
    double *x[NUM_ARRAYS];    /* NAMES order */
    int count[NUM_ARRAYS];
    double *g;                /* grad_output (B, T, D) */
} Layer64;

static int len_at(const Layer64 *l, int b, int t)
{
    return l->lens_ndim == 0 ? l->K : l->lens_ndim == 1 ? l->lens[b] : l->lens[b * l->T + t];
}

/* x (n, in) W^T + b -> y (n, out), W (out, in), b (out,) or NULL */
static void linear64(const double *x, const double *w, const double *b, double *y, int n,
                     int in, int out)
{
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double sum = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++)
                sum += x[r * in + i] * w[o * in + i];
            y[r * out + o] = sum;
        }
}

/* sum(output * G), the layer written out from its definition */
static double loss64(const Layer64 *l)
{
    const int B = l->B, T = l->T, K = l->K, D = l->D, H = l->H, d = D / H;
    double *q = malloc(sizeof(double) * B * T * D), *k = malloc(sizeof(double) * B * K * D);
    double *v = malloc(sizeof(double) * B * K * D), *c = calloc((size_t)B * T * D, sizeof(double));
    double *o = malloc(sizeof(double) * B * T * D), p[64];
    linear64(l->x[0], l->x[3], l->x[7], q, B * T, l->Dq, D);
    linear64(l->x[1], l->x[4], l->x[8], k, B * K, l->Dk, D);
    linear64(l->x[2], l->x[5], l->x[9], v, B * K, l->Dv, D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const int n = len_at(l, b, t);   /* keys j < n take part */
                double max = -INFINITY, sum = 0.0;
                for (int j = 0; j < n; j++) {
                    double s = 0.0;
                    for (int i = 0; i < d; i++)
                        s += q[(b * T + t) * D + h * d + i] * k[(b * K + j) * D + h * d + i];
                    p[j] = s / sqrt((double)d);
                    max = fmax(max, p[j]);
                }
                for (int j = 0; j < n; j++)
                    sum += p[j] = exp(p[j] - max);
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < d; i++)
                        c[(b * T + t) * D + h * d + i] += p[j] / sum * v[(b * K + j) * D + h * d + i];
            }
    linear64(c, l->x[6], l->x[10], o, B * T, D, D);
    double loss = 0.0;
    for (int i = 0; i < B * T * D; i++)
        loss += o[i] * l->g[i];
    free(q);
    free(k);
    free(v);
    free(c);
    free(o);
    return loss;
}

/* dL/dx for array a, by central differences in double */
static double *numeric64(Layer64 *l, int a)
{
    const double eps = 1e-6;
    double *grad = malloc(sizeof(double) * (size_t)l->count[a]);
    for (int i = 0; i < l->count[a]; i++) {
        const double saved = l->x[a][i];
        l->x[a][i] = saved + eps;
        const double up = loss64(l);
        l->x[a][i] = saved - eps;
        const double down = loss64(l);
        l->x[a][i] = saved;
        grad[i] = (up - down) / (2 * eps);
    }
    return grad;
}

/* ---- a random configuration, as files ------------------------------------------ */

static int draw(Rng *rng, int low, int high)
{
    return low + (int)rng_below(rng, (uint32_t)(high - low + 1));
}

/* One array: float32 values drawn here, kept in double for the reference. */
static void fill(Layer64 *l, int a, Rng *rng, float scale, int count)
{
    l->count[a] = count;
    l->x[a] = count > 0 ? malloc(sizeof(double) * (size_t)count) : NULL;   /* NULL: no bias */
    for (int i = 0; i < count; i++)
        l->x[a][i] = (double)(scale * rng_normal(rng));   /* exact: a float in a double */
}

static Layer64 layer_draw(uint64_t seed)
{
    Rng rng = rng_new(seed);
    Layer64 l = {0};
    l.B = draw(&rng, 1, 3);
    l.T = draw(&rng, 1, 4);
    l.K = draw(&rng, 1, 5);
    l.H = draw(&rng, 1, 4);
    l.D = l.H * draw(&rng, 1, 3);
    l.Dq = draw(&rng, 1, 5);
    l.Dk = draw(&rng, 1, 5);
    l.Dv = draw(&rng, 1, 5);
    /* over 6 consecutive seeds every pairing of biases and mask kind */
    l.bias = seed % 2;
    l.lens_ndim = (int)(seed % 3);
    const int num_lens = l.lens_ndim == 2 ? l.B * l.T : l.B;
    for (int i = 0; i < num_lens; i++)
        l.lens[i] = draw(&rng, 0, l.K);   /* 0: a query that sees no key */
    const int sizes[NUM_ARRAYS] = {l.B * l.T * l.Dq, l.B * l.K * l.Dk, l.B * l.K * l.Dv,
                                   l.D * l.Dq, l.D * l.Dk, l.D * l.Dv, l.D * l.D,
                                   l.D, l.D, l.D, l.D};
    for (int a = 0; a < NUM_ARRAYS; a++)
        fill(&l, a, &rng, a < 3 ? 1.0f : 0.7f, a >= 7 && !l.bias ? 0 : sizes[a]);
    l.g = malloc(sizeof(double) * (size_t)(l.B * l.T * l.D));
    for (int i = 0; i < l.B * l.T * l.D; i++)
        l.g[i] = (double)rng_normal(&rng);
    return l;
}

static void layer_free(Layer64 *l)
{
    for (int a = 0; a < NUM_ARRAYS; a++)
        free(l->x[a]);
    free(l->g);
}

/* The shape of array a as the files have it. */
static int shape_of(const Layer64 *l, int a, int *shape)
{
    const int shapes[NUM_ARRAYS][3] = {{l->B, l->T, l->Dq}, {l->B, l->K, l->Dk},
                                       {l->B, l->K, l->Dv}, {l->D, l->Dq}, {l->D, l->Dk},
                                       {l->D, l->Dv}, {l->D, l->D}, {l->D}, {l->D}, {l->D},
                                       {l->D}};
    const int ndim = a < 3 ? 3 : a < 7 ? 2 : 1;
    memcpy(shape, shapes[a], sizeof shapes[a]);
    return ndim;
}

static void save_doubles(const char *dir, const char *name, const double *x, int ndim,
                         const int *shape)
{
    char path[512], err[NPY_ERR_LEN];
    Tensor *t = tensor_zeros(ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (float)x[i];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(npy_save(path, t, err, sizeof err), 0, "%s", err);
    tensor_free(t);
}

static void layer_save(const Layer64 *l, const char *dir)
{
    int shape[3];
    for (int a = 0; a < NUM_ARRAYS; a++)
        if (l->count[a] > 0) {
            int ndim = shape_of(l, a, shape);
            save_doubles(dir, NAMES[a], l->x[a], ndim, shape);
        }
    save_doubles(dir, "grad_output", l->g, SHAPE(l->B, l->T, l->D));
    if (l->lens_ndim > 0) {
        char path[512], err[NPY_ERR_LEN];
        snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
        const int shape1[1] = {l->B}, shape2[2] = {l->B, l->T};
        cr_assert_eq(npy_save_ints(path, l->lens, l->lens_ndim,
                                   l->lens_ndim == 1 ? shape1 : shape2, err, sizeof err),
                     0, "%s", err);
    }
}

/* ---- the check -------------------------------------------------------------------- */

/* DIR/grad_NAME.npy against the reference; returns its relative error, or
 * for b_k (whose true gradient is 0) its largest entry over scale. */
static double file_error(const char *dir, const char *name, const double *ref, int count,
                         double scale)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/grad_%s.npy", dir, name);
    Tensor *t = npy_load(path, err, sizeof err);
    cr_assert(t != NULL, "%s", err);
    cr_assert_eq(t->size, (size_t)count, "%s has %zu elements, expected %d", path, t->size,
                 count);
    double diff = 0.0, max_ref = 0.0;
    for (int i = 0; i < count; i++) {
        diff = fmax(diff, fabs(t->data[i] - ref[i]));
        max_ref = fmax(max_ref, fabs(ref[i]));
    }
    tensor_free(t);
    return diff / (scale > 0.0 ? scale : fmax(max_ref, 1e-30));
}

static void check_configuration(uint64_t seed)
{
    Layer64 l = layer_draw(seed);
    char dir[64], args[256];
    scratch_dir_make(dir, sizeof dir, "grads_files");
    layer_save(&l, dir);
    snprintf(args, sizeof args, "--from %s --heads %d --to %s", dir, l.H, dir);
    RunResult r = run_program(PROGRAM, args);
    cr_assert_eq(r.status, 0, "seed %llu: %s exited with %d: %s", (unsigned long long)seed,
                 args, r.status, r.err ? r.err : "");
    run_result_free(&r);

    double b_q_scale = 0.0;
    for (int a = 0; a < NUM_ARRAYS; a++) {
        char path[512];
        snprintf(path, sizeof path, "%s/grad_%s.npy", dir, NAMES[a]);
        FILE *f = fopen(path, "rb");
        cr_expect_eq(f != NULL, l.count[a] > 0, "seed %llu: grad_%s.npy %s",
                     (unsigned long long)seed, NAMES[a], f ? "written for an absent bias"
                                                           : "is missing");
        if (f)
            fclose(f);
        if (l.count[a] == 0)
            continue;
        double *ref = numeric64(&l, a);
        double max_ref = 0.0;
        for (int i = 0; i < l.count[a]; i++)
            max_ref = fmax(max_ref, fabs(ref[i]));
        if (a == 7)
            b_q_scale = max_ref;
        /* b_k's true gradient is 0: measured against b_q's, when that is not 0 too */
        const bool key_bias = a == 8;
        double e = file_error(dir, NAMES[a], ref, l.count[a], key_bias ? fmax(b_q_scale, 1.0) : 0.0);
        cr_expect(e < FILE_TOL, "seed %llu (B %d T %d K %d D %d H %d Dq %d Dk %d Dv %d, bias %d, "
                  "mask %dd): grad_%s off by %.3g", (unsigned long long)seed, l.B, l.T, l.K, l.D,
                  l.H, l.Dq, l.Dk, l.Dv, l.bias, l.lens_ndim, NAMES[a], e);
        free(ref);
    }
    scratch_dir_remove(dir);
    layer_free(&l);
}

Test(grads_files, random_configurations_against_float64)
{
    for (uint64_t seed = 1; seed <= 12; seed++)
        check_configuration(seed);
}

Test(grads_files, pytorch_fixtures_through_the_program)
{
    /* The program compares every grad_<name> with expected_grad_<name>.npy
     * (PyTorch autograd, float64) and exits 1 when one differs by more than
     * 1e-5 + 1e-5 |expected|. */
    static const struct { const char *name; int heads; } cases[] = {
        {"self_bias_nomask", 2}, {"nobias_1d", 3}, {"bias_2d_empty_rows", 4},
        {"cross_kdim_vdim", 4}, {"cross_empty_sequence", 8}, {"one_head_2d", 1},
        {"query_size_2d", 2}, {"d2l_toy", 5}, {"eight_heads_bias", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[64], args[512];
        scratch_dir_make(dir, sizeof dir, "grads_fixture");
        snprintf(args, sizeof args, "--from tests/fixtures/grads/%s --heads %d --to %s",
                 cases[i].name, cases[i].heads, dir);
        RunResult r = run_program(PROGRAM, args);
        cr_expect_eq(r.status, 0, "%s: exit %d: %s", cases[i].name, r.status, r.err ? r.err : "");
        cr_expect(r.out && strstr(r.out, "grad_W_k vs expected_grad_W_k.npy"),
                  "%s: the gradients were not compared", cases[i].name);
        run_result_free(&r);
        scratch_dir_remove(dir);
    }
}

Test(grads_files, no_grad_output_no_gradient_files)
{
    /* A run without grad_output.npy writes no gradient, and removes those
     * an earlier run left in --to, so a directory never mixes two runs. */
    char dir[64], args[512];
    scratch_dir_make(dir, sizeof dir, "grads_stale");
    snprintf(args, sizeof args, "--from tests/fixtures/grads/nobias_1d --heads 3 --to %s", dir);
    RunResult r = run_program(PROGRAM, args);
    cr_assert_eq(r.status, 0);
    run_result_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/grad_W_q.npy", dir);
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "the first run wrote no grad_W_q.npy");
    fclose(f);
    snprintf(args, sizeof args, "--from tests/fixtures/multihead/nobias_1d --heads 3 --to %s",
             dir);
    r = run_program(PROGRAM, args);
    cr_assert_eq(r.status, 0);
    run_result_free(&r);
    f = fopen(path, "rb");
    cr_expect(f == NULL, "grad_W_q.npy of the earlier run is still there");
    if (f)
        fclose(f);
    scratch_dir_remove(dir);
}
