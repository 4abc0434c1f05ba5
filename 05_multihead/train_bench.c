/*
 * train_bench - training steps per second of train's model, through the
 * clear layer and the fast one (chapter 05, optional section "Attention
 * that learns"; `make bench` runs it last).
 *
 * train's --bench as a tool of its own: train links this file and
 * `train --bench ...` calls train_bench_main in train's process (CLI_MODE
 * in common/io/cli.h); its lines then start with "train".
 *
 * Legend: B = batch_size, P = entries of an example, H = num_heads,
 * D = num_hiddens.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "attention_layer.h"
#include "error.h"
#include "fast/fast_attention_layer.h"
#include "heads.h"
#include "io/cli.h"
#include "learn/lookup_model.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "run/training_run.h"

/* where tests/fixtures/time_pytorch_multihead.py --training writes PyTorch's
 * training speed */
#define PYTORCH_TRAINING "build/pytorch_training.txt"

/* A size of the model, as the bench times it. */
typedef struct {
    int batch, pairs, hiddens, heads;
} BenchSize;

typedef struct {
    const char *prog;
    uint64_t seed;
    BenchSize asked;
    int countries, threads;
    float lr;
    bool bench;   /* train's flag: what this tool does */
} Options;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Training steps per second of a new model of size s running attend, on
 * one batch drawn beforehand, so that the step alone is timed (as the
 * PyTorch reference does). */
static double steps_per_second(BenchSize s, AttentionLayer attend, const Options *opt)
{
    const Task task = task_dictionary(s.pairs, opt->countries, opt->countries);
    Rng rng = rng_use(opt->seed, RNG_PARAMETERS);
    LookupModel *model = lookup_new(opt->countries, opt->countries, s.hiddens, s.heads, &rng);
    model->attend = attend;
    Adam *adam = adam_new(model->params, model->num_params, opt->lr);
    TaskBatch *batch = task_batch_new(&task, s.batch);
    Rng step_rng = rng_step(opt->seed, 1);   /* the batch of step 1 */
    task_draw(&task, batch, SPLIT_TRAIN, &step_rng);
    int steps = 0;
    double start = now_seconds(), elapsed;
    for (bool warm = false;; steps++) {   /* warm up for 0.5 s, then time for 2 s */
        lookup_train_step(model, adam, batch, NULL);
        elapsed = now_seconds() - start;
        if (!warm && elapsed >= 0.5) {
            warm = true;
            steps = -1;
            start = now_seconds();
        } else if (warm && elapsed >= 2.0) {
            break;
        }
    }
    task_batch_free(batch);
    adam_free(adam);
    lookup_free(model);
    return (steps + 1) / elapsed;
}

/* PyTorch's best steps per second at size s over the threads it was timed
 * on, read from PYTORCH_TRAINING (lines "batch pairs num_hiddens num_heads
 * threads steps_per_s"), or 0 when the file has no such line. */
static double pytorch_steps_per_second(BenchSize s)
{
    FILE *f = fopen(PYTORCH_TRAINING, "r");
    double best = 0.0, rate;
    char line[256];
    int b, p, d, h, threads;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "%d %d %d %d %d %lf", &b, &p, &d, &h, &threads, &rate) == 6 &&
            b == s.batch && p == s.pairs && d == s.hiddens && h == s.heads && rate > best)
            best = rate;
    if (f != NULL)
        fclose(f);
    return best;
}

/* One row of the table; true when PyTorch's figure was known. */
static bool bench_row(BenchSize s, int N, const Options *opt)
{
    const double clear = steps_per_second(s, CLEAR_ATTENTION, opt);
    const double fast1 = steps_per_second(s, fast_attention_layer(1), opt);
    const double fastN = steps_per_second(s, fast_attention_layer(N), opt);
    const double pytorch = pytorch_steps_per_second(s);
    printf("  %5d  %5d  %11d  %5d  %8.1f  %8.1f  %8.1f", s.batch, s.pairs, s.hiddens, s.heads,
           clear, fast1, fastN);
    if (pytorch > 0.0)
        printf("   %12.1f  %16.2fx\n", pytorch, fastN / pytorch);
    else
        printf("   %12s  %17s\n", "-", "-");
    return pytorch > 0.0;
}

/* Training steps per second at the asked size and at a large one, through
 * the clear layer and the fast one on 1 and N threads, beside PyTorch's
 * best when tests/fixtures/time_pytorch_multihead.py --training has timed
 * it on this machine. Every ratio is of figures from one run. */
static void bench(const Options *opt)
{
    const int N = opt->threads > 1 ? opt->threads : 2;
    const BenchSize sizes[2] = {opt->asked, {256, 16, 256, 8}};
    bool any_pytorch = false;
    printf("%s --bench: training steps/s of this model (embedding, attention, readout, loss, "
           "Adam), one run\n  batch  pairs  num_hiddens  heads     clear   fast 1t   fast %dt"
           "   PyTorch best  fast %dt / PyTorch\n", opt->prog, N, N);
    for (int i = 0; i < 2; i++)
        if (sizes[i].pairs <= opt->countries && heads_split(sizes[i].hiddens, sizes[i].heads, NULL, NULL, NULL, 0))
            any_pytorch = bench_row(sizes[i], N, opt) || any_pytorch;
    printf("  (fast 1t, %dt: the fast layer on 1 and %d threads; PyTorch best: its best of 1 "
           "and 2 threads)\n", N, N);
    if (!any_pytorch)
        printf("PyTorch's figures come from %s: time PyTorch first, not while the bench runs:\n"
               "  /usr/bin/python3 tests/fixtures/time_pytorch_multihead.py --training\n",
               PYTORCH_TRAINING);
}

static Options parse_options(int argc, char **argv, int *done)
{
    const DictionaryTraining d = DICTIONARY_TRAINING;
    Options opt = {.prog = program_name("train_bench"),
                   .asked = {d.batch_size, d.pairs, d.num_hiddens, d.num_heads},
                   .countries = d.countries, .lr = d.lr};
    BenchSize *s = &opt.asked;
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the parameters"},
        {"--batch", CLI_INT, &s->batch, .min = 1, .max = TRAIN_MAX_BATCH, .metavar = "B",
         .help = "examples per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1e30, .metavar = "X",
         .help = "Adam's learning rate"},
        {"--pairs", CLI_INT, &s->pairs, .min = 2, .max = TRAIN_MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary"},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "V", .help = "countries (and capitals), at least P"},
        {"--hiddens", CLI_INT, &s->hiddens, .min = 1, .max = TRAIN_MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &s->heads, .min = 1, .max = TRAIN_MAX_PAIRS, .metavar = "H",
         .help = "num_heads; must divide D", .splits = &s->hiddens},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = TRAIN_MAX_THREADS, .metavar = "N",
         .help = "the fast layer's threads beside 1", .default_text = "2"},
        {"--bench", CLI_FLAG, &opt.bench, .help = "what this tool does (train --bench runs it)"},
    };
    *done = cli_parse(&(CliTable){opt.prog, "Training steps per second of train's model at these sizes "
                                            "and at\n(batch 256, 16 pairs, num_hiddens 256, 8 heads), "
                                            "clear and fast (1 and N threads).",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    if (opt.countries < s->pairs)
        cli_fail(opt.prog, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt.countries, s->pairs, s->pairs);
    return opt;
}

/* The tool's entry: its own program's, and train's --bench. */
int train_bench_main(int argc, char **argv)
{
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    bench(&opt);
    return 0;
}

/* The tool as a program of its own; train links this file built with
 * -DTOOL_AS_MODE, without this main (see the Makefile). */
#ifndef TOOL_AS_MODE
int main(int argc, char **argv)
{
    return train_bench_main(argc, argv);
}
#endif
