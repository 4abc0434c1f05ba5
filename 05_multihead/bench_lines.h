/*
 * bench_lines.h - how the benchmark of the fast path (05_multihead/bench,
 * `make bench`) measures and prints: one pass timed in a child process of
 * its own, the machine's FMA peak, a table of lines with GFLOP/s and the
 * share of that peak, and ratios of two lines timed in the same run.
 *
 * A line is a configuration (its label), a pass ("forward", ...), an
 * implementation ("clear", "fast") and a thread count. What it runs is the
 * caller's: a BenchPass builds its work, runs one pass, frees it.
 *
 * Beside bench.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef BENCH_LINES_H
#define BENCH_LINES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int ok;              /* 1 when the child finished */
    int finite;          /* 1 when the warm-up's results held no NaN or infinity */
    double ms;           /* median milliseconds per pass */
    double best_ms;      /* the fastest of the timed runs */
    int runs;            /* timed runs behind the median and the best */
    double max_rss_mb;   /* the child's peak resident memory */
} BenchResult;

/* What a line runs, in the child: build(config) makes everything before
 * the clock starts, run(work, check) is one pass (with check it looks at
 * its results and returns false when one is NaN or infinite), destroy(work)
 * frees what build made. */
typedef struct {
    void *(*build)(const void *config);
    bool (*run)(void *work, bool check);
    void (*destroy)(void *work);
} BenchPass;

/* Build, warm up (the first run, checked), then the median and the best
 * of `repeats` timed runs (3 when a run takes over a second, none past 5 s: the first
 * run is then the measurement; a run under 20 ms is timed in a loop), all
 * in a child process, so that its peak memory is its own and a crash or an
 * allocation that fails costs one line (ok = 0), not the table. */
BenchResult bench_measure_in_child(const BenchPass *pass, const void *config, int repeats);

/* ---- the machine's peak ---------------------------------------------------- */
typedef struct {
    int threads;            /* N, the many-threads count */
    double one, many;       /* GFLOP/s on 1 and on N threads */
} BenchPeak;

/* Measure the FMA peak (fast_peak_gflops) on 1 and N threads, keeping the
 * larger of this and any earlier measurement: a core that was busy during
 * one measurement would make it low. */
void bench_peak_measure(BenchPeak *peak);
/* The peak, and a note when N threads reached well under N times one
 * thread's: other programs are using the cores. */
void bench_peak_print(const BenchPeak *peak);

/* ---- the table --------------------------------------------------------------- */
enum { BENCH_MAX_LINES = 64, BENCH_MAX_RUNS = 51 };

typedef struct {
    const char *label;      /* the configuration, "(8, 512, 512, 8)" */
    const char *pass;       /* "forward", "fwd+bwd", ... */
    const char *impl;       /* "clear" or "fast" */
    int threads;
    double flops;           /* of one pass, for GFLOP/s */
    BenchResult r;
    char text[200];         /* not empty: a note printed instead */
} BenchLine;

typedef struct {
    BenchLine lines[BENCH_MAX_LINES];
    int count;
} BenchTable;

/* A new measured line, and a note line (printf-style). */
void bench_add(BenchTable *table, const char *label, const char *pass, const char *impl,
               int threads, double flops, BenchResult r);
void bench_note(BenchTable *table, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* Print the header and every line; return how many lines overflowed. */
int bench_table_print(const BenchTable *table, const BenchPeak *peak);
/* The finished line (ok, finite) with these names and threads, or NULL. */
const BenchLine *bench_find(const BenchTable *table, const char *label, const char *pass,
                            const char *impl, int threads);
/* "2.13x": other_ms / ms, or "-" when other_ms is 0 (no such line). */
void bench_ratio_text(char *buf, size_t len, double other_ms, double ms);

#endif
