/*
 * 05_multihead/bench - speed and memory of the multi-head layer, clear
 * (multihead_forward, the chapters' code) against fast
 * (fast_multihead_forward: register-tile matmul, streaming attention,
 * threads). Run it with `make bench`.
 *
 * Legend: B = batch_size, n = tokens (self-attention: T = K = n),
 * D = num_hiddens, H = num_heads; for the d2l toy, T = 4 queries and
 * K = 6 key-value pairs.
 *
 * What is measured, and how:
 *   - the machine's fp32 peak, by an FMA loop (fast_peak_gflops) on 1 and
 *     on N threads, before and after the lines, the larger kept: a busy
 *     core during one measurement would otherwise make it low;
 *   - per (configuration, implementation, threads): the median time of
 *     several runs after a warm-up run, with clock_gettime; GFLOP/s with
 *     FLOPs = 4 projections (2 * rows * D * D each) + 2 attention products
 *     (2 * B * T * K * D each), which is 4*B*n*D*D*2 + 2*B*n*n*D*2 for
 *     self-attention; percent of the peak for that thread count;
 *   - peak resident memory (getrusage's ru_maxrss). Every line runs in a
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

#include "io/cli.h"
#include "fast/fast_matmul.h"
#include "multihead.h"
#include "fast/fast_multihead.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

#define PROG "bench"

enum { MAX_RUNS = 51, MAX_LINES = 64 };

/* The clear layer never runs when its weights, 4 * B * H * n * n bytes,
 * pass this: with the inputs, projections and outputs beside them, a
 * larger run may not fit in memory. */
#define CLEAR_MAX_WEIGHT_BYTES 2e9

typedef struct {
    const char *label;         /* what the line calls this configuration */
    int batch, num_queries, num_keys, num_hiddens, num_heads;
    bool toy_mask;             /* d2l's valid_lens [3, 2] */
    bool fast_only;            /* the streaming path alone */
} Config;

typedef struct {
    uint64_t seed;
    int repeats;               /* timed runs per line (the median is printed) */
    int threads;               /* the "many threads" count */
    int clear_max;             /* the clear layer runs only for n <= this */
    bool quick;                /* skip the slow lines */
    Config custom;             /* --config B,n,D,H */
    bool has_custom;
} Options;

typedef struct {
    int ok;                    /* 1 when the child finished */
    double ms;                 /* median milliseconds per forward pass */
    int runs;                  /* timed runs behind the median */
    double max_rss_mb;
} Result;

static void usage(void)
{
    printf("usage: %s [--seed N] [--repeats N] [--threads N] [--clear-max N] [--quick]\n"
           "             [--config B,n,D,H] [--help]\n"
           "\n"
           "Time and peak memory of the multi-head attention layer, the clear version\n"
           "of the chapters against the fast one (common/fast_multihead.c), on\n"
           "(B, n, D, H) = (8, 512, 512, 8), (1, 2048, 512, 8), (1, 8192, 512, 8), the\n"
           "d2l toy, and the fast one alone at n = 16384 and 32768.\n"
           "\n"
           "  --seed N          seed for the layer and its inputs (default 0)\n"
           "  --repeats N       timed runs per line, 1 to %d; the median is printed\n"
           "                    (default 5; runs over a second use fewer)\n"
           "  --threads N       thread count of the multi-threaded lines, 2 to 64 (default 2)\n"
           "  --clear-max N     run the clear layer only up to n = N, 1 to 65536\n"
           "                    (default 2048: one pass at n = 4096 takes minutes); it\n"
           "                    never runs when its weights would pass 2 GB\n"
           "  --quick           only the d2l toy and (8, 512, 512, 8), fast lines only\n"
           "  --config B,n,D,H  only this self-attention configuration\n"
           "  --help            this text\n",
           PROG, MAX_RUNS);
}

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
    return projections + attention;
}

/* ---- one line, in a child process ------------------------------------------- */

static Tensor *forward(bool fast, int threads, const MultiHeadAttention *layer,
                       const Tensor *queries, const Tensor *keys, const ValidLens *valid_lens)
{
    /* self-attention: the same tensor is queries, keys and values, as in
     * a NumPy or PyTorch layer timed the same way; the toy has its own keys */
    if (fast)
        return fast_multihead_forward(layer, queries, keys, keys, valid_lens, threads);
    return multihead_forward(layer, queries, keys, keys, valid_lens, false, NULL, NULL);
}

/* Build the layer and inputs, run, and return the median. */
static Result measure(const Config *c, bool fast, int threads, const Options *opt)
{
    Rng rng = rng_new(opt->seed);
    const int D = c->num_hiddens;
    MultiHeadAttention *layer = multihead_new(D, D, D, D, c->num_heads, 0.0f, true, &rng);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(c->batch, c->num_queries, D));
    Tensor *keys = c->num_keys == c->num_queries
                       ? queries
                       : tensor_normal(&rng, 0.0f, 1.0f, SHAPE(c->batch, c->num_keys, D));
    ValidLens *valid_lens = c->toy_mask ? valid_lens_1d((const int[]){3, 2}, 2) : NULL;

    /* The first run warms up (page faults, caches). One that took over 5 s
     * is its own measurement: repeating it would only cost minutes. */
    double t0 = now_ms();
    tensor_free(forward(fast, threads, layer, queries, keys, valid_lens));
    double first = now_ms() - t0;
    Result r = {1, first, 1, 0.0};
    if (first <= 5000.0) {
        int runs = first > 1000.0 ? (opt->repeats < 3 ? opt->repeats : 3) : opt->repeats;
        /* a pass shorter than 20 ms is timed in a loop, so the clock's
         * resolution and the loop overhead do not matter */
        int inner = first < 20.0 ? (int)ceil(20.0 / (first > 1e-3 ? first : 1e-3)) : 1;
        double times[MAX_RUNS];
        for (int i = 0; i < runs; i++) {
            t0 = now_ms();
            for (int j = 0; j < inner; j++)
                tensor_free(forward(fast, threads, layer, queries, keys, valid_lens));
            times[i] = (now_ms() - t0) / inner;
        }
        qsort(times, (size_t)runs, sizeof times[0], compare_doubles);
        r.ms = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
        r.runs = runs;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    r.max_rss_mb = (double)usage.ru_maxrss / 1024.0;   /* Linux reports kilobytes */

    if (keys != queries)
        tensor_free(keys);
    tensor_free(queries);
    valid_lens_free(valid_lens);
    multihead_free(layer);
    return r;
}

/* Run measure() in a child and read its result through a pipe; a child
 * that dies (out of memory, a crash) gives ok = 0. */
static Result measure_in_child(const Config *c, bool fast, int threads, const Options *opt)
{
    Result r = {0, 0.0, 0, 0.0};
    int fds[2];
    fflush(stdout);
    if (pipe(fds) != 0) {
        perror(PROG ": pipe");
        return r;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror(PROG ": fork");
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
static bool share_over_100;      /* a line beat the measured peak */

static void print_header(void)
{
    printf("%-30s %-6s %7s %11s %5s %9s %7s %12s\n", "config (B, n, D, H)", "impl",
           "threads", "ms", "runs", "GFLOP/s", "% peak", "peak memory");
}

static void print_line(const Config *c, const char *impl, int threads, const Result *r)
{
    if (!r->ok) {
        printf("%-30s %-6s %7d   failed: the child process did not finish (out of memory?)\n",
               c->label, impl, threads);
        return;
    }
    double gflops = flops_of(c) / (r->ms * 1e-3) / 1e9;
    double share = 100.0 * gflops / (threads == 1 ? peak_1 : peak_n);
    /* over 100% only when the peak was measured low; the star says so */
    if (share > 100.0)
        share_over_100 = true;
    printf("%-30s %-6s %7d %11.2f %5d %9.1f %6.1f%s %9.1f MB\n", c->label, impl, threads,
           r->ms, r->runs, gflops, share, share > 100.0 ? "*" : "%", r->max_rss_mb);
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
    const char *what;
    double value, limit;
    const char *unit;
    bool ran;
} Target;

static void print_target(const Target *t)
{
    if (!t->ran) {
        printf("  %-52s not run\n", t->what);
        return;
    }
    printf("  %-52s %9.1f %-3s (limit %g %s): %s\n", t->what, t->value, t->unit, t->limit,
           t->unit, t->value <= t->limit ? "met" : "NOT met");
}

static void parse_config(const char *text, Config *c)
{
    long v[4];
    if (cli_long_list(PROG, "--config", text, 1, 65536, v, 4) != 4)
        cli_fail(PROG, "--config expects B,n,D,H, four whole numbers, got '%s'", text);
    if (v[2] % v[3] != 0)
        cli_fail(PROG, "--config: D = %ld does not divide by H = %ld", v[2], v[3]);
    if ((double)v[0] * v[1] * v[2] > 1e9)
        cli_fail(PROG, "--config: B * n * D = %.0f floats is too much for one input",
                 (double)v[0] * v[1] * v[2]);
    static char label[64];
    snprintf(label, sizeof label, "(%ld, %ld, %ld, %ld)", v[0], v[1], v[2], v[3]);
    *c = (Config){label, (int)v[0], (int)v[1], (int)v[1], (int)v[2], (int)v[3], false, false};
}

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .repeats = 5, .threads = 2, .clear_max = 2048};
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--help")) {
            usage();
            exit(0);
        } else if (cli_is(argv[i], "--seed")) {
            opt.seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
        } else if (cli_is(argv[i], "--repeats")) {
            opt.repeats = (int)cli_long(PROG, "--repeats", cli_value(PROG, argc, argv, &i), 1,
                                        MAX_RUNS);
        } else if (cli_is(argv[i], "--threads")) {
            opt.threads = (int)cli_long(PROG, "--threads", cli_value(PROG, argc, argv, &i), 2, 64);
        } else if (cli_is(argv[i], "--clear-max")) {
            opt.clear_max = (int)cli_long(PROG, "--clear-max", cli_value(PROG, argc, argv, &i), 1,
                                          65536);
        } else if (cli_is(argv[i], "--quick")) {
            opt.quick = true;
        } else if (cli_is(argv[i], "--config")) {
            parse_config(cli_value(PROG, argc, argv, &i), &opt.custom);
            opt.has_custom = true;
        } else {
            cli_unknown(PROG, argv[i]);
        }
    }
    return opt;
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    const int N = opt.threads;

    printf("Multi-head attention, clear (the chapters' code, one thread) against fast\n"
           "(register-tile matmul, streaming attention, heads shared by threads).\n"
           "Self-attention on random inputs, evaluation mode, float32. Each line runs\n"
           "in its own process: ms is the median of `runs` passes after a warm-up\n"
           "(one pass over 5 s is timed once, without warm-up), peak memory is that\n"
           "process's largest resident size. Timings move with whatever else runs on\n"
           "the machine; the GFLOP/s count FLOPs = 4*B*n*D*D*2 + 2*B*n*n*D*2.\n\n");

    /* the peak now and again after the lines; the table waits for both */
    peak_1 = fast_peak_gflops(1, 0.5);
    peak_n = fast_peak_gflops(N, 0.5);
    printf("Running the lines; the table follows when they and a second measurement\n"
           "of the peak are done.\n\n");
    fflush(stdout);

    Config configs[] = {
        {"d2l toy (2, 4 q, 6 kv, 100, 5)", 2, 4, 6, 100, 5, true, false},
        {"(8, 512, 512, 8)", 8, 512, 512, 512, 8, false, false},
        {"(1, 2048, 512, 8)", 1, 2048, 2048, 512, 8, false, false},
        {"(1, 8192, 512, 8)", 1, 8192, 8192, 512, 8, false, false},
        {"(1, 16384, 512, 8)", 1, 16384, 16384, 512, 8, false, true},
        {"(1, 32768, 512, 8)", 1, 32768, 32768, 512, 8, false, true},
    };
    int count = (int)(sizeof configs / sizeof configs[0]);
    Config *list = configs;
    if (opt.has_custom) {
        list = &opt.custom;
        count = 1;
    } else if (opt.quick) {
        count = 2;
    }

    /* the targets are for the multi-threaded lines, on N threads */
    char what[3][64];
    snprintf(what[0], sizeof what[0], "(8, 512, 512, 8), fast, %d threads: time", N);
    snprintf(what[1], sizeof what[1], "(1, 8192, 512, 8), fast, %d threads: time", N);
    snprintf(what[2], sizeof what[2], "(1, 8192, 512, 8), fast, %d threads: peak memory", N);
    Target targets[3] = {
        {what[0], 0, 120, "ms", false},
        {what[1], 0, 1400, "ms", false},
        {what[2], 0, 100, "MB", false},
    };
    Target big_memory = {"(1, 32768, 512, 8), fast: peak memory", 0, 600, "MB", false};

    int failed = 0;   /* lines whose child did not finish: the status says so */
    for (int i = 0; i < count; i++) {
        const Config *c = &list[i];
        const double weight_bytes =
            4.0 * c->batch * c->num_heads * (double)c->num_queries * c->num_keys;
        if (c->fast_only && (i == 0 || !list[i - 1].fast_only))
            snprintf(new_line()->text, sizeof lines[0].text,
                     "-- the streaming path alone: the clear layer's weights would take %.0f GB"
                     " and more --", weight_bytes / 1e9);
        bool fits = weight_bytes <= CLEAR_MAX_WEIGHT_BYTES;
        bool clear = !c->fast_only && !opt.quick && c->num_queries <= opt.clear_max && fits;
        if (clear) {
            Line *line = new_line();
            *line = (Line){c, "clear", 1, measure_in_child(c, false, 1, &opt), ""};
            failed += !line->r.ok;
        } else if (!c->fast_only && !opt.quick && !fits) {
            snprintf(new_line()->text, sizeof lines[0].text,
                     "%-30s %-6s %7d   skipped: its weights alone are %.1f GB, more than the"
                     " %.0f GB this bench allows", c->label, "clear", 1, weight_bytes / 1e9,
                     CLEAR_MAX_WEIGHT_BYTES / 1e9);
        } else if (!c->fast_only && !opt.quick) {
            snprintf(new_line()->text, sizeof lines[0].text,
                     "%-30s %-6s %7d   skipped: its weights alone are %.1f GB and one pass takes"
                     " minutes (--clear-max %d runs it)", c->label, "clear", 1,
                     weight_bytes / 1e9, c->num_queries);
        }
        for (int threads = 1; threads <= N; threads += N - 1) {
            /* the longest lines run once, on all threads */
            if (c->fast_only && threads == 1)
                continue;
            Result r = measure_in_child(c, true, threads, &opt);
            *new_line() = (Line){c, "fast", threads, r, ""};
            failed += !r.ok;
            if (r.ok && threads == N && c->batch == 8 && c->num_queries == 512 &&
                c->num_hiddens == 512 && c->num_heads == 8)
                targets[0] = (Target){targets[0].what, r.ms, 120, "ms", true};
            if (r.ok && threads == N && c->batch == 1 && c->num_queries == 8192 &&
                c->num_hiddens == 512 && c->num_heads == 8) {
                targets[1] = (Target){targets[1].what, r.ms, 1400, "ms", true};
                targets[2] = (Target){targets[2].what, r.max_rss_mb, 100, "MB", true};
            }
            if (r.ok && c->batch == 1 && c->num_queries == 32768 && c->num_hiddens == 512 &&
                c->num_heads == 8)
                big_memory = (Target){big_memory.what, r.max_rss_mb, 600, "MB", true};
        }
    }

    /* keep the larger peak: a core busy during one measurement makes it low */
    peak_1 = fmax(peak_1, fast_peak_gflops(1, 0.5));
    peak_n = fmax(peak_n, fast_peak_gflops(N, 0.5));
    printf("fp32 peak of this machine (an FMA loop on vectors of %d floats, the\n"
           "kernels' width; the larger of a measurement before the lines and one\n"
           "after): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads.\n\n",
           fast_vector_width(), peak_1, peak_n, N);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int usable = online > 0 && online < N ? (int)online : N;
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

    if (!opt.has_custom) {
        printf("\nTargets, on this run:\n");
        for (int i = 0; i < 3; i++)
            print_target(&targets[i]);
        print_target(&big_memory);
    }
    return failed == 0 ? 0 : 1;
}
