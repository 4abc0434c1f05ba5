/*
 * training_run.c - a training run's plumbing: going on, progress,
 * divergence, signals, saving and plots (chapter 05's optional section
 * "Attention that learns"). See training_run.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "run/training_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "io/cli.h"
#include "io/plot.h"
#include "io/fileset.h"
#include "io/npy.h"
#include "memory.h"
#include "random.h"

enum { PROGRESS_LINES = 10 };

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- going on from a saved run -------------------------------------------------- */

/* The sizes train can run, for a model read from a directory. */
static LookupLimits limits_of(int min_vocab)
{
    return (LookupLimits){.min_vocab = min_vocab, .max_vocab = TASK_MAX_COUNTRIES,
                          .max_hiddens = TRAIN_MAX_HIDDENS, .max_heads = TRAIN_MAX_PAIRS,
                          .max_batch = TRAIN_MAX_BATCH, .max_pairs = TRAIN_MAX_PAIRS};
}

int train_load_model(const char *dir, int min_vocab, LookupModel **model)
{
    char err[MODEL_ERR_LEN];
    const LookupLimits limits = limits_of(min_vocab);
    *model = lookup_load_new(dir, &limits, err, sizeof err);
    return *model != NULL ? 0 : fail("%s", err);
}

int train_load_state(const char *prog, LookupModel *model, const char *dir, int steps,
                     LookupTraining *training, Adam **adam)
{
    char err[MODEL_ERR_LEN], *path = npy_path(dir, "optimizer.step");
    const bool has_state = access(path, F_OK) == 0;
    free(path);
    *adam = NULL;
    if (!has_state)
        return fail("%s holds a model without its training state (no optimizer.step.npy): "
                    "--from it without --steps evaluates it", dir);
    /* going on, the pairs are the saved ones, checked against the model's
     * countries as the state is read */
    const LookupLimits limits = limits_of(2);
    *adam = lookup_load_training_new(model, dir, &limits, training, err, sizeof err);
    if (*adam == NULL)
        return fail("%s", err);
    if ((*adam)->step >= steps)
        cli_fail(prog, "--steps %d: the model in %s has taken %ld steps already; ask for "
                 "more to go on training it", steps, dir, (*adam)->step);
    return 0;
}

/* ---- the progress line ---------------------------------------------------------- */

/* The progress line (train_watch's). */
typedef struct {
    int steps, every, window, batch_size;
    bool terminal;
    double loss, correct, start;   /* summed over the window; the start, in seconds */
} TrainLog;

static TrainLog train_log_start(int steps, int batch_size)
{
    TrainLog log = {.steps = steps, .batch_size = batch_size,
                    .terminal = isatty(STDOUT_FILENO), .start = now_seconds()};
    log.every = steps / PROGRESS_LINES > 0 ? steps / PROGRESS_LINES : 1;
    log.window = log.terminal && log.every > 10 ? 10 : log.every;   /* steps a line averages */
    return log;
}

static void train_log_step(TrainLog *log, int step, double loss, int correct)
{
    log->loss += loss;
    log->correct += correct;
    if (step % log->window != 0 && step != log->steps)
        return;
    const int n = step % log->window == 0 ? log->window : step % log->window;
    const double mean_loss = log->loss / n, accuracy = log->correct / ((double)n * log->batch_size);
    log->loss = log->correct = 0.0;
    if (log->terminal) {
        printf("\r  step %5d/%d  loss %.4f  training accuracy %5.1f%%", step, log->steps,
               mean_loss, 100.0 * accuracy);
        if (step == log->steps)
            printf("\n");
        fflush(stdout);
    } else if (step % log->every == 0 || step == log->steps) {
        printf("  step %5d/%d  loss %.4f  training accuracy %5.1f%%\n", step, log->steps,
               mean_loss, 100.0 * accuracy);
    }
}

static void train_log_end(const TrainLog *log, long taken)
{
    const double seconds = now_seconds() - log->start;
    printf("  (%ld steps in %.2f s, %.0f steps/s)\n\n", taken, seconds, (double)taken / seconds);
}

/* ---- divergence and signals ------------------------------------------------------ */

/* Two copies of the parameters and of Adam's moments: a few memcpy per step. */
typedef struct {
    Adam *adam;
    const TrainRun *run;
    AdamSnapshot *good, *before;   /* the last state known good; the one before this step */
} TrainGuard;

/* Adam's moments all numbers: a square of a huge gradient overflows to
 * inf long before the parameters do, and would then be saved. */
static bool moments_finite(const Adam *adam)
{
    for (int i = 0; i < adam->count; i++)
        if (tensor_first_non_finite(adam->m[i]) != SIZE_MAX ||
            tensor_first_non_finite(adam->v[i]) != SIZE_MAX)
            return false;
    return true;
}

/* The loss of step s was not a number; or, by_update, its update made a
 * parameter one (loss finite; or, moments, one of Adam's moments) or made
 * the loss one (loss not finite: the parameters overflow in the forward);
 * kept is the model after step `kept`. Returns fail's exit status. */
static int report_divergence(const TrainRun *run, double loss, bool by_update,
                              bool moments, long step, long kept)
{
    char what[96];
    const char *kind = isnan(loss) ? "NaN" : "infinite";
    if (by_update && isfinite(loss) && moments)
        snprintf(what, sizeof what, "the update of step %ld made Adam's moments overflow", step);
    else if (by_update && isfinite(loss))
        snprintf(what, sizeof what, "the update of step %ld made a parameter NaN or infinite",
                 step);
    else if (by_update)
        snprintf(what, sizeof what, "the update of step %ld made the loss %s", step, kind);
    else
        snprintf(what, sizeof what, "the loss is %s at step %ld", kind, step);
    if (run->to_dir)
        return fail("%s; --to keeps the model after step %ld, the last good one; try a "
                    "smaller --lr", what, kept);
    return fail("%s; try a smaller --lr", what);
}

/* 0 while the run is good; the exit status, after its line, once it diverged
 * (adam back at the last good state). */
static int train_guard_status(TrainGuard *guard, double loss, bool after_update)
{
    Adam *adam = guard->adam;
    const bool loss_finite = isfinite(loss);
    const bool moments = !after_update && !moments_finite(adam);
    if (loss_finite && !moments &&
        (after_update || parameters_finite(adam->params, adam->count))) {
        if (!after_update) {   /* the state before this step was good */
            AdamSnapshot *swap = guard->good;
            guard->good = guard->before;
            guard->before = swap;
        }
        return 0;
    }
    const long step = adam->step;
    /* a finite loss of this step: the state before it was good */
    const bool by_update = after_update || loss_finite;
    adam_snapshot_restore(loss_finite && !after_update ? guard->before : guard->good, adam);
    return report_divergence(guard->run, loss, by_update, moments, step, adam->step);
}

/* ---- the watch over the loop ------------------------------------------------------ */

struct TrainWatch {
    TrainLog log;
    TrainGuard guard;
    LossCurve *curve;
    int status;   /* 0, or the exit status once the loss diverged */
};

TrainWatch *train_watch_new(Adam *adam, const TrainRun *run, int last_step, LossCurve *curve)
{
    TrainWatch *w = checked_malloc(1, sizeof *w);
    *w = (TrainWatch){.log = train_log_start(last_step, run->training.batch_size),
                      .guard = {adam, run, adam_snapshot_new(adam), adam_snapshot_new(adam)},
                      .curve = curve};
    signals_note(true);   /* SIGINT, SIGTERM, SIGHUP: finish the step, then stop */
    return w;
}

/* a signal stops the run before a step; the state before it is kept */
static bool before_step(void *state, int step)
{
    (void)step;
    TrainWatch *w = state;
    if (signals_caught())
        return false;
    adam_snapshot_take(w->guard.before, w->guard.adam);
    return true;
}

static TrainingStatus after_step(void *state, int step, double loss, int correct)
{
    TrainWatch *w = state;
    if ((w->status = train_guard_status(&w->guard, loss, false)) != 0)
        return TRAINING_DIVERGED;
    w->curve->losses[w->curve->count++] = (float)loss;
    train_log_step(&w->log, step, loss, correct);
    return TRAINING_GOES_ON;
}

static bool after_last(void *state, double loss)
{
    TrainWatch *w = state;
    w->status = train_guard_status(&w->guard, loss, true);
    return w->status == 0;
}

TrainingWatch train_watch(TrainWatch *watch)
{
    return (TrainingWatch){watch, before_step, after_step, after_last};
}

int train_watch_end(TrainWatch *w)
{
    signals_note(false);   /* from here a signal ends the program (after a save) */
    const int status = w->status;
    if (status == 0 && !signals_caught())
        train_log_end(&w->log, w->curve->count);
    adam_snapshot_free(w->guard.good);
    adam_snapshot_free(w->guard.before);
    free(w);
    return status;
}

/* ---- saving ------------------------------------------------------------------------ */

/* words (count of them) as a JSON list, "[\"Qatar\", ...]", onto f. */
static void json_words(FILE *f, const char *const *words, int count)
{
    fputc('[', f);
    for (int i = 0; i < count; i++) {
        fputs(i ? ", \"" : "\"", f);
        for (const char *c = words[i]; *c; c++)
            fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        fputc('"', f);
    }
    fputc(']', f);
}

/* vocabulary.json: the words of the ids, in id order, so that Python can
 * decode the model's answers without reading C:
 *     words = json.load(open("DIR/vocabulary.json"))
 *     words["capitals"][logits.argmax()] */
static int save_vocabulary(FileSet *set, const Task *task, char *err, size_t err_len)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        die("out of memory");
    fputs("{\"countries\": ", f);
    json_words(f, task->key_words, task->key_vocab);
    fputs(",\n \"capitals\": ", f);
    json_words(f, task->value_words, task->value_vocab);
    fputs("}\n", f);
    fclose(f);
    const int status = fileset_write(set, "vocabulary.json", text, len, err, err_len);
    free(text);
    return status;
}

/* --to: the model with Adam's state and the vocabulary, as one set. */
static int save_model(const LookupModel *model, const Adam *adam, const Task *task,
                      const TrainRun *run)
{
    char err[MODEL_ERR_LEN];
    FileSet *set = fileset_begin(run->to_dir, err, sizeof err);   /* the model's save joins it */
    int status = set == NULL ? -1 : save_vocabulary(set, task, err, sizeof err);
    if (status == 0)
        status = lookup_save_training(model, adam, &run->training, run->to_dir, err, sizeof err);
    if (set != NULL)
        status = fileset_end(set, status, err, sizeof err);
    return status == 0 ? 0 : fail("%s", err);
}

int train_finish(const LookupModel *model, const Adam *adam, const Task *task,
                 const TrainRun *run, int watch_status)
{
    const int status = run->to_dir ? save_model(model, adam, task, run) : 0;
    const int stop_signal = signals_caught();
    if (status == 0 && run->to_dir && watch_status == 0 && !stop_signal)
        printf("saved the model in %s/ (PyTorch's parameter names; "
               "tests/fixtures/make_train_fixtures.py --check %s loads it)\n\n",
               run->to_dir, run->to_dir);
    if (watch_status != 0)
        return watch_status;
    if (stop_signal) {
        const bool saved = run->to_dir && status == 0;
        fail("stopped by %s after step %ld%s%s%s", signal_name(stop_signal), adam->step,
             saved ? "; the model is saved in " : "", saved ? run->to_dir : "",
             saved ? "/, --from it with --steps N goes on" : "");
        return 128 + stop_signal;
    }
    return status;
}

/* ---- --plot ---------------------------------------------------------------------- */

int train_write_plots(const TrainRun *run, const Task *task, const TaskBatch *heldout,
                      int asked, const Tensor *weights, const LossCurve *curve)
{
    const char *dir = run->plot_dir;
    char title[96];
    snprintf(title, sizeof title, "query %s: entry %d holds its key",
             task->key_words[heldout->queries[0]], asked);
    const char *titles[1] = {title};
    char err[512];
    FileSet *plots = fileset_begin(dir, err, sizeof err);   /* both plots, one set */
    if (plots == NULL)
        return fail("%s", err);
    int status = plot_heatmaps(dir, "train_attention", weights, "entry", "head", titles);
    const int steps = curve->count;
    if (status == 0 && steps > 0) {   /* one fault, one line: the first stops the rest */
        Tensor *xs = tensor_arange(SHAPE(steps));
        for (int i = 0; i < steps; i++)
            xs->data[i] += (float)curve->first;
        Tensor *ys = tensor_from(curve->losses, SHAPE(steps));
        /* a log scale shows the late steps, unless a loss rounded to 0 */
        bool all_positive = true;
        for (int i = 0; i < steps; i++)
            all_positive = all_positive && curve->losses[i] > 0.0f;
        status = plot_curves(dir, "train_loss", xs, ys, "step", "cross-entropy loss", NULL,
                             all_positive);
        TENSOR_FREE(xs, ys);
    }
    /* after a failed plot its line is out, and the previous plots stay */
    if (fileset_end(plots, status, err, sizeof err) != 0 && status == 0)
        status = fail("%s", err);
    if (status == 0)
        printf("\nwrote %s/train_attention.{dat,gp}%s (render: make plots, or gnuplot each "
               ".gp)\n", dir, steps > 0 ? " and train_loss.{dat,gp}" : "");
    return status;
}
