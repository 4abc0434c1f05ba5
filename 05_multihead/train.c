/*
 * train - the dictionary, learned: a multi-head attention layer trained to
 * look a word up (chapter 05, optional section "Attention that learns").
 *
 * Part 1: the task, in words: a fresh dictionary in every example.
 * Part 2: the model, and training it with Adam: the loop {batch, step,
 *         log}; a loss that stops being a number, or SIGINT / SIGTERM /
 *         SIGHUP, ends training with the last good model saved, and
 *         --from DIR --steps N goes on where a saved run stopped, to the
 *         same numbers (the plumbing: run/training_run.h).
 * Part 3: held-out accuracy, on examples never trained on.
 * Part 4: the learned attention of one example: the query's weight sits
 *         on the entry holding its key.
 *
 * Legend: B = batch_size, P = entries of an example, H = num_heads,
 * D = num_hiddens, V = words in each vocabulary.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fast/fast_attention_layer.h"
#include "io/cli.h"
#include "io/fileset.h"
#include "run/training_run.h"
#include "learn/lookup_model.h"
#include "learn/loss.h"
#include "learn/tasks.h"
#include "platform.h"

static const char PROG[] = "train";

enum { MAX_PAIRS = TRAIN_MAX_PAIRS };

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

/* The batch of training step s (1, 2, ...). The generator streams
 * (random.h): the parameters and the held-out examples each have their
 * own (tests/fixtures/make_train_fixtures.py draws the held-out ones from
 * the same stream), and each step's batch one of its own (rng_step), so
 * that changing --steps leaves every batch as it was. */
static void draw_step_batch(const Task *task, TaskBatch *batch, uint64_t seed, int step)
{
    Rng rng = rng_step(seed, (uint64_t)step);
    task_draw(task, batch, SPLIT_TRAIN, &rng);
}

static void part1_the_task(const Task *task, const TrainOptions *opt)
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

static void describe_model(const LookupModel *model, const TrainOptions *opt)
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

/* From adam->step + 1 to opt->steps: batch, step, log; curve->losses
 * receives each step's loss. Returns true when the loss diverged: adam
 * (and the model) are then back at the last state whose loss was a number. */
static bool train_steps(LookupModel *model, Adam *adam, const Task *task,
                        const TrainOptions *opt, LossCurve *curve)
{
    TaskBatch *batch = task_batch_new(task, opt->batch);
    TrainLog log = train_log_start(opt->steps, opt->batch);
    TrainGuard *guard = train_guard_new(adam, opt);   /* divergence, signals */
    bool diverged = false;
    for (int step = curve->first; step <= opt->steps && !signals_caught(); step++) {
        draw_step_batch(task, batch, opt->seed, step);
        train_guard_keep(guard);
        int correct;
        const double loss = lookup_train_step(model, adam, batch, &correct);
        if ((diverged = train_guard_diverged(guard, loss, false)))
            break;
        curve->losses[curve->count++] = (float)loss;
        train_log_step(&log, step, loss, correct);
    }
    /* The last update has no loss of its own: the loss of its parameters
     * on the batch the next step would take (an update can leave every
     * parameter finite and the forward overflowing) is the one a longer
     * run finds at that step. */
    if (!diverged && curve->count > 0) {
        draw_step_batch(task, batch, opt->seed, (int)adam->step + 1);
        diverged = train_guard_diverged(guard, lookup_evaluate(model, batch, NULL), true);
    }
    train_guard_free(guard);
    if (!diverged && !signals_caught())
        train_log_end(&log, curve->count);
    task_batch_free(batch);
    return diverged;
}

/* Part 2 when training: a new model, or one loaded with its state. Returns
 * the exit status: 0, or 1 (the loss diverged, or --to failed), or 128 +
 * the signal that stopped it; --to holds the last good model. */
static int part2_train(LookupModel *model, Adam *adam, const Task *task,
                       const TrainOptions *opt, LossCurve *curve)
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
    curve->first = (int)adam->step + 1;
    curve->losses = checked_calloc(PROG, (size_t)(opt->steps - curve->first + 1),
                                   sizeof *curve->losses);
    const bool diverged = train_steps(model, adam, task, opt, curve);
    return train_finish(model, adam, task, opt, diverged);
}

static void part2_loaded(const LookupModel *model, const TrainOptions *opt)
{
    printf("Part 2. The model, loaded from %s\n\n", opt->from_dir);
    describe_model(model, opt);
    printf("\n");
}

/* ---- Part 3 ------------------------------------------------------------------ */

static TaskBatch *heldout_examples(const Task *task, const TrainOptions *opt)
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
    if (!isfinite(loss))
        return report_error(NULL, "the held-out loss is %s: the model's forward overflows "
                            "float32 on these examples; train it again with a smaller --lr",
                            isnan(loss) ? "NaN" : "infinite") != 0;
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

/* ---- options ------------------------------------------------------------------ */

static TrainOptions parse_options(int argc, char **argv)
{
    TrainOptions opt = {.prog = PROG, .seed = 0, .steps = 400, .batch = 32, .pairs = 8,
                        .countries = 24, .hiddens = 32, .heads = 4, .examples = 2000,
                        .lr = 0.001f};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for the parameters, the batches and the held-out set",
         .given = &opt.training_given},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 1000000, .metavar = "N",
         .help = "training steps in all (one batch each); with --from, go on training up to N",
         .given = &opt.steps_given},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = TRAIN_MAX_BATCH, .metavar = "B",
         .help = "examples per step", .given = &opt.training_given},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1e30, .metavar = "X",
         .help = "Adam's learning rate (1e30 makes the loss overflow)",
         .given = &opt.training_given},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary", .given = &opt.training_given},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "V", .help = "countries (and capitals) words are drawn from, at least P",
         .given = &opt.sizes_given},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = TRAIN_MAX_HIDDENS, .metavar = "D",
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
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = TRAIN_MAX_THREADS, .metavar = "N",
         .help = "train through the fast layer on N threads",
         .default_text = "the clear layer, on one"},
        {"--bench", CLI_FLAG, &opt.bench,
         .help = "print training steps per second at these sizes and\nat (batch 256, 16 pairs, "
                 "num_hiddens 256, 8 heads),\nclear and fast (1 and N threads), then stop"},
    };
    cli_parse(&(CliTable){PROG, "Train one multi-head attention layer to look countries up "
                                "in a dictionary.", CLI_COUNT(options), options},
              argc, argv);
    train_check_options(&opt);
    return opt;
}

/* ---- main --------------------------------------------------------------------- */

/* Parts 3 and 4 on the held-out examples, then --plot. Returns the exit status. */
static int evaluate_and_show(const LookupModel *model, const Task *task,
                             const TrainOptions *opt, const LossCurve *curve)
{
    TaskBatch *heldout = heldout_examples(task, opt);
    int status = part3_heldout(model, task, heldout);
    Tensor *example = status == 0 ? part4_attention(model, task, heldout) : NULL;
    if (example != NULL && opt->plot_dir)
        status = train_write_plots(opt, task, heldout, asked_entry(heldout, 0), example, curve);
    tensor_free(example);
    task_batch_free(heldout);
    return status;
}

int main(int argc, char **argv)
{
    TrainOptions opt = parse_options(argc, argv);
    /* Every training step allocates and frees the same tensors; an
     * allocator that gives freed memory back to the system faults fresh
     * zeroed pages in at each step (glibc's did: with --batch 256 a step
     * took five times as long). Keeping it costs nothing: the memory peaks
     * in the first step. */
    platform_keep_freed_memory();
    LookupModel *model = opt.from_dir ? train_load_model(&opt) : NULL;   /* sets the sizes */
    const bool training = model == NULL || opt.steps_given;
    Adam *adam = model && training ? train_load_state(model, &opt) : NULL;   /* and the batches */
    train_check_memory(&opt);
    const Task task = task_dictionary(opt.pairs, opt.countries, opt.countries);
    if (opt.bench)
        return train_bench(&opt);

    part1_the_task(&task, &opt);
    if (model == NULL) {   /* build the model */
        Rng rng = rng_use(opt.seed, RNG_PARAMETERS);
        model = lookup_new(opt.countries, opt.countries, opt.hiddens, opt.heads, &rng);
        adam = adam_new(model->params, model->num_params, opt.lr);
    }
    if (training && opt.threads > 0)
        model->attend = fast_attention_layer(opt.threads);
    LossCurve curve = {0};
    int status = 0;
    if (training)
        status = part2_train(model, adam, &task, &opt, &curve);
    else
        part2_loaded(model, &opt);
    adam_free(adam);
    if (status == 0)
        status = evaluate_and_show(model, &task, &opt, &curve);
    lookup_free(model);
    free(curve.losses);
    return status;
}
