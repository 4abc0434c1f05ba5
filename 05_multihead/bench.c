/*
 * 05_multihead/bench - speed and memory of the multi-head layer, clear
 * (multihead_forward and multihead_backward, the chapters' code) against
 * fast (fast_multihead_forward and fast_multihead_backward: register-tile
 * matmul, streaming attention, threads), and causal streaming attention
 * against full. Run it with `make bench`.
 *
 * The lines are listed here (CONFIGS); what a line runs and how its FLOPs
 * are counted is bench_passes.h, how it is timed and printed
 * bench_lines.h (both beside this file): the median and the best of
 * several runs after a warm-up, each line in a child process of its own,
 * the machine's FMA peak before and after the lines. Every comparison is
 * a ratio of two lines timed in this run.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_passes.h"
#include "error.h"
#include "heads.h"
#include "io/cli.h"
#include "memory.h"

static const char PROG[] = "bench";

/* The clear layer never runs when its weights, 4 * B * H * n * n bytes,
 * pass this: with the inputs, projections and outputs beside them, a
 * larger run may not fit in memory. */
#define CLEAR_MAX_WEIGHT_BYTES 2e9

typedef struct {
    uint64_t seed;
    int repeats;               /* timed runs per line (the median is printed) */
    int threads;               /* the "many threads" count */
    int clear_max;             /* the clear layer runs only for n <= this */
    double scale;              /* standard deviation of the random inputs */
    bool quick;                /* skip the slow lines */
    const char *config_text;   /* --config B,n,D,H */
    const char *pytorch_text;  /* --pytorch-ms F,FB, or NULL: PyTorch is not compared */
    BenchConfig custom[6];     /* --config: the layer's two passes, attention's four */
    double pytorch_ms[2];      /* forward, forward + backward at (8, 512, 512, 8) */
} Options;

/* ---- ratios measured in this run ------------------------------------------------------- */

/* PyTorch's time for c, as given with --pytorch-ms (measured before this
 * run, at (8, 512, 512, 8) only); 0 when there is none. */
static double pytorch_ms_of(const BenchConfig *c, const Options *opt)
{
    const bool at_its_size = c->batch == 8 && c->num_queries == 512 && c->num_keys == 512 &&
                             c->num_hiddens == 512 && c->num_heads == 8;
    if (opt->pytorch_text == NULL || !at_its_size || c->pass > BENCH_FORWARD_BACKWARD)
        return 0.0;
    return opt->pytorch_ms[c->pass];
}

/* Every layer line on N threads against the lines it can be held to: the
 * clear layer on 1 thread and the fast one on 1 thread, both timed in this
 * run, and PyTorch when its time was given. */
static void print_ratios(const BenchTable *table, const BenchConfig *list, int count,
                         const Options *opt)
{
    const int N = opt->threads;
    printf("\nSpeed-ups, each measured in this run: the time of the clear layer (1 thread),\n"
           "of the fast one on 1 thread%s, over the fast one's on %d threads.\n",
           opt->pytorch_text ? " and of PyTorch (given with --pytorch-ms)" : "", N);
    char threads_head[32];
    snprintf(threads_head, sizeof threads_head, "1/%d threads", N);
    printf("%-30s %-8s %12s %12s%s\n", "config (B, n, D, H)", "pass", "clear/fast",
           threads_head, opt->pytorch_text ? "  PyTorch/fast" : "");
    for (const BenchConfig *c = list; c < list + count; c++) {
        const char *pass = BENCH_PASS_NAMES[c->pass];
        const BenchLine *fast = bench_find(table, c->label, pass, "fast", N);
        if (fast == NULL || c->causal || c->pass == BENCH_ATTENTION_FORWARD || c->pass == BENCH_ATTENTION_FB)
            continue;
        const BenchLine *clear = bench_find(table, c->label, pass, "clear", 1);
        const BenchLine *one = bench_find(table, c->label, pass, "fast", 1);
        char clear_text[16], one_text[16], pytorch_text[16];
        bench_ratio_text(clear_text, sizeof clear_text, clear ? clear->r.ms : 0.0, fast->r.ms);
        bench_ratio_text(one_text, sizeof one_text, one ? one->r.ms : 0.0, fast->r.ms);
        bench_ratio_text(pytorch_text, sizeof pytorch_text, pytorch_ms_of(c, opt), fast->r.ms);
        printf("%-30s %-8s %12s %12s", c->label, pass, clear_text, one_text);
        if (opt->pytorch_text)
            printf("  %12s", pytorch_text);
        printf("\n");
    }
    if (opt->pytorch_text == NULL)
        printf("\nTo hold the fast layer to PyTorch, time PyTorch before the bench, not during\n"
               "it (the two would share the cores):\n"
               "  /usr/bin/python3 tests/fixtures/time_pytorch_multihead.py --threads %d\n"
               "then give the two medians it prints with --pytorch-ms F,FB.\n", N);
}

/* Each causal configuration against the full one listed just before it. */
static void print_causal_ratios(const BenchTable *table, const BenchConfig *list, int count,
                                const Options *opt)
{
    bool header = false;
    for (int i = 1; i < count; i++) {
        const BenchConfig *causal = &list[i], *full = &list[i - 1];
        if (!causal->causal)
            continue;
        if (!header)
            printf("\nCausal attention skips the key blocks in every query block's future: the\n"
                   "time of full attention over causal, the same heads, in this run, as a\n"
                   "ratio of the two medians and of the two best runs.\n"
                   "%-30s %-8s %7s %12s %12s\n", "config (B, n, D, H)", "pass", "threads",
                   "full/causal", "best/best");
        header = true;
        for (int threads = 1; threads <= opt->threads; threads += opt->threads - 1) {
            const char *pass = BENCH_PASS_NAMES[causal->pass];
            const BenchLine *c = bench_find(table, causal->label, pass, "fast", threads);
            const BenchLine *f = bench_find(table, full->label, pass, "fast", threads);
            char text[16], best_text[16];
            bench_ratio_text(text, sizeof text, c && f ? f->r.ms : 0.0, c ? c->r.ms : 1.0);
            bench_ratio_text(best_text, sizeof best_text, c && f ? f->r.best_ms : 0.0,
                             c ? c->r.best_ms : 1.0);
            printf("%-30s %-8s %7d %12s %12s\n", full->label, pass, threads, text, best_text);
        }
    }
}

/* ---- options ---------------------------------------------------------------------- */

/* --config B,n,D,H: one self-attention configuration: the layer forward
 * and forward + backward, attention alone on its heads, full and causal */
static void parse_config(Options *opt)
{
    long v[4];
    const char *text = opt->config_text;
    char why[CLI_ERR_LEN];
    const int count = cli_read_long_list("--config", text, 1, 65536, v, 4, why, sizeof why);
    if (count < 0)
        cli_fail(PROG, "%s", why);
    if (count != 4)
        cli_fail(PROG, "--config expects B,n,D,H, four whole numbers, got '%s'", text);
    if (!heads_split((int)v[2], (int)v[3], "D =", "H =", why, sizeof why))
        cli_fail(PROG, "--config: %s", why);
    if ((double)v[0] * v[1] * v[2] > 1e9)
        cli_fail(PROG, "--config: B * n * D = %.0f floats is too much for one input",
                 (double)v[0] * v[1] * v[2]);
    static char label[64], causal_label[72];
    snprintf(label, sizeof label, "(%ld, %ld, %ld, %ld)", v[0], v[1], v[2], v[3]);
    snprintf(causal_label, sizeof causal_label, "%s causal", label);
    const BenchPassKind passes[6] = {BENCH_FORWARD, BENCH_FORWARD_BACKWARD,
                                     BENCH_ATTENTION_FORWARD, BENCH_ATTENTION_FORWARD,
                                     BENCH_ATTENTION_FB, BENCH_ATTENTION_FB};
    for (int i = 0; i < 6; i++) {
        const bool causal = i == 3 || i == 5, layer = i < 2;
        opt->custom[i] = (BenchConfig){causal ? causal_label : label, (int)v[0], (int)v[1],
                                       (int)v[1], (int)v[2], (int)v[3], passes[i], layer, true,
                                       false, causal, NULL};
    }
}

/* --pytorch-ms F,FB: PyTorch's medians, measured before the bench */
static void parse_pytorch(Options *opt)
{
    const char *text = opt->pytorch_text, *comma = strchr(text, ',');
    char first[64];
    if (comma == NULL || (size_t)(comma - text) >= sizeof first)
        cli_fail(PROG, "--pytorch-ms expects F,FB, two times in ms, got '%s'", text);
    memcpy(first, text, (size_t)(comma - text));
    first[comma - text] = '\0';
    char err[CLI_ERR_LEN];
    if (!cli_read_double("--pytorch-ms", first, 0.001, 1e7, &opt->pytorch_ms[0], err, sizeof err) ||
        !cli_read_double("--pytorch-ms", comma + 1, 0.001, 1e7, &opt->pytorch_ms[1], err,
                         sizeof err))
        cli_fail(PROG, "%s", err);
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .repeats = 5, .threads = 2, .clear_max = 2048, .scale = 1.0};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the layer and its inputs"},
        {"--repeats", CLI_INT, &opt.repeats, .min = 1, .max = BENCH_MAX_RUNS, .metavar = "N",
         .help = "timed runs per line; their median and best are printed\n(runs over a second use fewer)"},
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
         .help = "only this self-attention configuration: the layer\nforward and forward + backward, attention alone\non its heads, full and causal",
         .default_text = "the list above"},
        {"--pytorch-ms", CLI_STRING, &opt.pytorch_text, .metavar = "F,FB",
         .help = "PyTorch's forward and forward + backward ms at\n(8, 512, 512, 8), as "
                 "tests/fixtures/\ntime_pytorch_multihead.py prints them when run\njust "
                 "before the bench: the speed-ups then\ninclude PyTorch's"},
    };
    *done = cli_parse(&(CliTable){PROG,
                                  "Time and peak memory of the multi-head attention layer, the clear "
                                  "version\nof the chapters against the fast one "
                                  "(common/fast/fast_multihead.c):\nthe forward on (B, n, D, H) = "
                                  "(8, 512, 512, 8), (1, 2048, 512, 8),\n(1, 8192, 512, 8) and the d2l "
                                  "toy, forward + backward on the toy and\n(8, 512, 512, 8), attention's "
                                  "backward alone on the heads of\n(1, 8192, 512, 8), causal streaming "
                                  "attention against full on the\nheads of (1, 2048, 512, 8), and the "
                                  "fast forward alone at n = 16384\nand 32768.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    if (opt.config_text != NULL)
        parse_config(&opt);
    if (opt.pytorch_text != NULL)
        parse_pytorch(&opt);
    return opt;
}

/* ---- the lines ---------------------------------------------------------------------- */

/* Whether a configuration's clear line runs: not with --quick, not past
 * --clear-max, never when its weights pass CLEAR_MAX_WEIGHT_BYTES. */
static bool runs_clear(const BenchConfig *c, const Options *opt)
{
    const double weight_bytes = 4.0 * c->batch * c->num_heads * (double)c->num_queries * c->num_keys;
    return c->clear && !opt->quick && c->num_queries <= opt->clear_max &&
           weight_bytes <= CLEAR_MAX_WEIGHT_BYTES;
}

/* The largest line of the list must fit before any runs: one line if not,
 * where each child would otherwise fail on its own. */
static int check_memory(const BenchConfig *list, int count, const Options *opt)
{
    double need = 0.0;
    const BenchConfig *largest = &list[0];
    for (int i = 0; i < count; i++) {
        const double bytes = bench_line_bytes(&list[i], runs_clear(&list[i], opt));
        if (bytes > need) {
            need = bytes;
            largest = &list[i];
        }
    }
    char detail[96];
    snprintf(detail, sizeof detail, "the %s line of %s", BENCH_PASS_NAMES[largest->pass],
             largest->label);
    return memory_require(need, detail, "use a smaller --config, or a smaller --clear-max");
}

static BenchResult measure(const BenchConfig *c, bool fast, int threads, const Options *opt)
{
    const BenchLineSpec spec = {c, fast, threads, opt->seed, opt->scale};
    return bench_measure_in_child(&BENCH_LAYER_PASS, &spec, opt->repeats);
}

/* The clear line of a configuration, or why there is none. Returns 0, or
 * the status a line's child process failed with. */
static int run_clear(BenchTable *table, const BenchConfig *c, const Options *opt)
{
    const double weight_bytes = 4.0 * c->batch * c->num_heads * (double)c->num_queries * c->num_keys;
    const char *pass = BENCH_PASS_NAMES[c->pass];
    /* a configuration whose clear forward did not finish (out of memory)
     * does not try its forward + backward, which needs more */
    static const char *clear_forward_failed;
    if (!c->clear || opt->quick)
        return 0;
    if (!runs_clear(c, opt)) {
        bench_note(table, "%-30s %-8s %-6s %7d   skipped: its weights alone are %.1f GB%s", c->label,
                   pass, "clear", 1, weight_bytes / 1e9,
                   weight_bytes > CLEAR_MAX_WEIGHT_BYTES
                       ? ", more than the 2 GB this bench allows"
                       : " and one pass takes minutes (--clear-max runs it)");
        return 0;
    }
    if (c->pass != BENCH_FORWARD && clear_forward_failed && strcmp(clear_forward_failed, c->label) == 0) {
        bench_note(table, "%-30s %-8s %-6s %7d   skipped: the clear forward did not finish",
                   c->label, pass, "clear", 1);
        return 0;
    }
    const BenchResult r = measure(c, false, 1, opt);
    bench_add(table, c->label, pass, "clear", 1, bench_flops(c), r);
    if (r.status != 0 && c->pass == BENCH_FORWARD)
        clear_forward_failed = c->label;
    return r.status;
}

/* Every line of one configuration: its note, the clear one (or why not),
 * then fast on 1 and N threads. Returns 0, or the status of the first line
 * whose child process failed (it said why on stderr). */
static int run_config(BenchTable *table, const BenchConfig *c, const Options *opt)
{
    if (c->note != NULL)
        bench_note(table, "%s", c->note);
    int status = run_clear(table, c, opt);
    for (int threads = c->one_thread ? 1 : opt->threads; threads <= opt->threads;
         threads += opt->threads - 1) {
        const BenchResult r = measure(c, true, threads, opt);
        bench_add(table, c->label, BENCH_PASS_NAMES[c->pass], "fast", threads, bench_flops(c), r);
        if (status == 0)
            status = r.status;
    }
    return status;
}

static void print_introduction(void)
{
    printf("Multi-head attention, clear (the chapters' code, one thread) against fast\n"
           "(register-tile matmul, streaming attention, heads shared by threads).\n"
           "Self-attention on random inputs, evaluation mode, float32. Each line runs\n"
           "in its own process: ms is the median of `runs` passes after a warm-up,\n"
           "best ms the fastest of them (one pass over 5 s is timed once, without\n"
           "warm-up), peak memory is that process's largest resident size. Timings\n"
           "move with whatever else runs on the machine, and only ever up: GFLOP/s\n"
           "and %% peak are the best run's, against the best of the peak's runs;\n"
           "ratios are of medians (causal's also of best runs). The GFLOP/s count\n"
           "FLOPs = 4*B*n*D*D*2 + 2*B*n*n*D*2 for the forward, 3 times that for\n"
           "fwd+bwd (forward and backward), and for attention alone on the heads\n"
           "2*B*n*n*D*2 (attn fwd), 3 times that (attn f+b), twice (attn bwd); a\n"
           "causal line counts (n + 1) / 2n of those.\n\n"
           "Running the lines; the table follows when they and a second measurement\n"
           "of the peak are done.\n\n");
}

#define LAYER(B, n, D, H, pass) "(" #B ", " #n ", " #D ", " #H ")", B, n, n, D, H, pass
static const char ALONE_NOTE[] = "-- the streaming path alone: the clear layer's weights "
                                 "would take 8.6 GB and more --";
static const char CAUSAL_NOTE[] = "-- attention alone on the heads, full, then causal "
                                  "(valid_lens_causal) --";
static const BenchConfig CONFIGS[] = {
    {"d2l toy (2, 4 q, 6 kv, 100, 5)", 2, 4, 6, 100, 5, BENCH_FORWARD, true, true, true, false, NULL},
    {"d2l toy (2, 4 q, 6 kv, 100, 5)", 2, 4, 6, 100, 5, BENCH_FORWARD_BACKWARD, true, true, true, false,
     NULL},
    {LAYER(8, 512, 512, 8, BENCH_FORWARD), true, true, false, false, NULL},
    {LAYER(8, 512, 512, 8, BENCH_FORWARD_BACKWARD), true, true, false, false, NULL},
    {LAYER(1, 2048, 512, 8, BENCH_FORWARD), true, true, false, false, NULL},
    {LAYER(1, 8192, 512, 8, BENCH_FORWARD), true, true, false, false, NULL},
    {LAYER(1, 8192, 512, 8, BENCH_ATTENTION_BACKWARD), true, false, false, false, NULL},
    {LAYER(1, 2048, 512, 8, BENCH_ATTENTION_FORWARD), false, true, false, false, CAUSAL_NOTE},
    {"(1, 2048, 512, 8) causal", 1, 2048, 2048, 512, 8, BENCH_ATTENTION_FORWARD, false, true, false,
     true, NULL},
    {LAYER(1, 2048, 512, 8, BENCH_ATTENTION_FB), false, true, false, false, NULL},
    {"(1, 2048, 512, 8) causal", 1, 2048, 2048, 512, 8, BENCH_ATTENTION_FB, false, true, false, true,
     NULL},
    {LAYER(1, 16384, 512, 8, BENCH_FORWARD), false, false, false, false, ALONE_NOTE},
    {LAYER(1, 32768, 512, 8, BENCH_FORWARD), false, false, false, false, NULL},
};

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    const BenchConfig *list = CONFIGS;
    int count = (int)(sizeof CONFIGS / sizeof CONFIGS[0]);
    if (opt.config_text != NULL) {
        list = opt.custom;
        count = 6;
    } else if (opt.quick) {
        count = 4;
    }
    int status = check_memory(list, count, &opt);
    if (status != 0)
        return status;
    print_introduction();

    // the peak before and after the lines, the larger kept; the table waits for both
    BenchPeak peak = {opt.threads, 0.0, 0.0};
    bench_peak_measure(&peak);
    static BenchTable table;
    for (int i = 0; i < count; i++) {   /* a line whose child failed: its status */
        const int line_status = run_config(&table, &list[i], &opt);
        status = status != 0 ? status : line_status;
    }
    bench_peak_measure(&peak);

    bench_peak_print(&peak);
    const int overflowed = bench_table_print(&table, &peak);
    print_ratios(&table, list, count, &opt);
    print_causal_ratios(&table, list, count, &opt);
    /* a child that died said why on stderr itself; an overflow is said here */
    if (overflowed > 0 && status == 0)
        status = fail("%d %s overflowed float32 (see the table): use a smaller --scale",
                      overflowed, plural(overflowed, "line", "lines"));
    return status;
}
