/*
 * training_run.c - a training run's plumbing: going on, saving, progress,
 * divergence, signals, plots and --bench (chapter 05's optional section
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
#include "fast/fast_attention_layer.h"
#include "heads.h"
#include "io/cli.h"
#include "io/plot.h"
#include "io/fileset.h"
#include "io/npy.h"
#include "run/saved_models.h"
#include "random.h"

enum { PROGRESS_LINES = 10 };

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void train_check_options(const TrainOptions *opt)
{
    const char *prog = opt->prog;
    if (opt->countries < opt->pairs)
        cli_fail(prog, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt->countries, opt->pairs, opt->pairs);
    cli_require_heads_split(prog, opt->hiddens, opt->heads, "--hiddens", "--heads");
    if (opt->from_dir)
        cli_check_input_dir(prog, "--from", opt->from_dir);
    if (opt->from_dir && opt->sizes_given)
        cli_fail(prog, "--from takes the model's sizes from DIR: drop --countries, --hiddens "
                 "and --heads");
    if (opt->from_dir && opt->steps_given && opt->training_given)
        cli_fail(prog, "--from with --steps goes on with the seed, batch, pairs and learning "
                 "rate saved in DIR: drop --seed, --batch, --pairs and --lr");
    if (opt->from_dir && opt->to_dir && !opt->steps_given)
        cli_fail(prog, "--from and --to together would only copy the model: add --steps N to "
                 "train it on up to step N");
    if (opt->from_dir && opt->bench)
        cli_fail(prog, "--bench times training a new model: drop --from");
}

/* ---- going on from a saved run -------------------------------------------------- */

/* The sizes train can run, for a model read from a directory. Going on
 * training, the pairs are the saved ones (checked against the model's
 * countries as the training state is read), not --pairs' default. */
static LookupLimits limits_of(const TrainOptions *opt)
{
    return (LookupLimits){.min_vocab = opt->steps_given ? 2 : opt->pairs,
                          .max_vocab = TASK_MAX_COUNTRIES,
                          .max_hiddens = TRAIN_MAX_HIDDENS, .max_heads = TRAIN_MAX_PAIRS,
                          .max_batch = TRAIN_MAX_BATCH, .max_pairs = TRAIN_MAX_PAIRS};
}

LookupModel *train_load_model(TrainOptions *opt)
{
    char err[MODEL_ERR_LEN];
    const LookupLimits limits = limits_of(opt);
    LookupModel *model = lookup_load_new(opt->from_dir, &limits, err, sizeof err);
    if (model == NULL)
        die(NULL, "%s", err);
    opt->countries = model->key_vocab;
    opt->hiddens = model->num_hiddens;
    opt->heads = model->num_heads;
    return model;
}

Adam *train_load_state(LookupModel *model, TrainOptions *opt)
{
    char err[MODEL_ERR_LEN], *path = npy_path(opt->from_dir, "optimizer.step");
    const bool has_state = access(path, F_OK) == 0;
    free(path);
    if (!has_state) {
        lookup_free(model);
        die(NULL, "%s holds a model without its training state (no optimizer.step.npy): "
            "--from it without --steps evaluates it", opt->from_dir);
    }
    const LookupLimits limits = limits_of(opt);
    LookupTraining training;
    Adam *adam = lookup_load_training_new(model, opt->from_dir, &limits, &training, err,
                                          sizeof err);
    if (adam == NULL) {
        lookup_free(model);
        die(NULL, "%s", err);
    }
    if (adam->step >= opt->steps)
        cli_fail(opt->prog, "--steps %d: the model in %s has taken %ld steps already; ask for "
                 "more to go on training it", opt->steps, opt->from_dir, adam->step);
    opt->seed = training.seed;
    opt->batch = training.batch_size;
    opt->pairs = training.num_pairs;
    opt->lr = adam->lr;
    return adam;
}

void train_check_memory(const TrainOptions *opt)
{
    char detail[96];
    snprintf(detail, sizeof detail, "%d held-out examples or batches of %d, of %d pairs, "
             "num_hiddens %d", opt->examples, opt->batch, opt->pairs, opt->hiddens);
    memory_require(lookup_bytes_needed(opt->countries, opt->pairs, opt->hiddens, opt->heads,
                                       opt->batch, opt->examples),
                   detail, "use fewer --examples, a smaller --batch or --hiddens");
}

/* ---- the progress line ---------------------------------------------------------- */

TrainLog train_log_start(int steps, int batch_size)
{
    TrainLog log = {.steps = steps, .batch_size = batch_size,
                    .terminal = isatty(STDOUT_FILENO), .start = now_seconds()};
    log.every = steps / PROGRESS_LINES > 0 ? steps / PROGRESS_LINES : 1;
    log.window = log.terminal && log.every > 10 ? 10 : log.every;   /* steps a line averages */
    return log;
}

void train_log_step(TrainLog *log, int step, double loss, int correct)
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

void train_log_end(const TrainLog *log, long taken)
{
    const double seconds = now_seconds() - log->start;
    printf("  (%ld steps in %.2f s, %.0f steps/s)\n\n", taken, seconds, (double)taken / seconds);
}

/* ---- divergence and signals ------------------------------------------------------ */

/* Two copies of the parameters and of Adam's moments: a few memcpy per step. */
struct TrainGuard {
    Adam *adam;
    const TrainOptions *opt;
    AdamSnapshot *good, *before;   /* the last state known good; the one before this step */
};

TrainGuard *train_guard_new(Adam *adam, const TrainOptions *opt)
{
    TrainGuard *guard = checked_malloc("train_guard_new", 1, sizeof *guard);
    *guard = (TrainGuard){adam, opt, adam_snapshot_new(adam), adam_snapshot_new(adam)};
    signals_note(true);   /* SIGINT, SIGTERM, SIGHUP: finish the step, then stop */
    return guard;
}

void train_guard_keep(TrainGuard *guard)
{
    adam_snapshot_take(guard->before, guard->adam);
}

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
 * kept is the model after step `kept`. */
static void report_divergence(const TrainOptions *opt, double loss, bool by_update,
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
    if (opt->to_dir)
        report_error(opt->prog, "%s; --to keeps the model after step %ld, the last good one; "
                     "try a smaller --lr", what, kept);
    else
        report_error(opt->prog, "%s; try a smaller --lr", what);
}

bool train_guard_diverged(TrainGuard *guard, double loss, bool after_update)
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
        return false;
    }
    const long step = adam->step;
    /* a finite loss of this step: the state before it was good */
    const bool by_update = after_update || loss_finite;
    adam_snapshot_restore(loss_finite && !after_update ? guard->before : guard->good, adam);
    report_divergence(guard->opt, loss, by_update, moments, step, adam->step);
    return true;
}

void train_guard_free(TrainGuard *guard)
{
    signals_note(false);   /* from here a signal ends the program (after a save) */
    if (guard == NULL)
        return;
    adam_snapshot_free(guard->good);
    adam_snapshot_free(guard->before);
    free(guard);
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
        die("save_vocabulary", "out of memory");
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
                      const TrainOptions *opt)
{
    char err[MODEL_ERR_LEN];
    const LookupTraining training = {opt->batch, opt->pairs, opt->seed};
    FileSet *set = fileset_begin(opt->to_dir, err, sizeof err);   /* the model's save joins it */
    int status = set == NULL ? -1 : save_vocabulary(set, task, err, sizeof err);
    if (status == 0)
        status = lookup_save_training(model, adam, &training, opt->to_dir, err, sizeof err);
    if (set != NULL)
        status = fileset_end(set, status, err, sizeof err);
    if (status != 0)
        report_error(opt->prog, "%s", err);
    return status != 0;
}

int train_finish(const LookupModel *model, const Adam *adam, const Task *task,
                 const TrainOptions *opt, bool diverged)
{
    const int status = opt->to_dir ? save_model(model, adam, task, opt) : 0;
    const int stop_signal = signals_caught();
    if (status == 0 && opt->to_dir && !diverged && !stop_signal)
        printf("saved the model in %s/ (PyTorch's parameter names; "
               "tests/fixtures/make_train_fixtures.py --check %s loads it)\n\n",
               opt->to_dir, opt->to_dir);
    if (diverged)
        return 1;
    if (stop_signal) {
        const bool saved = opt->to_dir && status == 0;
        report_error(opt->prog, "stopped by %s after step %ld%s%s%s", signal_name(stop_signal),
                     adam->step, saved ? "; the model is saved in " : "",
                     saved ? opt->to_dir : "", saved ? "/, --from it with --steps N goes on" : "");
        return 128 + stop_signal;
    }
    return status;
}

/* ---- --plot ---------------------------------------------------------------------- */

int train_write_plots(const TrainOptions *opt, const Task *task, const TaskBatch *heldout,
                      int asked, const Tensor *weights, const LossCurve *curve)
{
    const char *dir = opt->plot_dir;
    char title[96];
    snprintf(title, sizeof title, "query %s: entry %d holds its key",
             task->key_words[heldout->queries[0]], asked);
    const char *titles[1] = {title};
    char err[512];
    FileSet *plots = fileset_begin(dir, err, sizeof err);   /* both plots, one set */
    if (plots == NULL)
        return report_failure(opt->prog, "%s", err);
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
        status = report_error(opt->prog, "%s", err);
    if (status == 0)
        printf("\nwrote %s/train_attention.{dat,gp}%s (render: make plots, or gnuplot each "
               ".gp)\n", dir, steps > 0 ? " and train_loss.{dat,gp}" : "");
    return status != 0;
}

/* ---- --bench ----------------------------------------------------------------------- */

/* where tests/fixtures/time_pytorch_multihead.py --training writes PyTorch's
 * training speed, for --bench */
#define PYTORCH_TRAINING "build/pytorch_training.txt"

/* A size of the model, as --bench times it. */
typedef struct {
    int batch, pairs, hiddens, heads;
} BenchSize;

/* Training steps per second of a new model of size s running attend, on
 * one batch drawn beforehand, so that the step alone is timed (as the
 * PyTorch reference does). */
static double steps_per_second(BenchSize s, AttentionLayer attend, const TrainOptions *opt)
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

int train_bench(const TrainOptions *opt)
{
    const int N = opt->threads > 1 ? opt->threads : 2;
    const BenchSize sizes[2] = {{opt->batch, opt->pairs, opt->hiddens, opt->heads},
                                {256, 16, 256, 8}};
    bool any_pytorch = false;
    printf("%s --bench: training steps/s of this model (embedding, attention, readout, loss, "
           "Adam), one run\n  batch  pairs  num_hiddens  heads     clear   fast 1t   fast %dt"
           "   PyTorch best  fast %dt / PyTorch\n", opt->prog, N, N);
    for (int i = 0; i < 2; i++) {
        const BenchSize s = sizes[i];
        if (s.pairs > opt->countries || !heads_split(s.hiddens, s.heads, NULL, NULL, NULL, 0))
            continue;
        const double clear = steps_per_second(s, CLEAR_ATTENTION, opt);
        const double fast1 = steps_per_second(s, fast_attention_layer(1), opt);
        const double fastN = steps_per_second(s, fast_attention_layer(N), opt);
        const double pytorch = pytorch_steps_per_second(s);
        printf("  %5d  %5d  %11d  %5d  %8.1f  %8.1f  %8.1f", s.batch, s.pairs, s.hiddens,
               s.heads, clear, fast1, fastN);
        if (pytorch > 0.0)
            printf("   %12.1f  %16.2fx\n", pytorch, fastN / pytorch);
        else
            printf("   %12s  %17s\n", "-", "-");
        any_pytorch = any_pytorch || pytorch > 0.0;
    }
    printf("  (fast 1t, %dt: the fast layer on 1 and %d threads; PyTorch best: its best of 1 "
           "and 2 threads)\n", N, N);
    if (!any_pytorch)
        printf("PyTorch's figures come from %s: time PyTorch first, not while the bench runs:\n"
               "  /usr/bin/python3 tests/fixtures/time_pytorch_multihead.py --training\n",
               PYTORCH_TRAINING);
    return 0;
}
