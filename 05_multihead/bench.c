/*
 * 05_multihead/bench - speed and memory of the multi-head layer, clear
 * (multihead_forward and multihead_backward, the chapters' code) against
 * fast (fast_multihead_forward and fast_multihead_backward: register-tile
 * matmul, streaming attention, threads). Run it with `make bench`.
 *
 * Legend: B = batch_size, n = tokens (self-attention: T = K = n),
 * D = num_hiddens, H = num_heads, d = D / H; for the d2l toy, T = 4
 * queries and K = 6 key-value pairs.
 *
 * What is measured, and how:
 *   - the machine's fp32 peak, by an FMA loop (fast_peak_gflops) on 1 and
 *     on N threads, before and after the lines, the larger kept: a busy
 *     core during one measurement would otherwise make it low;
 *   - per line (configuration, pass, implementation, threads): the median
 *     time of several runs after a warm-up run, with clock_gettime. A pass
 *     is the layer's forward, its forward + backward (a training step
 *     without the optimiser), or attention's backward alone (the streaming
 *     backward on the heads' (B*H, n, d) tensors, its forward run once
 *     before the clock starts);
 *   - GFLOP/s with forward FLOPs = 4 projections (2 * rows * D * D each) +
 *     2 attention products (2 * B * T * K * D each), which is
 *     4*B*n*D*D*2 + 2*B*n*n*D*2 for self-attention; forward + backward
 *     counts 3 times that (each product of the forward has two in the
 *     backward), the attention backward 4 products of 2*B*n*n*D (the fast
 *     one's recomputed scores are not counted: they are its price for not
 *     keeping the weights); percent of the peak for that thread count;
 *   - peak resident memory (platform_peak_rss_bytes). Every line runs in a
 *     child process of its own, so one line's peak never includes
 *     another's.
 * Other programs running at the same time slow the runs down; medians
 * soften that, but a busy machine still gives lower numbers.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "error.h"
#include "fast/fast_matmul.h"
#include "fast/fast_multihead.h"
#include "fast/streaming_attention.h"
#include "io/cli.h"
#include "multihead.h"
#include "platform.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "bench";

enum { MAX_RUNS = 51, MAX_LINES = 64 };

/* The clear layer never runs when its weights, 4 * B * H * n * n bytes,
 * pass this: with the inputs, projections and outputs beside them, a
 * larger run may not fit in memory. */
#define CLEAR_MAX_WEIGHT_BYTES 2e9

/* PyTorch 1.13's nn.MultiheadAttention at (8, 512, 512, 8) on 2 threads,
 * on the machine these targets were set on (median ms, forward and
 * forward + backward, with 2 MB pages: the better figures that
 * tests/fixtures/time_pytorch_multihead.py printed there). Measure yours
 * and give them with --pytorch-ms. */
#define PYTORCH_FORWARD_MS 152.1
#define PYTORCH_FORWARD_BACKWARD_MS 404.4

typedef enum { FORWARD, FORWARD_BACKWARD, ATTENTION_BACKWARD } Pass;
static const char *const PASS_NAMES[] = {"forward", "fwd+bwd", "attn bwd"};

typedef struct {
    const char *label;         /* what the line calls this configuration */
    int batch, num_queries, num_keys, num_hiddens, num_heads;
    Pass pass;
    bool toy_mask;             /* d2l's valid_lens [3, 2] */
    bool fast_only;            /* the streaming path alone */
} Config;

typedef struct {
    uint64_t seed;
    int repeats;               /* timed runs per line (the median is printed) */
    int threads;               /* the "many threads" count */
    int clear_max;             /* the clear layer runs only for n <= this */
    double scale;              /* standard deviation of the random inputs */
    bool quick;                /* skip the slow lines */
    const char *config_text;   /* --config B,n,D,H */
    const char *pytorch_text;  /* --pytorch-ms F,FB */
    Config custom[2];          /* --config: its forward and forward + backward */
    double pytorch_forward_ms, pytorch_forward_backward_ms;
} Options;

typedef struct {
    int ok;                    /* 1 when the child finished */
    int finite;                /* 1 when the warm-up's results held no NaN or infinity */
    double ms;                 /* median milliseconds per pass */
    int runs;                  /* timed runs behind the median */
    double max_rss_mb;
} Result;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double flops_of(const Config *c)
{
    const double B = c->batch, T = c->num_queries, K = c->num_keys, D = c->num_hiddens;
    double projections = 2.0 * B * T * D * D * 2.0 + 2.0 * B * K * D * D * 2.0;   /* Q, O and K, V */
    double attention = 2.0 * B * T * K * D * 2.0;   /* Q K^T and weights @ V, over all heads */
    switch (c->pass) {
    case FORWARD_BACKWARD:
        return 3.0 * (projections + attention);
    case ATTENTION_BACKWARD:
        return 2.0 * attention;   /* dV, dP, dQ, dK */
    default:
        return projections + attention;
    }
}

/* ---- memory, checked before any line runs ------------------------------------ */

/* Bytes one line's tensors hold at their peak, counted from what it
 * allocates (and rounded up): the fast forward keeps the inputs, the
 * concatenated heads and the output (about 6 (B, n, D) tensors with
 * scratch); the clear forward also holds the projections split into heads
 * (about 10); forward + backward adds the cached projections and every
 * gradient (about 16); the attention backward alone has the heads' q, k,
 * v, output, gradients (about 10). The clear layer adds its (B*H, T, K)
 * weights: once forward, three times (weights, their gradient, the
 * scores') with the backward. Measured resident peaks against this (with
 * memory_check's 16 MB for the program): (8, 512, 512, 8) clear forward
 * 132 MB (171 MB), fast forward + backward 126 MB (159 MB); (2, 2048, 64,
 * 8) clear forward 277 MB (295 MB), clear forward + backward 820 MB
 * (838 MB), fast forward + backward 21 MB (33 MB). */
static double line_bytes(const Config *c, bool clear)
{
    const double rows = (double)c->batch * (c->num_queries > c->num_keys ? c->num_queries
                                                                         : c->num_keys);
    const double D = c->num_hiddens;
    const double per_row = c->pass == FORWARD ? (clear ? 10.0 : 6.0)
                           : c->pass == FORWARD_BACKWARD ? 16.0 : 10.0;
    const double params = (c->pass == FORWARD ? 4.0 : 8.0) * D * D;
    const double weights = (double)c->batch * c->num_heads * c->num_queries * c->num_keys;
    return 4.0 * (per_row * rows * D + params + (clear ? (c->pass == FORWARD ? 1 : 3) * weights
                                                       : 0.0));
}

/* ---- one line, in a child process ------------------------------------------- */

/* Everything one line needs, built before the clock starts. Self-attention:
 * the same tensor is queries, keys and values, as in a NumPy or PyTorch
 * layer timed the same way; the toy has its own keys. */
typedef struct {
    const Config *c;
    bool fast;
    int threads;
    MultiHeadAttention *layer;
    Tensor *queries, *keys, *grad_output;
    ValidLens *valid_lens;
    MultiHeadGrads *grads;
    /* attention's backward alone: the heads' tensors (B*H, n, d) and what
     * the forward returned, made once */
    Tensor *head_q, *head_k, *head_v, *head_out, *head_lse, *head_grad;
    AttentionCache head_cache;
} Work;

static void work_init(Work *w, const Config *c, bool fast, int threads, const Options *opt)
{
    Rng rng = rng_new(opt->seed);
    const float s = (float)opt->scale;
    const int D = c->num_hiddens, B = c->batch, H = c->num_heads;
    *w = (Work){.c = c, .fast = fast, .threads = threads};
    if (c->pass == ATTENTION_BACKWARD) {
        const int n = c->num_queries, d = D / H;
        w->head_q = tensor_normal(&rng, 0.0f, s, SHAPE(B * H, n, d));
        w->head_k = tensor_normal(&rng, 0.0f, s, SHAPE(B * H, n, d));
        w->head_v = tensor_normal(&rng, 0.0f, s, SHAPE(B * H, n, d));
        w->head_grad = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B * H, n, d));
        w->head_out = fast ? streaming_attention_cache(w->head_q, w->head_k, w->head_v, NULL,
                                                      threads, &w->head_lse)
                           : dot_product_attention_cache(w->head_q, w->head_k, w->head_v, NULL,
                                                        NULL, &w->head_cache);
        return;
    }
    w->layer = multihead_new(D, D, D, D, H, 0.0f, true, &rng);
    w->queries = tensor_normal(&rng, 0.0f, s, SHAPE(B, c->num_queries, D));
    w->keys = c->num_keys == c->num_queries
                  ? w->queries
                  : tensor_normal(&rng, 0.0f, s, SHAPE(B, c->num_keys, D));
    w->valid_lens = c->toy_mask ? valid_lens_1d((const int[]){3, 2}, 2) : NULL;
    if (c->pass == FORWARD_BACKWARD) {
        w->grad_output = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, c->num_queries, D));
        w->grads = multihead_grads_new(w->layer);
    }
}

static void work_free(Work *w)
{
    if (w->keys != w->queries)
        tensor_free(w->keys);
    tensor_free(w->queries);
    tensor_free(w->grad_output);
    valid_lens_free(w->valid_lens);
    multihead_grads_free(w->grads);
    if (w->layer != NULL)
        multihead_free(w->layer);
    Tensor *heads[] = {w->head_q, w->head_k, w->head_v, w->head_out, w->head_lse, w->head_grad};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        tensor_free(heads[i]);
    attention_cache_free(&w->head_cache);
}

/* The flat index of the first NaN or infinity among a pass's results
 * (output, then the input gradients), or SIZE_MAX. */
static size_t first_non_finite_of(const Tensor *const *results, int count)
{
    size_t offset = 0;
    for (int i = 0; i < count; i++) {
        if (results[i] == NULL)
            continue;
        const size_t bad = tensor_first_non_finite(results[i]);
        if (bad != SIZE_MAX)
            return offset + bad;
        offset += results[i]->size;
    }
    return SIZE_MAX;
}

/* One timed pass; every tensor it makes is freed before it returns. The
 * parameter gradients accumulate from pass to pass, as without zero_grad.
 * With check, the results are looked at first: the index of a NaN or an
 * infinity among them (float32 overflowed: multihead.h), or SIZE_MAX. */
static size_t run_pass(Work *w, bool check)
{
    const Tensor *q = w->queries, *k = w->keys;
    Tensor *out = NULL, *gq = NULL, *gk = NULL, *gv = NULL;
    if (w->c->pass == FORWARD) {
        out = w->fast ? fast_multihead_forward(w->layer, q, k, k, w->valid_lens, w->threads)
                      : multihead_forward(w->layer, q, k, k, w->valid_lens, false, NULL, NULL);
    } else if (w->c->pass == FORWARD_BACKWARD && w->fast) {
        FastMultiHeadCache cache;
        out = fast_multihead_forward_cache(w->layer, q, k, k, w->valid_lens, w->threads, &cache);
        fast_multihead_backward(w->layer, &cache, w->grad_output, w->grads, &gq, &gk, &gv,
                                w->threads);
        fast_multihead_cache_free(&cache);
    } else if (w->c->pass == FORWARD_BACKWARD) {
        MultiHeadCache cache;
        out = multihead_forward_cache(w->layer, q, k, k, w->valid_lens, false, NULL, &cache);
        multihead_backward(w->layer, &cache, w->grad_output, w->grads, &gq, &gk, &gv, NULL);
        multihead_cache_free(&cache);
    } else if (w->fast) {
        streaming_attention_backward(w->head_q, w->head_k, w->head_v, NULL, w->head_out,
                                     w->head_lse, w->head_grad, w->threads, &gq, &gk, &gv);
    } else {
        dot_product_attention_backward(w->head_q, w->head_k, w->head_v, &w->head_cache,
                                       w->head_grad, &gq, &gk, &gv);
    }
    const Tensor *results[] = {out, gq, gk, gv};
    const size_t bad = check ? first_non_finite_of(results, 4) : SIZE_MAX;
    TENSOR_FREE(out, gq, gk, gv);
    return bad;
}

/* Build the line's work, run it, and return the median. */
static Result measure(const Config *c, bool fast, int threads, const Options *opt)
{
    Work w;
    work_init(&w, c, fast, threads, opt);
    /* The first run warms up (page faults, caches). One that took over 5 s
     * is its own measurement: repeating it would only cost minutes. */
    double t0 = now_ms();
    const bool finite = run_pass(&w, true) == SIZE_MAX;
    double first = now_ms() - t0;
    Result r = {1, finite, first, 1, 0.0};
    if (finite && first <= 5000.0) {
        int runs = first > 1000.0 ? (opt->repeats < 3 ? opt->repeats : 3) : opt->repeats;
        /* a pass shorter than 20 ms is timed in a loop, so the clock's
         * resolution and the loop overhead do not matter */
        int inner = first < 20.0 ? (int)ceil(20.0 / (first > 1e-3 ? first : 1e-3)) : 1;
        double times[MAX_RUNS];
        for (int i = 0; i < runs; i++) {
            t0 = now_ms();
            for (int j = 0; j < inner; j++)
                run_pass(&w, false);
            times[i] = (now_ms() - t0) / inner;
        }
        qsort(times, (size_t)runs, sizeof times[0], compare_doubles);
        r.ms = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
        r.runs = runs;
    }
    r.max_rss_mb = platform_peak_rss_bytes() / (1024.0 * 1024.0);
    work_free(&w);
    return r;
}

/* Run measure() in a child and read its result through a pipe; a child
 * that dies (out of memory, a crash) gives ok = 0. */
static Result measure_in_child(const Config *c, bool fast, int threads, const Options *opt)
{
    Result r = {0, 0, 0.0, 0, 0.0};
    int fds[2];
    fflush(stdout);
    if (pipe(fds) != 0) {
        perror("bench: pipe");
        return r;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench: fork");
        close(fds[0]);
        close(fds[1]);
        return r;
    }
    if (pid == 0) {
        close(fds[0]);
        Result mine = measure(c, fast, threads, opt);
        ssize_t written = write(fds[1], &mine, sizeof mine);
        close(fds[1]);
        _exit(written == (ssize_t)sizeof mine ? 0 : 1);
    }
    close(fds[1]);
    Result got;
    if (read(fds[0], &got, sizeof got) == (ssize_t)sizeof got)
        r = got;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        r.ok = 0;
    return r;
}

/* ---- printing --------------------------------------------------------------------- */

static double peak_1, peak_n;    /* GFLOP/s, the larger of two measurements */
static int overflowed;           /* lines whose results held NaN or infinity */
static bool share_over_100;      /* a line beat the measured peak */

static void print_header(void)
{
    printf("%-30s %-8s %-6s %7s %11s %5s %9s %7s %12s\n", "config (B, n, D, H)", "pass",
           "impl", "threads", "ms", "runs", "GFLOP/s", "% peak", "peak memory");
}

static void print_line(const Config *c, const char *impl, int threads, const Result *r)
{
    if (!r->ok) {
        printf("%-30s %-8s %-6s %7d   failed: the child process did not finish (out of memory?)\n",
               c->label, PASS_NAMES[c->pass], impl, threads);
        return;
    }
    if (!r->finite) {
        overflowed++;
        printf("%-30s %-8s %-6s %7d   failed: a result overflowed float32 (NaN or infinity)\n",
               c->label, PASS_NAMES[c->pass], impl, threads);
        return;
    }
    double gflops = flops_of(c) / (r->ms * 1e-3) / 1e9;
    double share = 100.0 * gflops / (threads == 1 ? peak_1 : peak_n);
    /* over 100% only when the peak was measured low; the star says so */
    if (share > 100.0)
        share_over_100 = true;
    printf("%-30s %-8s %-6s %7d %11.2f %5d %9.1f %6.1f%s %9.1f MB\n", c->label,
           PASS_NAMES[c->pass], impl, threads, r->ms, r->runs, gflops, share,
           share > 100.0 ? "*" : "%", r->max_rss_mb);
}

/* The lines are kept until the peak has been measured a second time, then
 * printed: a line is a measurement, or a note (text) in the table. */
typedef struct {
    const Config *c;
    const char *impl;
    int threads;
    Result r;
    char text[200];
} Line;

static Line lines[MAX_LINES];
static int line_count;

static Line *new_line(void)
{
    if (line_count == MAX_LINES)
        die(PROG, "more than %d lines in the table", MAX_LINES);
    Line *line = &lines[line_count++];
    memset(line, 0, sizeof *line);
    return line;
}

/* ---- the speed and memory targets ------------------------------------------------------ */

typedef struct {
    char what[80];
    double value, limit;
    const char *unit;
    char why[60];              /* where the limit comes from, or "" */
    bool ran;
} Target;

static void print_target(const Target *t)
{
    if (!t->ran) {
        printf("  %-58s not run\n", t->what);
        return;
    }
    printf("  %-58s %9.1f %-3s (limit %.1f %s%s): %s\n", t->what, t->value, t->unit, t->limit,
           t->unit, t->why, t->value <= t->limit ? "met" : "NOT met");
}

enum { T_FORWARD, T_FORWARD_BACKWARD, T_LONG_TIME, T_LONG_MEMORY, T_BACKWARD_MEMORY,
       T_HUGE_MEMORY, TARGET_COUNT };

static void targets_init(Target t[TARGET_COUNT], const Options *opt)
{
    const int N = opt->threads;
    memset(t, 0, TARGET_COUNT * sizeof *t);
    snprintf(t[T_FORWARD].what, sizeof t[0].what, "(8, 512, 512, 8) forward, fast, %d threads: time",
             N);
    t[T_FORWARD].limit = opt->pytorch_forward_ms / 2.0;
    snprintf(t[T_FORWARD].why, sizeof t[0].why, " = PyTorch's %.1f / 2", opt->pytorch_forward_ms);
    snprintf(t[T_FORWARD_BACKWARD].what, sizeof t[0].what,
             "(8, 512, 512, 8) fwd+bwd, fast, %d threads: time", N);
    t[T_FORWARD_BACKWARD].limit = opt->pytorch_forward_backward_ms / 1.5;
    snprintf(t[T_FORWARD_BACKWARD].why, sizeof t[0].why, " = PyTorch's %.1f / 1.5",
             opt->pytorch_forward_backward_ms);
    snprintf(t[T_LONG_TIME].what, sizeof t[0].what, "(1, 8192, 512, 8) forward, fast, %d threads: time",
             N);
    t[T_LONG_TIME].limit = 1400;
    snprintf(t[T_LONG_MEMORY].what, sizeof t[0].what,
             "(1, 8192, 512, 8) forward, fast, %d threads: peak memory", N);
    t[T_LONG_MEMORY].limit = 100;
    snprintf(t[T_BACKWARD_MEMORY].what, sizeof t[0].what,
             "(1, 8192, 512, 8) attn bwd, fast, %d threads: peak memory", N);
    t[T_BACKWARD_MEMORY].limit = 200;
    snprintf(t[T_HUGE_MEMORY].what, sizeof t[0].what, "(1, 32768, 512, 8) forward, fast: peak memory");
    t[T_HUGE_MEMORY].limit = 600;
    for (int i = 0; i < TARGET_COUNT; i++)
        t[i].unit = i == T_FORWARD || i == T_FORWARD_BACKWARD || i == T_LONG_TIME ? "ms" : "MB";
}

/* A fast line's result, for the targets that name its configuration. */
static void targets_record(Target t[TARGET_COUNT], const Config *c, int threads, int N,
                           const Result *r)
{
    if (!r->ok || !r->finite)
        return;
    const bool d512 = c->num_hiddens == 512 && c->num_heads == 8;
    const bool small = d512 && c->batch == 8 && c->num_queries == 512;
    const bool long_one = d512 && c->batch == 1 && c->num_queries == 8192;
    int which = -1;
    double value = r->ms;
    if (threads == N && small)
        which = c->pass == FORWARD ? T_FORWARD : c->pass == FORWARD_BACKWARD ? T_FORWARD_BACKWARD : -1;
    else if (threads == N && long_one && c->pass == FORWARD) {
        t[T_LONG_MEMORY].value = r->max_rss_mb;
        t[T_LONG_MEMORY].ran = true;
        which = T_LONG_TIME;
    } else if (threads == N && long_one && c->pass == ATTENTION_BACKWARD) {
        which = T_BACKWARD_MEMORY;
        value = r->max_rss_mb;
    } else if (d512 && c->batch == 1 && c->num_queries == 32768) {
        which = T_HUGE_MEMORY;
        value = r->max_rss_mb;
    }
    if (which >= 0) {
        t[which].value = value;
        t[which].ran = true;
    }
}

/* ---- options ---------------------------------------------------------------------- */

/* --config B,n,D,H: one self-attention configuration, forward and forward
 * + backward */
static void parse_config(Options *opt)
{
    long v[4];
    const char *text = opt->config_text;
    if (cli_long_list(PROG, "--config", text, 1, 65536, v, 4) != 4)
        cli_fail(PROG, "--config expects B,n,D,H, four whole numbers, got '%s'", text);
    if (v[2] % v[3] != 0)
        cli_fail(PROG, "--config: D = %ld does not divide by H = %ld", v[2], v[3]);
    if ((double)v[0] * v[1] * v[2] > 1e9)
        cli_fail(PROG, "--config: B * n * D = %.0f floats is too much for one input",
                 (double)v[0] * v[1] * v[2]);
    static char label[64];
    snprintf(label, sizeof label, "(%ld, %ld, %ld, %ld)", v[0], v[1], v[2], v[3]);
    for (int i = 0; i < 2; i++)
        opt->custom[i] = (Config){label, (int)v[0], (int)v[1], (int)v[1], (int)v[2], (int)v[3],
                                  i == 0 ? FORWARD : FORWARD_BACKWARD, false, false};
}

/* --pytorch-ms F,FB: PyTorch's medians to set the targets from */
static void parse_pytorch(Options *opt)
{
    const char *text = opt->pytorch_text, *comma = strchr(text, ',');
    char first[64];
    if (comma == NULL || (size_t)(comma - text) >= sizeof first)
        cli_fail(PROG, "--pytorch-ms expects F,FB, two times in ms, got '%s'", text);
    memcpy(first, text, (size_t)(comma - text));
    first[comma - text] = '\0';
    opt->pytorch_forward_ms = cli_double(PROG, "--pytorch-ms", first, 0.001, 1e7);
    opt->pytorch_forward_backward_ms = cli_double(PROG, "--pytorch-ms", comma + 1, 0.001, 1e7);
}

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .repeats = 5, .threads = 2, .clear_max = 2048, .scale = 1.0,
                   .pytorch_forward_ms = PYTORCH_FORWARD_MS,
                   .pytorch_forward_backward_ms = PYTORCH_FORWARD_BACKWARD_MS};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the layer and its inputs"},
        {"--repeats", CLI_INT, &opt.repeats, .min = 1, .max = MAX_RUNS, .metavar = "N",
         .help = "timed runs per line; the median is printed\n(runs over a second use fewer)"},
        {"--threads", CLI_INT, &opt.threads, .min = 2, .max = 64, .metavar = "N",
         .help = "thread count of the multi-threaded lines"},
        {"--clear-max", CLI_INT, &opt.clear_max, .min = 1, .max = 65536, .metavar = "N",
         .help = "run the clear layer only up to n = N (one pass at\nn = 4096 takes minutes); "
                 "it never runs when its weights\nwould pass 2 GB"},
        {"--scale", CLI_DOUBLE, &opt.scale, .min = 1e-30, .max = 1e38, .metavar = "S",
         .help = "standard deviation of the random inputs (1e20\nmakes float32 overflow, and "
                 "the lines say so)"},
        {"--quick", CLI_FLAG, &opt.quick,
         .help = "only the d2l toy and (8, 512, 512, 8), fast lines only"},
        {"--config", CLI_STRING, &opt.config_text, .metavar = "B,n,D,H",
         .help = "only this self-attention configuration, forward\nand forward + backward",
         .default_text = "the list above"},
        {"--pytorch-ms", CLI_STRING, &opt.pytorch_text, .metavar = "F,FB",
         .help = "PyTorch's forward and forward + backward ms at\n(8, 512, 512, 8), for "
                 "the targets, as\ntests/fixtures/time_pytorch_multihead.py prints them",
         .default_text = "152.1,404.4: measured where\nthe targets were set"},
    };
    cli_parse(&(CliTable){PROG,
                          "Time and peak memory of the multi-head attention layer, the clear "
                          "version\nof the chapters against the fast one "
                          "(common/fast/fast_multihead.c):\nthe forward on (B, n, D, H) = "
                          "(8, 512, 512, 8), (1, 2048, 512, 8),\n(1, 8192, 512, 8) and the d2l "
                          "toy, forward + backward on the toy and\n(8, 512, 512, 8), attention's "
                          "backward alone on the heads of\n(1, 8192, 512, 8), and the fast "
                          "forward alone at n = 16384 and 32768.",
                          CLI_COUNT(options), options},
              argc, argv);
    if (opt.config_text != NULL)
        parse_config(&opt);
    if (opt.pytorch_text != NULL)
        parse_pytorch(&opt);
    return opt;
}

/* ---- main ------------------------------------------------------------------------- */

static void print_introduction(const Options *opt)
{
    printf("Multi-head attention, clear (the chapters' code, one thread) against fast\n"
           "(register-tile matmul, streaming attention, heads shared by threads).\n"
           "Self-attention on random inputs, evaluation mode, float32. Each line runs\n"
           "in its own process: ms is the median of `runs` passes after a warm-up\n"
           "(one pass over 5 s is timed once, without warm-up), peak memory is that\n"
           "process's largest resident size. Timings move with whatever else runs on\n"
           "the machine; the GFLOP/s count FLOPs = 4*B*n*D*D*2 + 2*B*n*n*D*2 for the\n"
           "forward, 3 times that for fwd+bwd (forward and backward), and\n"
           "4*B*n*n*D*2 for attn bwd (attention's backward alone, on the heads).\n"
           "PyTorch's figures for the targets: run, at the same time as this,\n"
           "  /usr/bin/python3 tests/fixtures/time_pytorch_multihead.py --threads %d\n"
           "and give the two medians it prints with --pytorch-ms F,FB.\n\n",
           opt->threads);
}

/* Whether a configuration has a clear line: not with --quick, not past
 * --clear-max, never when its weights pass CLEAR_MAX_WEIGHT_BYTES. */
static bool runs_clear(const Config *c, const Options *opt)
{
    const double weight_bytes = 4.0 * c->batch * c->num_heads * (double)c->num_queries * c->num_keys;
    return !c->fast_only && !opt->quick && c->num_queries <= opt->clear_max &&
           weight_bytes <= CLEAR_MAX_WEIGHT_BYTES;
}

/* The largest line of the list must fit before any runs: one line if not,
 * where each child would otherwise fail on its own. */
static void check_memory(const Config *list, int count, const Options *opt)
{
    double need = 0.0;
    const Config *largest = &list[0];
    for (int i = 0; i < count; i++) {
        const double bytes = line_bytes(&list[i], runs_clear(&list[i], opt));
        if (bytes > need) {
            need = bytes;
            largest = &list[i];
        }
    }
    char detail[96];
    snprintf(detail, sizeof detail, "the %s line of %s", PASS_NAMES[largest->pass],
             largest->label);
    memory_require(need, detail, "use a smaller --config, or a smaller --clear-max");
}

/* Every line of one configuration: the clear one (or why not), then fast
 * on 1 and N threads. Returns how many child processes failed. */
static int run_config(const Config *c, bool first_fast_only, const Options *opt,
                      Target targets[TARGET_COUNT])
{
    const int N = opt->threads;
    int failed = 0;
    const double weight_bytes = 4.0 * c->batch * c->num_heads * (double)c->num_queries * c->num_keys;
    if (first_fast_only)
        snprintf(new_line()->text, sizeof lines[0].text,
                 "-- the streaming path alone: the clear layer's weights would take %.0f GB"
                 " and more --", weight_bytes / 1e9);
    bool fits = weight_bytes <= CLEAR_MAX_WEIGHT_BYTES;
    bool clear = runs_clear(c, opt);
    const char *pass = PASS_NAMES[c->pass];
    /* a configuration whose clear forward did not finish (out of memory)
     * does not try its forward + backward, which needs more */
    static const char *clear_forward_failed;
    if (clear && c->pass != FORWARD && clear_forward_failed != NULL &&
        strcmp(clear_forward_failed, c->label) == 0) {
        snprintf(new_line()->text, sizeof lines[0].text,
                 "%-30s %-8s %-6s %7d   skipped: the clear forward did not finish", c->label,
                 pass, "clear", 1);
    } else if (clear) {
        Line *line = new_line();
        *line = (Line){c, "clear", 1, measure_in_child(c, false, 1, opt), ""};
        failed += !line->r.ok || !line->r.finite;
        if (!line->r.ok && c->pass == FORWARD)
            clear_forward_failed = c->label;
    } else if (!c->fast_only && !opt->quick && !fits) {
        snprintf(new_line()->text, sizeof lines[0].text,
                 "%-30s %-8s %-6s %7d   skipped: its weights alone are %.1f GB, more than the"
                 " %.0f GB this bench allows", c->label, pass, "clear", 1, weight_bytes / 1e9,
                 CLEAR_MAX_WEIGHT_BYTES / 1e9);
    } else if (!c->fast_only && !opt->quick) {
        snprintf(new_line()->text, sizeof lines[0].text,
                 "%-30s %-8s %-6s %7d   skipped: its weights alone are %.1f GB and one pass"
                 " takes minutes (--clear-max %d runs it)", c->label, pass, "clear", 1,
                 weight_bytes / 1e9, c->num_queries);
    }
    for (int threads = 1; threads <= N; threads += N - 1) {
        /* the longest lines run once, on all threads */
        if ((c->fast_only || c->pass == ATTENTION_BACKWARD) && threads == 1)
            continue;
        Result r = measure_in_child(c, true, threads, opt);
        *new_line() = (Line){c, "fast", threads, r, ""};
        failed += !r.ok || !r.finite;
        targets_record(targets, c, threads, N, &r);
    }
    return failed;
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    const int N = opt.threads;
    Config configs[] = {
        {"d2l toy (2, 4 q, 6 kv, 100, 5)", 2, 4, 6, 100, 5, FORWARD, true, false},
        {"d2l toy (2, 4 q, 6 kv, 100, 5)", 2, 4, 6, 100, 5, FORWARD_BACKWARD, true, false},
        {"(8, 512, 512, 8)", 8, 512, 512, 512, 8, FORWARD, false, false},
        {"(8, 512, 512, 8)", 8, 512, 512, 512, 8, FORWARD_BACKWARD, false, false},
        {"(1, 2048, 512, 8)", 1, 2048, 2048, 512, 8, FORWARD, false, false},
        {"(1, 8192, 512, 8)", 1, 8192, 8192, 512, 8, FORWARD, false, false},
        {"(1, 8192, 512, 8)", 1, 8192, 8192, 512, 8, ATTENTION_BACKWARD, false, false},
        {"(1, 16384, 512, 8)", 1, 16384, 16384, 512, 8, FORWARD, false, true},
        {"(1, 32768, 512, 8)", 1, 32768, 32768, 512, 8, FORWARD, false, true},
    };
    int count = (int)(sizeof configs / sizeof configs[0]);
    Config *list = configs;
    if (opt.config_text != NULL) {
        list = opt.custom;
        count = 2;
    } else if (opt.quick) {
        count = 4;
    }

    check_memory(list, count, &opt);
    print_introduction(&opt);

    /* the peak now and again after the lines; the table waits for both */
    peak_1 = fast_peak_gflops(1, 0.5);
    peak_n = fast_peak_gflops(N, 0.5);
    printf("Running the lines; the table follows when they and a second measurement\n"
           "of the peak are done.\n\n");
    fflush(stdout);

    Target targets[TARGET_COUNT];
    targets_init(targets, &opt);
    int failed = 0;   /* lines whose child did not finish: the status says so */
    for (int i = 0; i < count; i++)
        failed += run_config(&list[i], list[i].fast_only && (i == 0 || !list[i - 1].fast_only),
                             &opt, targets);

    /* keep the larger peak: a core busy during one measurement makes it low */
    peak_1 = fmax(peak_1, fast_peak_gflops(1, 0.5));
    peak_n = fmax(peak_n, fast_peak_gflops(N, 0.5));
    printf("fp32 peak of this machine (an FMA loop on vectors of %d floats, the\n"
           "kernels' width; the larger of a measurement before the lines and one\n"
           "after): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads.\n\n",
           fast_vector_width(), peak_1, peak_n, N);
    const int online = platform_cpu_count();
    const int usable = online < N ? online : N;
    if (peak_n < 0.75 * usable * peak_1)
        printf("Note: %d threads reached only %.1fx the peak of one on %d usable cores, so\n"
               "other programs are using the cores; the multi-threaded lines are slower\n"
               "than this machine can do. Run again when it is idle.\n\n",
               N, peak_n / peak_1, usable);

    print_header();
    for (int i = 0; i < line_count; i++) {
        if (lines[i].text[0])
            printf("%s\n", lines[i].text);
        else
            print_line(lines[i].c, lines[i].impl, lines[i].threads, &lines[i].r);
    }
    if (share_over_100)
        printf("\n* more than 100%% of the peak: the peak was measured low (other programs\n"
               "  were using the cores while it was measured), so this share is too high.\n");

    if (opt.config_text == NULL) {
        printf("\nTargets, on this run (PyTorch's figures %s):\n",
               opt.pytorch_text != NULL ? "as given with --pytorch-ms"
                                        : "from the machine the targets were set on");
        for (int i = 0; i < TARGET_COUNT; i++)
            print_target(&targets[i]);
    }
    /* a child that died said why on stderr itself; an overflow is said here */
    if (overflowed > 0) {
        fflush(stdout);
        fprintf(stderr, "%s: %d %s overflowed float32 (see the table): use a smaller --scale\n",
                PROG, overflowed, plural(overflowed, "line", "lines"));
    }
    return failed == 0 ? 0 : 1;
}
