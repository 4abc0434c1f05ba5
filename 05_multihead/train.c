/*
 * train - the dictionary, learned: a multi-head attention layer trained to
 * look a word up (chapter 05, optional section "Attention that learns").
 *
 * Part 1: the task, in words: a fresh dictionary in every example.
 * Part 2: the model, and training it with Adam: the loop {batch, step,
 *         log}; a loss that stops being a number, or SIGINT / SIGTERM /
 *         SIGHUP, ends training with the last good model saved, and
 *         --from DIR --steps N goes on where a saved run stopped, to the
 *         same numbers (the loop: learn/training.h; the plumbing:
 *         run/training_run.h).
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
#include "memory.h"
#include "run/training_run.h"
#include "learn/lookup_model.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "ops.h"
#include "platform.h"

static const char PROG[] = "train";

/* --bench: train_bench.c, linked into this program */
int train_bench_main(int argc, char **argv);

enum { MAX_PAIRS = TRAIN_MAX_PAIRS };

typedef struct {
    uint64_t seed;
    int steps, batch, pairs, countries, hiddens, heads, examples;
    int threads;   /* 0: the clear layer; N: the fast layer on N threads */
    float lr;
    bool sizes_given, steps_given, training_given;
    const char *to_dir, *from_dir, *plot_dir;
} Options;

/* The run, once the options are read and the model is loaded or built:
 * what the parts read. */
typedef struct {
    LookupModel *model;
    Adam *adam;             /* NULL: a loaded model, evaluated only */
    TrainRun run;           /* --to, --plot; batch size, pairs, seed */
    int steps, examples, threads;
    const char *from_dir;
} Session;

/* ---- Part 1 ------------------------------------------------------------------ */

/* Example b in words, wrapped after a comma past 84 columns, with its
 * answer when show_answer. */
static void print_example(const Task *task, const TaskBatch *batch, int b, bool show_answer)
{
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        die("out of memory");
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

/* The generator streams (random.h): the parameters and the held-out examples each have their
 * own (tests/fixtures/make_train_fixtures.py draws the held-out ones from the same stream), and
 * each step's batch one of its own (rng_step, BATCH_OF_STEP), so that changing --steps leaves
 * every batch as it was. */
static void part1_the_task(const Task *task, uint64_t seed)
{
    printf("Part 1. The task: look a country up in a dictionary\n\n");
    printf("Each example is a fresh dictionary of %d countries, each paired with a capital\n"
           "at random, and a query naming one of the countries. The answer is the capital\n"
           "paired with it in this example; the pairing changes every time, so it cannot\n"
           "be memorised, only looked up. The first three examples of step 1:\n",
           task->num_pairs);
    TaskBatch *batch = task_batch_new(task, 3);   /* the draws of a batch of 3 begin any batch */
    Rng rng = rng_step(seed, 1);
    task_draw(task, batch, SPLIT_TRAIN, &rng);
    for (int b = 0; b < 3; b++)
        print_example(task, batch, b, true);
    printf("Every possible example belongs to one of two halves, training or held-out\n"
           "(one bit of its fingerprint decides), so no held-out example is ever trained on.\n\n");
    task_batch_free(batch);
}

/* ---- Part 2 ------------------------------------------------------------------ */

static void describe_model(const Session *s)
{
    const LookupModel *model = s->model;
    const int D = model->num_hiddens, H = model->num_heads, V = model->key_vocab;
    printf("  embed_keys (%d, %d): the query word and the entries' keys\n", V, D);
    printf("  embed_values (%d, %d): the entries' values\n", model->value_vocab, D);
    printf("  multi-head attention: %d heads of size %d, the query attending over the %d "
           "entries\n", H, D / H, s->run.training.num_pairs);
    printf("  readout (%d, %d): a score for every capital; cross-entropy against the answer\n",
           model->value_vocab, D);
    printf("  %zu parameters\n", parameters_count(model->params, model->num_params));
    if (s->threads > 0)
        printf("  the fast layer runs the attention, on %d thread%s\n", s->threads,
               s->threads > 1 ? "s" : "");
}

/* From adam->step + 1 to s->steps by the loop of learn/training.h, watched (the progress line,
 * divergence, signals); curve->losses receives each step's loss. Returns 0, or the exit status
 * when the loss diverged: adam (and the model) are then back at the last state whose loss was a
 * number. */
static int train_steps(const Session *s, const Task *task, LossCurve *curve)
{
    const LookupTraining *t = &s->run.training;
    const TrainingPlan plan = {.task = task, .seed = t->seed, .first_step = curve->first,
                               .last_step = s->steps, .batch_size = t->batch_size,
                               .batches = BATCH_OF_STEP};
    const Trainee trainee = lookup_trainee(s->model, s->adam);
    TrainWatch *watch = train_watch_new(s->adam, &s->run, s->steps, curve);
    const TrainingWatch watching = train_watch(watch);
    training_loop(&trainee, &plan, &watching);
    return train_watch_end(watch);
}

/* Part 2 when training: a new model, or one loaded with its state. Returns
 * the exit status: 0, or 1 (the loss diverged, or --to failed), or 128 +
 * the signal that stopped it; --to holds the last good model. */
static int part2_train(const Session *s, const Task *task, LossCurve *curve)
{
    printf("Part 2. The model, trained\n\n");
    describe_model(s);
    const Adam *adam = s->adam;
    const int batch = s->run.training.batch_size;
    if (adam->step > 0)
        printf("  Adam, learning rate %g, batches of %d, steps %ld to %d (going on from "
               "%s):\n", (double)adam->lr, batch, adam->step + 1, s->steps, s->from_dir);
    else
        printf("  Adam, learning rate %g, batches of %d, %d steps:\n", (double)adam->lr, batch,
               s->steps);
    curve->first = (int)adam->step + 1;
    curve->losses = checked_calloc((size_t)(s->steps - curve->first + 1),
                                   sizeof *curve->losses);
    const int watch_status = train_steps(s, task, curve);
    return train_finish(s->model, adam, task, &s->run, watch_status);
}

static void part2_loaded(const Session *s)
{
    printf("Part 2. The model, loaded from %s\n\n", s->from_dir);
    describe_model(s);
    printf("\n");
}

/* ---- Part 3 ------------------------------------------------------------------ */

static TaskBatch *heldout_examples(const Task *task, const Session *s)
{
    TaskBatch *heldout = task_batch_new(task, s->examples);
    Rng rng = rng_use(s->run.training.seed, RNG_HELDOUT);
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
        return fail("the held-out loss is %s: the model's forward overflows float32 on these "
                    "examples; train it again with a smaller --lr",
                    isnan(loss) ? "NaN" : "infinite");
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

/* Over the held-out examples, for each head: the mean weight it puts on the entry whose key the
 * query names, and the share of examples whose largest weight falls there (the first largest,
 * like argmax): weights (N, H, 1, P) -> mean_weight (H,), largest_share (H,), added into zeros.
 */
static void weight_on_the_key(const Tensor *weights, const TaskBatch *heldout,
                              double *mean_weight, double *largest_share)
{
    const int N = weights->shape[0], H = weights->shape[1], P = weights->shape[3];
    for (int b = 0; b < N; b++) {
        const int asked = asked_entry(heldout, b);
        for (int h = 0; h < H; h++) {
            const float *row = &AT4(weights, b, h, 0, 0);
            mean_weight[h] += row[asked] / N;
            largest_share[h] += (argmax(row, P) == asked) / (double)N;
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
    const int predicted = argmax(&AT3(logits, 0, 0, 0), model->value_vocab);
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
    for (int h = 0; h < H; h++)
        on_key += argmax(&AT2(example, h, 0), P) == asked;
    printf("  %d of the %d heads put their largest weight on entry %d, the one holding %s%s",
           on_key, H, asked, task->key_words[heldout->queries[0]],
           on_key == H ? ":\n  the query found its key.\n" : ".\n");

    double mean_weight[MAX_PAIRS] = {0}, largest_share[MAX_PAIRS] = {0};
    weight_on_the_key(weights, heldout, mean_weight, largest_share);
    printf("\n  over all %d held-out examples, the entry holding the query's key:\n"
           "    head   has the head's largest weight   mean weight on it\n",
           heldout->batch_size);
    for (int h = 0; h < H; h++)
        printf("    %4d   %28.1f%%   %17.3f\n", h, 100.0 * largest_share[h], mean_weight[h]);
    TENSOR_FREE(weights, logits);
    return example;
}

/* ---- options and the run ------------------------------------------------------ */

/* The checks between options, after the table's own: one line, exit 2. */
static void check_options(const Options *opt)
{
    if (opt->countries < opt->pairs)
        cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt->countries, opt->pairs, opt->pairs);
    if (opt->from_dir && opt->sizes_given)
        cli_fail(PROG, "--from takes the model's sizes from DIR: drop --countries, --hiddens "
                 "and --heads");
    if (opt->from_dir && opt->steps_given && opt->training_given)
        cli_fail(PROG, "--from with --steps goes on with the seed, batch, pairs and learning "
                 "rate saved in DIR: drop --seed, --batch, --pairs and --lr");
    if (opt->from_dir && opt->to_dir && !opt->steps_given)
        cli_fail(PROG, "--from and --to together would only copy the model: add --steps N to "
                 "train it on up to step N");
}

static Options parse_options(int argc, char **argv, int *done)
{
    const DictionaryTraining d = DICTIONARY_TRAINING;
    Options opt = {.seed = 0, .steps = d.steps, .batch = d.batch_size, .pairs = d.pairs,
                   .countries = d.countries, .hiddens = d.num_hiddens, .heads = d.num_heads,
                   .examples = 2000, .lr = d.lr};
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
         .help = "num_heads; must divide D", .given = &opt.sizes_given, .splits = &opt.hiddens},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = 100000, .metavar = "N",
         .help = "held-out examples"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the trained model as DIR/<parameter name>.npy, with Adam's state"},
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "load a saved model instead of training one (with --steps: go on training it)"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the loss curve and the attention heatmap into DIR"},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = TRAIN_MAX_THREADS, .metavar = "N",
         .help = "train through the fast layer on N threads",
         .default_text = "the clear layer, on one"},
        {"--bench", CLI_MODE, .tool = "train_bench", .mode = train_bench_main,
         .help = "training steps per second, clear and fast"},
    };
    *done = cli_parse(&(CliTable){PROG, "Train one multi-head attention layer to look countries up "
                                        "in a dictionary.", CLI_COUNT(options), options},
                      argc, argv);
    if (*done == CLI_RUN)
        check_options(&opt);
    return opt;
}

/* Memory for the run's sizes, before any work. */
static int check_memory(const Session *s, int countries, int hiddens, int heads)
{
    const LookupTraining *t = &s->run.training;
    char detail[96];
    snprintf(detail, sizeof detail, "%d held-out examples or batches of %d, of %d pairs, "
             "num_hiddens %d", s->examples, t->batch_size, t->num_pairs, hiddens);
    return memory_require(lookup_bytes_needed(countries, t->num_pairs, hiddens, heads,
                                              t->batch_size, s->examples),
                          detail, "use fewer --examples, a smaller --batch or --hiddens");
}

/* The run the options ask for, into *s: the model loaded from --from (with
 * its training state to go on), or built from the seed. 0, or the exit
 * status after one line (nothing left to free). */
static int open_session(const Options *opt, Session *s)
{
    *s = (Session){.run = {opt->to_dir, opt->plot_dir, {opt->batch, opt->pairs, opt->seed}},
                   .steps = opt->steps, .examples = opt->examples, .threads = opt->threads,
                   .from_dir = opt->from_dir};
    int status = opt->from_dir ? train_load_model(opt->from_dir, opt->steps_given ? 2 : opt->pairs,
                                                  &s->model) : 0;
    if (status == 0 && opt->from_dir && opt->steps_given)   /* and what drew its batches */
        status = train_load_state(PROG, s->model, opt->from_dir, opt->steps, &s->run.training,
                                  &s->adam);
    if (status == 0)   /* the loaded model's sizes, or the options' */
        status = s->model ? check_memory(s, s->model->key_vocab, s->model->num_hiddens,
                                         s->model->num_heads)
                          : check_memory(s, opt->countries, opt->hiddens, opt->heads);
    if (status != 0) {
        adam_free(s->adam);
        lookup_free(s->model);
        return status;
    }
    if (opt->from_dir == NULL) {
        Rng rng = rng_use(opt->seed, RNG_PARAMETERS);
        s->model = lookup_new(opt->countries, opt->countries, opt->hiddens, opt->heads, &rng);
        s->adam = adam_new(s->model->params, s->model->num_params, opt->lr);
    }
    if (s->adam != NULL && opt->threads > 0)
        s->model->attend = fast_attention_layer(opt->threads);
    return 0;
}

/* ---- main --------------------------------------------------------------------- */

/* Parts 3 and 4 on the held-out examples, then --plot. Returns the exit status. */
static int evaluate_and_show(const Session *s, const Task *task, const LossCurve *curve)
{
    TaskBatch *heldout = heldout_examples(task, s);
    int status = part3_heldout(s->model, task, heldout);
    Tensor *example = status == 0 ? part4_attention(s->model, task, heldout) : NULL;
    if (example != NULL && s->run.plot_dir)
        status = train_write_plots(&s->run, task, heldout, asked_entry(heldout, 0), example,
                                   curve);
    tensor_free(example);
    task_batch_free(heldout);
    return status;
}

int main(int argc, char **argv)
{
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    /* every step frees and allocates the same tensors: memory given back to
     * the system comes back as fresh zeroed pages (with --batch 256 glibc's
     * made a step five times as long); kept, it costs nothing */
    platform_keep_freed_memory();
    Session s;
    int status = open_session(&opt, &s);
    if (status != 0)
        return status;
    const int V = s.model->key_vocab;
    const Task task = task_dictionary(s.run.training.num_pairs, V, V);
    part1_the_task(&task, s.run.training.seed);
    LossCurve curve = {0};
    if (s.adam != NULL)
        status = part2_train(&s, &task, &curve);
    else
        part2_loaded(&s);
    adam_free(s.adam);
    if (status == 0)
        status = evaluate_and_show(&s, &task, &curve);
    lookup_free(s.model);
    free(curve.losses);
    return status;
}
