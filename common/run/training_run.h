/*
 * training_run.h - what a training run of the dictionary model needs besides
 * its loop (05_multihead/train, chapter 05's optional section "Attention
 * that learns"): going on from a saved run, the watch over the loop (the
 * progress line; stopping on a loss that is not a number or on a signal),
 * saving with Adam's state, the loss curve and heatmap.
 *
 * train.c reads its options, loads or builds the model, and describes the
 * run (TrainRun); the loop (learn/training.h) runs it, watched by
 * train_watch; nothing here writes back into the program's options:
 *
 *     TrainWatch *watch = train_watch_new(adam, &run, last_step, &curve);
 *     const TrainingWatch watching = train_watch(watch);
 *     training_loop(&trainee, &plan, &watching);
 *     status = train_watch_end(watch);
 *
 * Legend: P = entries of an example, D = num_hiddens, H = num_heads.
 */
#ifndef TRAINING_RUN_H
#define TRAINING_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "learn/lookup_model.h"
#include "learn/optim.h"
#include "learn/training.h"
#include "io/plot.h"
#include "learn/tasks.h"
#include "run/saved_models.h"
#include "tensor.h"

/* The ends of train's ranges: a model read with --from is held to them too. */
enum { TRAIN_MAX_BATCH = 4096, TRAIN_MAX_HIDDENS = 512, TRAIN_MAX_PAIRS = HEATMAP_TERMINAL_MAX,
       TRAIN_MAX_THREADS = 64 };

/* A run of train, as the program describes it once its options are read
 * and its model is loaded or built. */
typedef struct {
    const char *to_dir, *plot_dir;   /* --to, --plot; NULL when not given */
    LookupTraining training;         /* what draws the batches: batch size, pairs, seed */
} TrainRun;

/* ---- going on from a saved run (--from DIR) ----------------------------------
 * *model: the model of the sizes DIR's files give, at least min_vocab
 * countries, the caller's to free; 0, or the exit status after one line
 * (*model NULL) when DIR does not hold one. */
int train_load_model(const char *dir, int min_vocab, LookupModel **model);
/* --from DIR --steps N: *adam, Adam's state, and what draws the batches
 * (into *training), so that training goes on from DIR's step to the
 * numbers an uninterrupted run reaches. 0, or the exit status after one
 * line (*adam NULL; model stays the caller's) when it cannot; exit 2 when
 * N is not past DIR's step. */
int train_load_state(const char *prog, LookupModel *model, const char *dir, int steps,
                     LookupTraining *training, Adam **adam);

/* The losses of steps first, first + 1, ... (count of them). */
typedef struct {
    float *losses;
    int first, count;
} LossCurve;

/* ---- the watch over the loop --------------------------------------------------
 * The progress line: in place on a terminal (the loss averaged over the
 * last 10 steps), 10 plain lines otherwise (a log, or a README quote);
 * each step's loss into curve->losses.
 * Divergence and signals. The state before each step is kept until the
 * step's loss, computed on it, turns out to be a number; a step whose
 * loss is not one, or whose update makes a parameter or one of Adam's
 * moments overflow (it would be saved), sends adam (and the model) back to
 * the last state known good, with one line naming the step. The loss the
 * last update's parameters give on the next step's batch is checked too,
 * so whether a run diverges depends on the step, never on --steps. From
 * new to end, SIGINT, SIGTERM and SIGHUP are noted (signals_caught), so
 * that the loop finishes its step and the model is saved. */
typedef struct TrainWatch TrainWatch;

TrainWatch *train_watch_new(Adam *adam, const TrainRun *run, int last_step, LossCurve *curve);
TrainingWatch train_watch(TrainWatch *watch);
/* Frees the watch; "(N steps in 1.23 s, ...)" when the run went to its end.
 * 0, or the exit status when the loss diverged (its line said so; adam is
 * back at the last good state). */
int train_watch_end(TrainWatch *watch);

/* ---- after the loop ------------------------------------------------------------
 * --to: the model with Adam's state and vocabulary.json, as one set; then
 * the line for a signal that stopped training. watch_status:
 * train_watch_end's. Returns the exit status: 0, 1 (diverged, or --to
 * failed) or 128 + the signal. */
int train_finish(const LookupModel *model, const Adam *adam, const Task *task,
                 const TrainRun *run, int watch_status);

/* --plot: the heatmap weights (H, P) of the query in heldout's example 0,
 * whose key entry `asked` holds, and the loss curve when count > 0, as one
 * set. 0, or 1 after one line. */
int train_write_plots(const TrainRun *run, const Task *task, const TaskBatch *heldout,
                      int asked, const Tensor *weights, const LossCurve *curve);

#endif
