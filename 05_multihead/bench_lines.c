/*
 * bench_lines.c - measuring and printing for the benchmark. See
 * bench_lines.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_lines.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fast/fast_matmul.h"
#include "platform.h"

enum { MAX_RUNS = BENCH_MAX_RUNS };

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

/* In the child: build, warm up, time, free. */
static BenchResult measure(const BenchPass *pass, const void *config, int repeats)
{
    void *work = pass->build(config);
    /* The first run warms up (page faults, caches). One that took over 5 s
     * is its own measurement: repeating it would only cost minutes. */
    double t0 = now_ms();
    const bool finite = pass->run(work, true);
    double first = now_ms() - t0;
    BenchResult r = {1, finite, first, first, 1, 0.0};
    if (finite && first <= 5000.0) {
        int runs = first > 1000.0 ? (repeats < 3 ? repeats : 3) : repeats;
        runs = runs < MAX_RUNS ? runs : MAX_RUNS;
        /* a pass shorter than 20 ms is timed in a loop, so the clock's
         * resolution and the loop overhead do not matter */
        int inner = first < 20.0 ? (int)ceil(20.0 / (first > 1e-3 ? first : 1e-3)) : 1;
        double times[MAX_RUNS];
        for (int i = 0; i < runs; i++) {
            t0 = now_ms();
            for (int j = 0; j < inner; j++)
                pass->run(work, false);
            times[i] = (now_ms() - t0) / inner;
        }
        qsort(times, (size_t)runs, sizeof times[0], compare_doubles);
        r.ms = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
        r.best_ms = times[0];
        r.runs = runs;
    }
    r.max_rss_mb = platform_peak_rss_bytes() / (1024.0 * 1024.0);
    pass->destroy(work);
    return r;
}

BenchResult bench_measure_in_child(const BenchPass *pass, const void *config, int repeats)
{
    BenchResult r = {0, 0, 0.0, 0.0, 0, 0.0};
    int fds[2];
    fflush(stdout);
    if (pipe(fds) != 0) {
        fail("cannot measure a line: pipe: %s", strerror(errno));
        return r;
    }
    const long parent = (long)getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fail("cannot measure a line: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return r;
    }
    if (pid == 0) {
        platform_child_of(parent);
        close(fds[0]);
        BenchResult mine = measure(pass, config, repeats);
        ssize_t written = write(fds[1], &mine, sizeof mine);
        close(fds[1]);
        _exit(written == (ssize_t)sizeof mine ? 0 : 1);
    }
    close(fds[1]);
    BenchResult got;
    if (read(fds[0], &got, sizeof got) == (ssize_t)sizeof got)
        r = got;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        r.ok = 0;
    return r;
}

/* ---- the peak ------------------------------------------------------------------ */

void bench_peak_measure(BenchPeak *peak)
{
    peak->one = fmax(peak->one, fast_peak_gflops(1, 0.5));
    peak->many = fmax(peak->many, fast_peak_gflops(peak->threads, 0.5));
}

void bench_peak_print(const BenchPeak *peak)
{
    const int N = peak->threads;
    printf("fp32 peak of this machine (an FMA loop on vectors of %d floats, the\n"
           "kernels' width; the larger of a measurement before the lines and one\n"
           "after): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads.\n\n",
           fast_vector_width(), peak->one, peak->many, N);
    const int online = platform_cpu_count();
    const int usable = online < N ? online : N;
    if (peak->many < 0.75 * usable * peak->one)
        printf("Note: %d threads reached only %.1fx the peak of one on %d usable cores, so\n"
               "other programs are using the cores; the multi-threaded lines are slower\n"
               "than this machine can do. Run again when it is idle.\n\n",
               N, peak->many / peak->one, usable);
}

/* ---- the table ------------------------------------------------------------------- */

static BenchLine *new_line(BenchTable *table)
{
    if (table->count == BENCH_MAX_LINES)
        die("bench", "more than %d lines in the table", BENCH_MAX_LINES);
    BenchLine *line = &table->lines[table->count++];
    memset(line, 0, sizeof *line);
    return line;
}

void bench_add(BenchTable *table, const char *label, const char *pass, const char *impl,
               int threads, double flops, BenchResult r)
{
    *new_line(table) = (BenchLine){label, pass, impl, threads, flops, r, ""};
}

void bench_note(BenchTable *table, const char *format, ...)
{
    BenchLine *line = new_line(table);
    va_list args;
    va_start(args, format);
    vsnprintf(line->text, sizeof line->text, format, args);
    va_end(args);
}

/* One measured line; returns 1 when it overflowed, and sets *over_100
 * when its share passed the measured peak. */
static int print_line(const BenchLine *l, const BenchPeak *peak, bool *over_100)
{
    printf("%-30s %-8s %-6s %7d ", l->label, l->pass, l->impl, l->threads);
    if (!l->r.ok) {
        printf("  failed: the child process did not finish (out of memory?)\n");
        return 0;
    }
    if (!l->r.finite) {
        printf("  failed: a result overflowed float32 (NaN or infinity)\n");
        return 1;
    }
    /* The rate of the fastest run, against the peak, itself the best of
     * several runs: whatever else uses the machine can only slow a run
     * down, so the best of each is the nearest to what the code and the
     * machine can do. The median beside it is what a run took typically. */
    const double gflops = l->flops / (l->r.best_ms * 1e-3) / 1e9;
    const double share = 100.0 * gflops / (l->threads == 1 ? peak->one : peak->many);
    /* over 100% only when the peak was measured low; the star says so */
    *over_100 = *over_100 || share > 100.0;
    printf("%11.2f %9.2f %5d %9.1f %6.1f%s %9.1f MB\n", l->r.ms, l->r.best_ms, l->r.runs, gflops, share,
           share > 100.0 ? "*" : "%", l->r.max_rss_mb);
    return 0;
}

int bench_table_print(const BenchTable *table, const BenchPeak *peak)
{
    printf("%-30s %-8s %-6s %7s %11s %9s %5s %9s %7s %12s\n", "config (B, n, D, H)", "pass",
           "impl", "threads", "ms", "best ms", "runs", "GFLOP/s", "% peak", "peak memory");
    int overflowed = 0;
    bool over_100 = false;
    for (int i = 0; i < table->count; i++) {
        if (table->lines[i].text[0])
            printf("%s\n", table->lines[i].text);
        else
            overflowed += print_line(&table->lines[i], peak, &over_100);
    }
    if (over_100)
        printf("\n* more than 100%% of the peak: the peak was measured low (other programs\n"
               "  were using the cores while it was measured), so this share is too high.\n");
    return overflowed;
}

const BenchLine *bench_find(const BenchTable *table, const char *label, const char *pass,
                            const char *impl, int threads)
{
    for (int i = 0; i < table->count; i++) {
        const BenchLine *l = &table->lines[i];
        if (l->text[0] == '\0' && strcmp(l->label, label) == 0 && strcmp(l->pass, pass) == 0 &&
            strcmp(l->impl, impl) == 0 && l->threads == threads && l->r.ok && l->r.finite)
            return l;
    }
    return NULL;
}

void bench_ratio_text(char *buf, size_t len, double other_ms, double ms)
{
    if (other_ms > 0.0)
        snprintf(buf, len, "%.2fx", other_ms / ms);
    else
        snprintf(buf, len, "-");
}
