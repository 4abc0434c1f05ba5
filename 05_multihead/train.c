/*
 * train - the dictionary, learned: a multi-head attention layer trained to
 * look a word up (chapter 05, optional section "Attention that learns").
 *
 * Part 1: the task, in words: a fresh dictionary in every example.
 * Part 2: the model, and training it with Adam (a progress line); a loss
 *         that stops being a number, or SIGINT / SIGTERM / SIGHUP, ends training
 *         with the last good model saved, and --from DIR --steps N goes on
 *         where a saved run stopped, to the same numbers.
 * Part 3: held-out accuracy, on examples never trained on.
 * Part 4: the learned attention of one example: the query's weight sits
 *         on the entry holding its key.
 *
 * Legend: B = batch_size, P = entries of an example, H = num_heads,
 * D = num_hiddens, V = words in each vocabulary.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/cli.h"
#include "io/fileset.h"
#include "io/curve.h"
#include "io/npy.h"
#include "io/plot.h"
#include "io/saved_models.h"
#include "fast/fast_attention_layer.h"
#include "learn/lookup_model.h"
#include "learn/loss.h"
#include "learn/tasks.h"
#include "platform.h"

static const char PROG[] = "train";

/* The generator streams (random.h): the parameters and the held-out
 * examples each have their own (tests/fixtures/make_train_fixtures.py draws
 * the held-out ones from the same stream), and each training step's batch
 * one of its own (rng_step), so that changing --steps leaves every batch
 * as it was. */
enum { MAX_PAIRS = HEATMAP_TERMINAL_MAX, MAX_BATCH = 4096, MAX_HIDDENS = 512, PROGRESS_LINES = 10,
       MAX_THREADS = 64 };

/* where tests/fixtures/time_pytorch_multihead.py --training writes PyTorch's
 * training speed, for --bench */
#define PYTORCH_TRAINING "build/pytorch_training.txt"

typedef struct {
    uint64_t seed;
    int steps, batch, pairs, countries, hiddens, heads, examples;
    int threads;   /* 0: the clear layer; N: the fast layer on N threads */
    float lr;
    bool sizes_given, steps_given, training_given, bench;
    const char *to_dir, *from_dir, *plot_dir;
} Options;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- Part 1 ------------------------------------------------------------------ */

/* Example b in words, wrapped after a comma past 84 columns, with its
 * answer when show_answer. */
static void print_example(const Task *task, const TaskBatch *batch, int b, bool show_answer)
{
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        die(PROG, "out of memory");
    task_print_example(f, task, batch, b);
    if (show_answer)
        fprintf(f, " -> %s", task->value_words[batch->answers[b]]);
    fclose(f);
    int column = 2;
    printf("  ");
    for (const char *word = text; *word;) {
        const char *end = strstr(word, ", ");
        const size_t n = end ? (size_t)(end - word) + 1 : strlen(word);   /* with its comma */
        if (column > 2 && column + 1 + (int)n > 84) {
            printf("\n   ");
            column = 3;
        } else if (word != text) {
            putchar(' ');
            column++;
        }
        printf("%.*s", (int)n, word);
        column += (int)n;
        word += n;
        while (*word == ' ')
            word++;
    }
    putchar('\n');
    free(text);
}

/* The batch of training step s (1, 2, ...). */
static void draw_step_batch(const Task *task, TaskBatch *batch, uint64_t seed, int step)
{
    Rng rng = rng_step(seed, (uint64_t)step);
    task_draw(task, batch, SPLIT_TRAIN, &rng);
}

static void part1_the_task(const Task *task, const Options *opt)
{
    printf("Part 1. The task: look a country up in a dictionary\n\n");
    printf("Each example is a fresh dictionary of %d countries, each paired with a capital\n"
           "at random, and a query naming one of the countries. The answer is the capital\n"
           "paired with it in this example; the pairing changes every time, so it cannot\n"
           "be memorised, only looked up. The first three examples of step 1:\n",
           task->num_pairs);
    TaskBatch *batch = task_batch_new(task, 3);   /* the draws of a batch of 3 begin any batch */
    draw_step_batch(task, batch, opt->seed, 1);
    for (int b = 0; b < 3; b++)
        print_example(task, batch, b, true);
    printf("Every possible example belongs to one of two halves, training or held-out\n"
           "(one bit of its fingerprint decides), so no held-out example is ever trained on.\n\n");
    task_batch_free(batch);
}

/* ---- Part 2 ------------------------------------------------------------------ */

static void describe_model(const LookupModel *model, const Options *opt)
{
    const int D = model->num_hiddens, H = model->num_heads, V = model->key_vocab;
    printf("  embed_keys (%d, %d): the query word and the entries' keys\n", V, D);
    printf("  embed_values (%d, %d): the entries' values\n", model->value_vocab, D);
    printf("  multi-head attention: %d heads of size %d, the query attending over the %d "
           "entries\n", H, D / H, opt->pairs);
    printf("  readout (%d, %d): a score for every capital; cross-entropy against the answer\n",
           model->value_vocab, D);
    printf("  %zu parameters\n", parameters_count(model->params, model->num_params));
    if (opt->threads > 0)
        printf("  the fast layer runs the attention, on %d thread%s\n", opt->threads,
               opt->threads > 1 ? "s" : "");
}

/* The progress line: in place on a terminal, PROGRESS_LINES plain lines
 * otherwise (a log, or a README quote). */
static void report_progress(int step, int steps, double mean_loss, double accuracy,
                            bool terminal)
{
    const int every = steps / PROGRESS_LINES > 0 ? steps / PROGRESS_LINES : 1;
    if (terminal) {
        printf("\r  step %5d/%d  loss %.4f  training accuracy %5.1f%%", step, steps, mean_loss,
               100.0 * accuracy);
        if (step == steps)
            printf("\n");
        fflush(stdout);
    } else if (step % every == 0 || step == steps) {
        printf("  step %5d/%d  loss %.4f  training accuracy %5.1f%%\n", step, steps, mean_loss,
               100.0 * accuracy);
    }
}

typedef enum { TRAINED, DIVERGED, STOPPED } TrainEnd;

/* The loss of step s was not a number; or, by_update, its update made a
 * parameter one (loss finite; or, moments, one of Adam's moments, which
 * would then be saved) or made the loss one (loss not finite: the
 * parameters overflow in the forward); kept is the model after step
 * `kept`. */
static void report_divergence(double loss, bool by_update, bool moments, int step, long kept,
                              const Options *opt)
{
    char what[96];
    const char *kind = isnan(loss) ? "NaN" : "infinite";
    if (by_update && isfinite(loss) && moments)
        snprintf(what, sizeof what, "the update of step %d made Adam's moments overflow", step);
    else if (by_update && isfinite(loss))
        snprintf(what, sizeof what, "the update of step %d made a parameter NaN or infinite",
                 step);
    else if (by_update)
        snprintf(what, sizeof what, "the update of step %d made the loss %s", step, kind);
    else
        snprintf(what, sizeof what, "the loss is %s at step %d", kind, step);
    fflush(stdout);
    if (opt->to_dir)
        fprintf(stderr, "%s: %s; --to keeps the model after step %ld, the last good one; try a "
                "smaller --lr\n", PROG, what, kept);
    else
        fprintf(stderr, "%s: %s; try a smaller --lr\n", PROG, what);
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

/* The state before each step is kept until the step's loss, computed on
 * it, turns out to be a number; good is then the last such state. Two
 * copies of the parameters and of Adam's moments: a few memcpy per step. */
typedef struct {
    AdamSnapshot *good, *before;
} Rollback;

/* From adam->step + 1 to opt->steps; losses (opt->steps - adam->step,)
 * receives each step's loss. On a loss that is not a number, adam (and
 * the model) go back to the last state whose loss was one. */
static TrainEnd train_steps(LookupModel *model, Adam *adam, const Task *task,
                            const Options *opt, float *losses)
{
    TaskBatch *batch = task_batch_new(task, opt->batch);
    const bool terminal = isatty(STDOUT_FILENO);
    const int every = opt->steps / PROGRESS_LINES > 0 ? opt->steps / PROGRESS_LINES : 1;
    const int window = terminal && every > 10 ? 10 : every;   /* steps the shown loss averages */
    const int first = (int)adam->step + 1;
    Rollback back = {adam_snapshot_new(adam), adam_snapshot_new(adam)};
    double window_loss = 0.0, window_correct = 0.0;
    TrainEnd end = TRAINED;
    const double start = now_seconds();
    signals_note(true);   /* SIGINT, SIGTERM, SIGHUP: finish the step, then stop */
    for (int step = first; step <= opt->steps && !signals_caught(); step++) {
        draw_step_batch(task, batch, opt->seed, step);
        adam_snapshot_take(back.before, adam);
        int correct;
        const double loss = lookup_train_step(model, adam, batch, &correct);
        const bool loss_finite = isfinite(loss);
        const bool moments = !moments_finite(adam);
        if (!loss_finite || moments || !parameters_finite(model->params, model->num_params)) {
            /* a finite loss: the state before this step was good */
            adam_snapshot_restore(loss_finite ? back.before : back.good, adam);
            report_divergence(loss, loss_finite, moments, step, adam->step, opt);
            end = DIVERGED;
            break;
        }
        AdamSnapshot *swap = back.good;   /* the state before this step was good */
        back.good = back.before;
        back.before = swap;
        losses[step - first] = (float)loss;
        window_loss += loss;
        window_correct += correct;
        if (step % window == 0 || step == opt->steps) {
            const int n = step % window == 0 ? window : step % window;
            report_progress(step, opt->steps, window_loss / n,
                            window_correct / ((double)n * opt->batch), terminal);
            window_loss = window_correct = 0.0;
        }
    }
    signals_note(false);   /* from here a signal ends the program (after a save) */
    const double seconds = now_seconds() - start;
    /* the last update has no loss of its own: the loss of its parameters
     * on the last batch says whether they still give numbers (an update
     * can leave every parameter finite and the forward overflowing) */
    const double after = end == TRAINED && adam->step >= first
                             ? lookup_evaluate(model, batch, NULL) : 0.0;
    if (!isfinite(after)) {
        const int last = (int)adam->step;
        adam_snapshot_restore(back.good, adam);
        report_divergence(after, true, false, last, adam->step, opt);
        end = DIVERGED;
    }
    if (end == TRAINED && !signals_caught())
        printf("  (%ld steps in %.2f s, %.0f steps/s)\n\n", adam->step - first + 1, seconds,
               (double)(adam->step - first + 1) / seconds);
    adam_snapshot_free(back.good);
    adam_snapshot_free(back.before);
    task_batch_free(batch);
    return end;
}

static TrainEnd part2_train(LookupModel *model, Adam *adam, const Task *task,
                            const Options *opt, float *losses)
{
    printf("Part 2. The model, trained\n\n");
    describe_model(model, opt);
    if (adam->step > 0)
        printf("  Adam, learning rate %g, batches of %d, steps %ld to %d (going on from "
               "%s):\n", (double)opt->lr, opt->batch, adam->step + 1, opt->steps,
               opt->from_dir);
    else
        printf("  Adam, learning rate %g, batches of %d, %d steps:\n", (double)opt->lr,
               opt->batch, opt->steps);
    return train_steps(model, adam, task, opt, losses);
}

/* ---- Part 3 ------------------------------------------------------------------ */

static TaskBatch *heldout_examples(const Task *task, const Options *opt)
{
    TaskBatch *heldout = task_batch_new(task, opt->examples);
    Rng rng = rng_use(opt->seed, RNG_HELDOUT);
    task_draw(task, heldout, SPLIT_HELDOUT, &rng);
    return heldout;
}

/* Returns 0, or 1 after one line on stderr when the loss is not a number:
 * a model (loaded, or trained on batches that never held the word whose
 * parameters overflowed) whose forward overflows float32 on these
 * examples. */
static int part3_heldout(const LookupModel *model, const Task *task, const TaskBatch *heldout)
{
    printf("Part 3. Held-out accuracy\n\n");
    int correct;
    const double loss = lookup_evaluate(model, heldout, &correct);
    if (!isfinite(loss)) {
        fflush(stdout);
        fprintf(stderr, "%s: the held-out loss is %s: the model's forward overflows float32 on "
                "these examples; train it again with a smaller --lr\n", PROG,
                isnan(loss) ? "NaN" : "infinite");
        return 1;
    }
    const int N = heldout->batch_size;
    printf("  %d examples never trained on: %d answered right, accuracy %.2f%%, loss %.4f\n",
           N, correct, 100.0 * correct / N, loss);
    printf("  (a guess among the example's capitals would be right 1 time in %d: %.1f%%)\n\n",
           task->num_pairs, 100.0 / task->num_pairs);
    return 0;
}

/* ---- Part 4 ------------------------------------------------------------------ */

/* The entry of example b whose key the query names. */
static int asked_entry(const TaskBatch *batch, int b)
{
    const int P = batch->num_pairs;
    int asked = 0;
    while (batch->keys[b * P + asked] != batch->queries[b])
        asked++;
    return asked;
}

/* Over the held-out examples, for each head: the mean weight it puts on
 * the entry whose key the query names, and the share of examples whose
 * largest weight falls there (the first largest, like argmax):
 * weights (N, H, 1, P) -> mean_weight (H,), largest_share (H,). */
static void weight_on_the_key(const Tensor *weights, const TaskBatch *heldout,
                              double *mean_weight, double *largest_share)
{
    const int N = weights->shape[0], H = weights->shape[1], P = weights->shape[3];
    for (int h = 0; h < H; h++)
        mean_weight[h] = largest_share[h] = 0.0;
    for (int b = 0; b < N; b++) {
        const int asked = asked_entry(heldout, b);
        for (int h = 0; h < H; h++) {
            const float *row = &AT4(weights, b, h, 0, 0);
            int best = 0;
            for (int j = 1; j < P; j++)
                if (row[j] > row[best])
                    best = j;
            mean_weight[h] += row[asked] / N;
            largest_share[h] += (best == asked) / (double)N;
        }
    }
}

/* Example 0 of the held-out set: its words, the heads' weights (H, P)
 * printed and drawn (new, for --plot). */
static Tensor *part4_attention(const LookupModel *model, const Task *task,
                               const TaskBatch *heldout)
{
    printf("Part 4. What the attention learned\n\n");
    const int H = model->num_heads, P = heldout->num_pairs;
    Tensor *weights;
    Tensor *logits = lookup_forward(model, heldout, &weights, NULL);
    const int answer = heldout->answers[0];
    int predicted = 0;
    for (int j = 1; j < model->value_vocab; j++)
        if (AT3(logits, 0, 0, j) > AT3(logits, 0, 0, predicted))
            predicted = j;
    printf("  held-out example 0:\n");
    print_example(task, heldout, 0, false);
    printf("  answer %s, the model says %s\n\n", task->value_words[answer],
           task->value_words[predicted]);
    printf("  entries:");
    for (int j = 0; j < P; j++)
        printf(" %d %s%s", j, task->key_words[heldout->keys[j]], j + 1 < P ? "," : "\n");

    Tensor *example = tensor_from(&AT4(weights, 0, 0, 0, 0), SHAPE(H, P));
    char title[128];
    snprintf(title, sizeof title, "  the weights of the query %s, one row per head (entries "
             "across):", task->key_words[heldout->queries[0]]);
    tensor_print_named("  weights", example);
    heatmap_terminal(stdout, example, title);

    /* the entry holding the query's key, and the heads whose largest
     * weight is on it */
    const int asked = asked_entry(heldout, 0);
    int on_key = 0;
    for (int h = 0; h < H; h++) {
        int best = 0;
        for (int j = 1; j < P; j++)
            if (AT2(example, h, j) > AT2(example, h, best))
                best = j;
        on_key += best == asked;
    }
    printf("  %d of the %d heads put their largest weight on entry %d, the one holding %s%s",
           on_key, H, asked, task->key_words[heldout->queries[0]],
           on_key == H ? ":\n  the query found its key.\n" : ".\n");

    double mean_weight[MAX_PAIRS], largest_share[MAX_PAIRS];
    weight_on_the_key(weights, heldout, mean_weight, largest_share);
    printf("\n  over all %d held-out examples, the entry holding the query's key:\n"
           "    head   has the head's largest weight   mean weight on it\n",
           heldout->batch_size);
    for (int h = 0; h < H; h++)
        printf("    %4d   %28.1f%%   %17.3f\n", h, 100.0 * largest_share[h], mean_weight[h]);
    tensor_free(weights);
    tensor_free(logits);
    return example;
}

/* ---- --plot, --to, --from, --bench ---------------------------------------------- */

/* losses (steps,) are those of steps first, first + 1, ... */
static int write_plots(const char *dir, const Task *task, const TaskBatch *heldout,
                       const Tensor *example, const float *losses, int first, int steps)
{
    char title[96];
    snprintf(title, sizeof title, "query %s: entry %d holds its key",
             task->key_words[heldout->queries[0]], asked_entry(heldout, 0));
    const char *titles[1] = {title};
    char err[512];
    FileSet *plots = fileset_begin(dir, err, sizeof err);   /* both plots, one set */
    if (plots == NULL)
        return report_error(PROG, "%s", err);
    int status = plot_heatmaps(dir, "train_attention", example, "entry", "head", titles);
    if (status == 0 && steps > 0) {   /* one fault, one line: the first stops the rest */
        Tensor *xs = tensor_arange(SHAPE(steps));
        for (int i = 0; i < steps; i++)
            xs->data[i] += (float)first;
        Tensor *ys = tensor_from(losses, SHAPE(steps));
        /* a log scale shows the late steps, unless a loss rounded to 0 */
        bool all_positive = true;
        for (int i = 0; i < steps; i++)
            all_positive = all_positive && losses[i] > 0.0f;
        status = plot_curves(dir, "train_loss", xs, ys, "step", "cross-entropy loss", NULL,
                              all_positive);
        tensor_free(xs);
        tensor_free(ys);
    }
    if (status != 0)
        fileset_abandon(plots);   /* the line is out: the previous plots stay */
    else if (fileset_commit(plots, err, sizeof err) != 0)
        status = report_error(PROG, "%s", err);
    if (status == 0)
        printf("\nwrote %s/train_attention.{dat,gp}%s (render: make plots, or gnuplot each "
               ".gp)\n", dir, steps > 0 ? " and train_loss.{dat,gp}" : "");
    return status;
}

/* The sizes this program can run, for a model read from a directory. Going
 * on training, the pairs are the saved ones (checked against the model's
 * countries as the training state is read), not --pairs' default. */
static LookupLimits limits_of(const Options *opt)
{
    return (LookupLimits){.min_vocab = opt->steps_given ? 2 : opt->pairs,
                          .max_vocab = TASK_MAX_COUNTRIES,
                          .max_hiddens = MAX_HIDDENS, .max_heads = MAX_PAIRS,
                          .max_batch = MAX_BATCH, .max_pairs = MAX_PAIRS};
}

/* --from DIR: the model, with its sizes (written into opt) read from the
 * saved files; a directory that does not hold one stops with one line. */
static LookupModel *load_model(Options *opt)
{
    char err[MODEL_ERR_LEN];
    const LookupLimits limits = limits_of(opt);
    LookupModel *model = lookup_load_new(opt->from_dir, &limits, err, sizeof err);
    if (model == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        exit(1);
    }
    opt->countries = model->key_vocab;
    opt->hiddens = model->num_hiddens;
    opt->heads = model->num_heads;
    return model;
}

/* --from DIR --steps N: Adam's state and what draws the batches (the
 * seed, the batch size, the pairs, written into opt), so that training
 * goes on from DIR's step to the numbers an uninterrupted run reaches. */
static Adam *load_training(LookupModel *model, Options *opt)
{
    char err[MODEL_ERR_LEN], *path = npy_path(opt->from_dir, "optimizer.step");
    const bool has_state = access(path, F_OK) == 0;
    free(path);
    if (!has_state) {
        fprintf(stderr, "%s: %s holds a model without its training state (no "
                "optimizer.step.npy): --from it without --steps evaluates it\n", PROG,
                opt->from_dir);
        lookup_free(model);
        exit(1);
    }
    const LookupLimits limits = limits_of(opt);
    LookupTraining training;
    Adam *adam = lookup_load_training_new(model, opt->from_dir, &limits, &training, err,
                                          sizeof err);
    if (adam == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        lookup_free(model);
        exit(1);
    }
    if (adam->step >= opt->steps)
        cli_fail(PROG, "--steps %d: the model in %s has taken %ld steps already; ask for more "
                 "to go on training it", opt->steps, opt->from_dir, adam->step);
    opt->seed = training.seed;
    opt->batch = training.batch_size;
    opt->pairs = training.num_pairs;
    opt->lr = adam->lr;
    return adam;
}

/* A size of the model, as --bench times it. */
typedef struct {
    int batch, pairs, hiddens, heads;
} BenchSize;

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
    draw_step_batch(&task, batch, opt->seed, 1);
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

/* --bench: training steps per second at these sizes and at a large one,
 * through the clear layer and the fast one on 1 and N threads, beside
 * PyTorch's best when tests/fixtures/time_pytorch_multihead.py --training
 * has timed it on this machine. Every ratio is of figures from one run. */
static int bench(const Options *opt)
{
    const int N = opt->threads > 1 ? opt->threads : 2;
    const BenchSize sizes[2] = {{opt->batch, opt->pairs, opt->hiddens, opt->heads},
                                {256, 16, 256, 8}};
    bool any_pytorch = false;
    printf("%s --bench: training steps/s of this model (embedding, attention, readout, loss, "
           "Adam), one run\n  batch  pairs  num_hiddens  heads     clear   fast 1t   fast %dt"
           "   PyTorch best  fast %dt / PyTorch\n", PROG, N, N);
    for (int i = 0; i < 2; i++) {
        const BenchSize s = sizes[i];
        if (s.pairs > opt->countries || s.hiddens % s.heads != 0)
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

/* ---- options ------------------------------------------------------------------ */

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .steps = 400, .batch = 32, .pairs = 8, .countries = 24,
                   .hiddens = 32, .heads = 4, .examples = 2000, .lr = 0.001f};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for the parameters, the batches and the held-out set",
         .given = &opt.training_given},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 1000000, .metavar = "N",
         .help = "training steps in all (one batch each); with --from, go on training up to N",
         .given = &opt.steps_given},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = MAX_BATCH, .metavar = "B",
         .help = "examples per step", .given = &opt.training_given},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1e30, .metavar = "X",
         .help = "Adam's learning rate (1e30 makes the loss overflow)",
         .given = &opt.training_given},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary", .given = &opt.training_given},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "V", .help = "countries (and capitals) words are drawn from, at least P",
         .given = &opt.sizes_given},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens", .given = &opt.sizes_given},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_PAIRS, .metavar = "H",
         .help = "num_heads; must divide D", .given = &opt.sizes_given},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = 100000, .metavar = "N",
         .help = "held-out examples"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the trained model as DIR/<parameter name>.npy, with Adam's state"},
        {"--from", CLI_STRING, &opt.from_dir, .metavar = "DIR",
         .help = "load a saved model instead of training one (with --steps: go on training it)"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the loss curve and the attention heatmap into DIR"},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = MAX_THREADS, .metavar = "N",
         .help = "train through the fast layer on N threads",
         .default_text = "the clear layer, on one"},
        {"--bench", CLI_FLAG, &opt.bench,
         .help = "print training steps per second at these sizes and\nat (batch 256, 16 pairs, "
                 "num_hiddens 256, 8 heads),\nclear and fast (1 and N threads), then stop"},
    };
    cli_parse(&(CliTable){PROG, "Train one multi-head attention layer to look countries up "
                                "in a dictionary.", CLI_COUNT(options), options},
              argc, argv);
    if (opt.countries < opt.pairs)
        cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt.countries, opt.pairs, opt.pairs);
    if (opt.hiddens % opt.heads != 0)
        cli_fail(PROG, "--hiddens %d does not divide by --heads %d", opt.hiddens, opt.heads);
    if (opt.from_dir)
        cli_check_input_dir(PROG, "--from", opt.from_dir);
    if (opt.from_dir && opt.sizes_given)
        cli_fail(PROG, "--from takes the model's sizes from DIR: drop --countries, --hiddens "
                 "and --heads");
    if (opt.from_dir && opt.steps_given && opt.training_given)
        cli_fail(PROG, "--from with --steps goes on with the seed, batch, pairs and learning "
                 "rate saved in DIR: drop --seed, --batch, --pairs and --lr");
    if (opt.from_dir && opt.to_dir && !opt.steps_given)
        cli_fail(PROG, "--from and --to together would only copy the model: add --steps N to "
                 "train it on up to step N");
    if (opt.from_dir && opt.bench)
        cli_fail(PROG, "--bench times training a new model: drop --from");
    return opt;
}

/* ---- main --------------------------------------------------------------------- */

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
        die(PROG, "out of memory");
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
                      const Options *opt)
{
    char err[MODEL_ERR_LEN];
    const LookupTraining training = {opt->batch, opt->pairs, opt->seed};
    FileSet *set = fileset_begin(opt->to_dir, err, sizeof err);   /* the model's save joins it */
    int status = set != NULL ? 0 : -1;
    if (status == 0 && (save_vocabulary(set, task, err, sizeof err) != 0 ||
                        lookup_save_training(model, adam, &training, opt->to_dir, err,
                                             sizeof err) != 0)) {
        fileset_abandon(set);
        status = -1;
    } else if (status == 0) {
        status = fileset_commit(set, err, sizeof err);
    }
    if (status != 0)
        report_error(PROG, "%s", err);
    return status != 0;
}

/* Part 2 when training: a new model, or the one loaded with its state.
 * Returns the exit status: 0, or 1 (the loss diverged, or --to failed), or
 * 128 + the signal that stopped it; --to holds the last good model. */
static int train_and_save(LookupModel *model, Adam *adam, const Task *task, const Options *opt,
                          float *losses)
{
    TrainEnd end = part2_train(model, adam, task, opt, losses);
    int status = opt->to_dir ? save_model(model, adam, task, opt) : 0;
    const int stop_signal = signals_caught();
    if (status == 0 && opt->to_dir && end == TRAINED && !stop_signal)
        printf("saved the model in %s/ (PyTorch's parameter names; "
               "tests/fixtures/make_train_fixtures.py --check %s loads it)\n\n",
               opt->to_dir, opt->to_dir);
    if (end == DIVERGED)
        return 1;
    if (stop_signal) {
        fflush(stdout);
        fprintf(stderr, "%s: stopped by %s after step %ld%s%s%s\n", PROG,
                signal_name(stop_signal), adam->step,
                opt->to_dir && status == 0 ? "; the model is saved in " : "",
                opt->to_dir && status == 0 ? opt->to_dir : "",
                opt->to_dir && status == 0 ? "/, --from it with --steps N goes on" : "");
        return 128 + stop_signal;
    }
    return status;
}

/* Memory for the sizes asked for (or read from --from), before any work. */
static void check_memory(const Options *opt)
{
    char detail[96];
    snprintf(detail, sizeof detail, "%d held-out examples or batches of %d, of %d pairs, "
             "num_hiddens %d", opt->examples, opt->batch, opt->pairs, opt->hiddens);
    memory_require(lookup_bytes_needed(opt->countries, opt->pairs, opt->hiddens, opt->heads,
                                       opt->batch, opt->examples),
                   detail, "use fewer --examples, a smaller --batch or --hiddens");
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    /* Every training step allocates and frees the same tensors; an
     * allocator that gives freed memory back to the system faults fresh
     * zeroed pages in at each step (glibc's did: with --batch 256 a step
     * took five times as long). Keeping it costs nothing: the memory peaks
     * in the first step. */
    platform_keep_freed_memory();
    LookupModel *model = opt.from_dir ? load_model(&opt) : NULL;   /* sets the sizes */
    const bool training = model == NULL || opt.steps_given;
    Adam *adam = model && training ? load_training(model, &opt) : NULL;   /* and the batches */
    check_memory(&opt);
    const Task task = task_dictionary(opt.pairs, opt.countries, opt.countries);
    if (opt.bench)
        return bench(&opt);

    part1_the_task(&task, &opt);
    int status = 0, first = 1, trained_steps = 0;
    float *losses = NULL;
    if (training) {
        if (model == NULL) {
            Rng rng = rng_use(opt.seed, RNG_PARAMETERS);
            model = lookup_new(opt.countries, opt.countries, opt.hiddens, opt.heads, &rng);
            adam = adam_new(model->params, model->num_params, opt.lr);
        }
        if (opt.threads > 0)
            model->attend = fast_attention_layer(opt.threads);
        first = (int)adam->step + 1;
        losses = checked_calloc(PROG, (size_t)(opt.steps - first + 1), sizeof *losses);
        status = train_and_save(model, adam, &task, &opt, losses);
        trained_steps = (int)adam->step - first + 1;
        adam_free(adam);
        if (status != 0) {
            lookup_free(model);
            free(losses);
            return status;
        }
    } else {
        printf("Part 2. The model, loaded from %s\n\n", opt.from_dir);
        describe_model(model, &opt);
        printf("\n");
    }
    TaskBatch *heldout = heldout_examples(&task, &opt);
    Tensor *example = NULL;
    if (part3_heldout(model, &task, heldout) != 0)
        status = 1;
    else
        example = part4_attention(model, &task, heldout);
    if (example != NULL && opt.plot_dir &&
        write_plots(opt.plot_dir, &task, heldout, example, losses, first, trained_steps) != 0)
        status = 1;
    tensor_free(example);
    task_batch_free(heldout);
    lookup_free(model);
    free(losses);
    return status;
}
