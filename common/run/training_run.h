/*
 * training_run.h - what a training run of the dictionary model needs besides
 * its loop (05_multihead/train, chapter 05's optional section "Attention
 * that learns"): going on from a saved run, saving with Adam's state, the
 * progress line, stopping on a loss that is not a number or on a signal,
 * the loss curve and heatmap, and --bench.
 *
 * train.c keeps what a learner reads: the task, the loop {batch, step,
 * log}, the evaluation and the attention it shows. The loop calls the
 * guard below at each step:
 *
 *     TrainGuard *guard = train_guard_new(adam, opt);
 *     for (step = first; step <= opt->steps && !signals_caught(); step++) {
 *         draw the batch of step;
 *         train_guard_keep(guard);                      the state before
 *         loss = lookup_train_step(model, adam, batch);
 *         if (train_guard_diverged(guard, loss, false)) break;
 *         log;
 *     }
 *
 * Legend: P = entries of an example, D = num_hiddens, H = num_heads.
 */
#ifndef TRAINING_RUN_H
#define TRAINING_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "learn/lookup_model.h"
#include "learn/optim.h"
#include "io/plot.h"
#include "learn/tasks.h"
#include "tensor.h"

/* The ends of train's ranges: a model read with --from is held to them too. */
enum { TRAIN_MAX_BATCH = 4096, TRAIN_MAX_HIDDENS = 512, TRAIN_MAX_PAIRS = HEATMAP_TERMINAL_MAX,
       TRAIN_MAX_THREADS = 64 };

/* train's options (05_multihead/train.c parses them). */
typedef struct {
    const char *prog;
    uint64_t seed;
    int steps, batch, pairs, countries, hiddens, heads, examples;
    int threads;   /* 0: the clear layer; N: the fast layer on N threads */
    float lr;
    bool sizes_given, steps_given, training_given, bench;
    const char *to_dir, *from_dir, *plot_dir;
} TrainOptions;

/* The checks between options, after the table's own: one line, exit 2. */
void train_check_options(const TrainOptions *opt);

/* ---- going on from a saved run (--from DIR) ----------------------------------
 * The model, its sizes (countries, hiddens, heads) written into opt; a
 * directory that does not hold one stops with one line, exit 1. */
LookupModel *train_load_model(TrainOptions *opt);
/* --from DIR --steps N: Adam's state and what draws the batches (seed,
 * batch, pairs, lr), written into opt, so that training goes on from DIR's
 * step to the numbers an uninterrupted run reaches. One line and exit 1
 * (exit 2 when N is not past DIR's step) when it cannot. */
Adam *train_load_state(LookupModel *model, TrainOptions *opt);
/* Memory for the sizes asked for (or read from --from), before any work. */
void train_check_memory(const TrainOptions *opt);

/* ---- the loop's helpers --------------------------------------------------------
 * The progress line: in place on a terminal (the loss averaged over the
 * last 10 steps), 10 plain lines otherwise (a log, or a README quote). */
typedef struct {
    int steps, every, window, batch_size;
    bool terminal;
    double loss, correct, start;   /* summed over the window; the start, in seconds */
} TrainLog;

TrainLog train_log_start(int steps, int batch_size);
void train_log_step(TrainLog *log, int step, double loss, int correct);
/* "(N steps in 1.23 s, ...)": taken steps since train_log_start. */
void train_log_end(const TrainLog *log, long taken);

/* Divergence and signals. The state before each step is kept until the
 * step's loss, computed on it, turns out to be a number; a step whose
 * loss is not one, or whose update makes a parameter or one of Adam's
 * moments overflow (it would be saved), sends adam (and the model) back to
 * the last state known good, with one line naming the step. From new to
 * free, SIGINT, SIGTERM and SIGHUP are noted (signals_caught), so that the
 * loop finishes its step and the model is saved. */
typedef struct TrainGuard TrainGuard;

TrainGuard *train_guard_new(Adam *adam, const TrainOptions *opt);
void train_guard_keep(TrainGuard *guard);   /* before a step */
/* After a step, its loss (after_update false); or the loss the last
 * update's parameters give on the batch the next step would take
 * (after_update true), which a longer run computes as its next step's:
 * so whether a run diverges depends on the step, never on --steps. true
 * when the run must stop, adam back to the last good state. */
bool train_guard_diverged(TrainGuard *guard, double loss, bool after_update);
void train_guard_free(TrainGuard *guard);   /* NULL is fine; signals end the program again */

/* ---- after the loop ------------------------------------------------------------
 * --to: the model with Adam's state and vocabulary.json, as one set; then
 * the line for a signal that stopped training. Returns the exit status: 0,
 * 1 (diverged, or --to failed) or 128 + the signal. */
int train_finish(const LookupModel *model, const Adam *adam, const Task *task,
                 const TrainOptions *opt, bool diverged);

/* The losses of steps first, first + 1, ... (count of them). */
typedef struct {
    float *losses;
    int first, count;
} LossCurve;

/* --plot: the heatmap weights (H, P) of the query in heldout's example 0,
 * whose key entry `asked` holds, and the loss curve when count > 0, as one
 * set. 0, or 1 after one line. */
int train_write_plots(const TrainOptions *opt, const Task *task, const TaskBatch *heldout,
                      int asked, const Tensor *weights, const LossCurve *curve);

/* --bench: training steps per second at opt's sizes and at a large one,
 * through the clear layer and the fast one on 1 and N threads, beside
 * PyTorch's best when tests/fixtures/time_pytorch_multihead.py --training
 * has timed it on this machine. Every ratio is of figures from one run.
 * Returns 0. */
int train_bench(const TrainOptions *opt);

#endif
