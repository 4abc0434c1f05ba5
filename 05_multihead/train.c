/*
 * train - the dictionary, learned: a multi-head attention layer trained to
 * look a word up (chapter 05, optional section "Attention that learns").
 *
 * Part 1: the task, in words: a fresh dictionary in every example.
 * Part 2: the model, and training it with Adam (a progress line).
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
#include <time.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "io/cli.h"
#include "io/curve.h"
#include "io/npy.h"
#include "io/plot.h"
#include "loss.h"
#include "lookup_model.h"
#include "tasks.h"

static const char PROG[] = "train";

/* The generator streams: one for the parameters, one for the training
 * batches, one for the held-out examples, so that changing --steps leaves
 * the held-out set as it was (tests/fixtures/make_train_fixtures.py draws
 * the held-out set from the same stream). */
enum { STREAM_TRAIN = 1, STREAM_HELDOUT = 2 };
enum { MAX_PAIRS = HEATMAP_TERMINAL_MAX, PROGRESS_LINES = 10 };

typedef struct {
    uint64_t seed;
    int steps, batch, pairs, countries, hiddens, heads, examples;
    float lr;
    bool sizes_given, steps_given, bench;
    const char *to_dir, *from_dir, *plot_dir;
} Options;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every training step allocates and frees the same tensors. glibc returns
 * the free top of its heap to the system once it passes 128 KB (and serves
 * blocks over 128 KB with mmap, unmapped when freed), so each step would
 * fault fresh zeroed pages back in: with --batch 256 a step took five times
 * as long. The default size stays under those limits. Keeping freed memory
 * for the next step costs nothing: the memory peaks in the first step. */
static void keep_freed_memory(void)
{
#ifdef __GLIBC__
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
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

static void part1_the_task(const Task *task, const Options *opt)
{
    printf("Part 1. The task: look a country up in a dictionary\n\n");
    printf("Each example is a fresh dictionary of %d countries, each paired with a capital\n"
           "at random, and a query naming one of the countries. The answer is the capital\n"
           "paired with it in this example; the pairing changes every time, so it cannot\n"
           "be memorised, only looked up. Three training examples:\n",
           task->num_pairs);
    TaskBatch *batch = task_batch_new(task, 3);
    Rng rng = rng_new_stream(opt->seed, STREAM_TRAIN);
    task_draw(task, batch, SPLIT_TRAIN, &rng);
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

/* Train for opt->steps steps; losses (steps,) receives each step's loss.
 * Returns false when the loss stopped being a number. */
static bool part2_train(LookupModel *model, const Task *task, const Options *opt,
                        float *losses)
{
    printf("Part 2. The model, trained\n\n");
    describe_model(model, opt);
    printf("  Adam, learning rate %g, batches of %d, %d steps:\n", (double)opt->lr, opt->batch,
           opt->steps);
    Adam *adam = adam_new(model->params, model->num_params, opt->lr);
    TaskBatch *batch = task_batch_new(task, opt->batch);
    Rng rng = rng_new_stream(opt->seed, STREAM_TRAIN);
    const bool terminal = isatty(STDOUT_FILENO);
    const int every = opt->steps / PROGRESS_LINES > 0 ? opt->steps / PROGRESS_LINES : 1;
    const int window = terminal && every > 10 ? 10 : every;   /* steps the shown loss averages */
    double window_loss = 0.0, window_correct = 0.0;
    bool finite = true;
    const double start = now_seconds();
    for (int step = 1; step <= opt->steps; step++) {
        task_draw(task, batch, SPLIT_TRAIN, &rng);
        int correct;
        const double loss = lookup_train_step(model, adam, batch, &correct);
        if (!isfinite(loss)) {
            fflush(stdout);
            fprintf(stderr, "%s: the loss became %g at step %d; try a smaller --lr\n", PROG,
                    loss, step);
            finite = false;
            break;
        }
        losses[step - 1] = (float)loss;
        window_loss += loss;
        window_correct += correct;
        if (step % window == 0 || step == opt->steps) {
            const int n = step % window == 0 ? window : step % window;
            report_progress(step, opt->steps, window_loss / n,
                            window_correct / ((double)n * opt->batch), terminal);
            window_loss = window_correct = 0.0;
        }
    }
    const double seconds = now_seconds() - start;
    if (finite)
        printf("  (%d steps in %.2f s, %.0f steps/s)\n\n", opt->steps, seconds,
               opt->steps / seconds);
    task_batch_free(batch);
    adam_free(adam);
    return finite;
}

/* ---- Part 3 ------------------------------------------------------------------ */

static TaskBatch *heldout_examples(const Task *task, const Options *opt)
{
    TaskBatch *heldout = task_batch_new(task, opt->examples);
    Rng rng = rng_new_stream(opt->seed, STREAM_HELDOUT);
    task_draw(task, heldout, SPLIT_HELDOUT, &rng);
    return heldout;
}

static void part3_heldout(const LookupModel *model, const Task *task, const TaskBatch *heldout)
{
    printf("Part 3. Held-out accuracy\n\n");
    int correct;
    const double loss = lookup_evaluate(model, heldout, &correct);
    const int N = heldout->batch_size;
    printf("  %d examples never trained on: %d answered right, accuracy %.2f%%, loss %.4f\n",
           N, correct, 100.0 * correct / N, loss);
    printf("  (a guess among the example's capitals would be right 1 time in %d: %.1f%%)\n\n",
           task->num_pairs, 100.0 / task->num_pairs);
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

/* The mean weight each head puts on the entry whose key the query names,
 * over the held-out examples: weights (N, H, 1, P) -> per_head (H,). */
static void weight_on_the_key(const Tensor *weights, const TaskBatch *heldout, double *per_head)
{
    const int N = weights->shape[0], H = weights->shape[1];
    for (int h = 0; h < H; h++)
        per_head[h] = 0.0;
    for (int b = 0; b < N; b++) {
        const int asked = asked_entry(heldout, b);
        for (int h = 0; h < H; h++)
            per_head[h] += AT4(weights, b, h, 0, asked) / N;
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

    double per_head[MAX_PAIRS];
    weight_on_the_key(weights, heldout, per_head);
    printf("\n  mean weight on the entry holding the query's key, over the %d held-out "
           "examples:\n ", heldout->batch_size);
    for (int h = 0; h < H; h++)
        printf(" head %d %.3f%s", h, per_head[h], h + 1 < H ? "," : "\n");
    tensor_free(weights);
    tensor_free(logits);
    return example;
}

/* ---- --plot, --to, --from, --bench ---------------------------------------------- */

static int write_plots(const char *dir, const Task *task, const TaskBatch *heldout,
                       const Tensor *example, const float *losses, int steps)
{
    char title[96];
    snprintf(title, sizeof title, "query %s: entry %d holds its key",
             task->key_words[heldout->queries[0]], asked_entry(heldout, 0));
    const char *titles[1] = {title};
    int status = plot_heatmaps(dir, "train_attention", example, "entry", "head", titles);
    if (steps > 0) {
        Tensor *xs = tensor_arange(SHAPE(steps));
        for (int i = 0; i < steps; i++)
            xs->data[i] += 1.0f;
        Tensor *ys = tensor_from(losses, SHAPE(steps));
        /* a log scale shows the late steps, unless a loss rounded to 0 */
        bool all_positive = true;
        for (int i = 0; i < steps; i++)
            all_positive = all_positive && losses[i] > 0.0f;
        status |= plot_curves(dir, "train_loss", xs, ys, "step", "cross-entropy loss", NULL,
                              all_positive);
        tensor_free(xs);
        tensor_free(ys);
    }
    if (status == 0)
        printf("\nwrote %s/train_attention.{dat,gp}%s (render: make plots, or gnuplot each "
               ".gp)\n", dir, steps > 0 ? " and train_loss.{dat,gp}" : "");
    return status;
}

/* --from DIR: the model, with its sizes (written into opt) read from the
 * saved files; a directory that does not hold one stops with one line. */
static LookupModel *load_model(Options *opt)
{
    char err[MODEL_ERR_LEN], path[1024];
    snprintf(path, sizeof path, "%s/embed_keys.weight.npy", opt->from_dir);
    Tensor *embed = npy_load(path, err, sizeof err);
    if (embed == NULL || model_read_ints(opt->from_dir, "num_heads", &opt->heads, 1, err,
                                         sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        tensor_free(embed);
        exit(1);
    }
    opt->countries = embed->ndim == 2 ? embed->shape[0] : 0;
    opt->hiddens = embed->ndim == 2 ? embed->shape[1] : 0;
    tensor_free(embed);
    if (opt->countries < opt->pairs || opt->countries > TASK_MAX_COUNTRIES ||
        opt->hiddens < 1 || opt->heads < 1 || opt->heads > MAX_PAIRS ||
        opt->hiddens % opt->heads != 0) {
        fprintf(stderr, "%s: %s does not hold a model this program can run (%d countries, "
                "num_hiddens %d, %d heads, for %d pairs)\n", PROG, opt->from_dir,
                opt->countries, opt->hiddens, opt->heads, opt->pairs);
        exit(1);
    }
    Rng rng = rng_new(opt->seed);
    LookupModel *model = lookup_new(opt->countries, opt->countries, opt->hiddens, opt->heads,
                                    &rng);
    if (lookup_load(model, opt->from_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        lookup_free(model);
        exit(1);
    }
    return model;
}

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Training steps per second at these sizes, on one batch drawn beforehand,
 * so that the step alone is timed (as the PyTorch reference does). The CPU
 * time per step is printed too: on a busy machine the steps per second
 * fall with the share of a core the program gets, the CPU time much less. */
static int bench(const Task *task, const Options *opt)
{
    Rng rng = rng_new(opt->seed);
    LookupModel *model = lookup_new(opt->countries, opt->countries, opt->hiddens, opt->heads,
                                    &rng);
    Adam *adam = adam_new(model->params, model->num_params, opt->lr);
    TaskBatch *batch = task_batch_new(task, opt->batch);
    Rng data = rng_new_stream(opt->seed, STREAM_TRAIN);
    task_draw(task, batch, SPLIT_TRAIN, &data);
    for (int i = 0; i < 50; i++)   /* warm up */
        lookup_train_step(model, adam, batch, NULL);
    int steps = 0;
    const double start = now_seconds(), cpu_start = cpu_seconds();
    double elapsed;
    do {
        lookup_train_step(model, adam, batch, NULL);
        steps++;
    } while ((elapsed = now_seconds() - start) < 3.0);
    const double cpu_ms = 1e3 * (cpu_seconds() - cpu_start) / steps;
    printf("%s --bench: %.0f training steps/s, %.3f ms of CPU per step (batch %d, %d pairs, "
           "num_hiddens %d, %d heads, 1 thread)\n", PROG, steps / elapsed, cpu_ms, opt->batch,
           opt->pairs, opt->hiddens, opt->heads);
    printf("PyTorch on the same model and batch: /usr/bin/python3 "
           "tests/fixtures/make_train_fixtures.py --time\n");
    task_batch_free(batch);
    adam_free(adam);
    lookup_free(model);
    return 0;
}

/* ---- options ------------------------------------------------------------------ */

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .steps = 400, .batch = 32, .pairs = 8, .countries = 24,
                   .hiddens = 32, .heads = 4, .examples = 2000, .lr = 0.001f};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for the parameters, the batches and the held-out set"},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 1000000, .metavar = "N",
         .help = "training steps (one batch each)", .given = &opt.steps_given},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 4096, .metavar = "B",
         .help = "examples per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "X",
         .help = "Adam's learning rate"},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary"},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "V", .help = "countries (and capitals) words are drawn from, at least P",
         .given = &opt.sizes_given},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = 512, .metavar = "D",
         .help = "num_hiddens", .given = &opt.sizes_given},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_PAIRS, .metavar = "H",
         .help = "num_heads; must divide D", .given = &opt.sizes_given},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = 100000, .metavar = "N",
         .help = "held-out examples"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the trained model as DIR/<parameter name>.npy"},
        {"--from", CLI_STRING, &opt.from_dir, .metavar = "DIR",
         .help = "load a saved model instead of training one", .default_text = "train"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the loss curve and the attention heatmap into DIR"},
        {"--bench", CLI_FLAG, &opt.bench,
         .help = "print training steps per second at these sizes, then stop"},
    };
    cli_parse(&(CliTable){PROG, "Train one multi-head attention layer to look countries up "
                                "in a dictionary.", CLI_COUNT(options), options},
              argc, argv);
    if (opt.countries < opt.pairs)
        cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt.countries, opt.pairs, opt.pairs);
    if (opt.hiddens % opt.heads != 0)
        cli_fail(PROG, "--hiddens %d does not divide by --heads %d", opt.hiddens, opt.heads);
    if (opt.from_dir && (opt.sizes_given || opt.steps_given))
        cli_fail(PROG, "--from takes the model's sizes from DIR and does not train: drop "
                 "--steps, --countries, --hiddens and --heads");
    if (opt.from_dir && opt.to_dir)
        cli_fail(PROG, "--from and --to together would only copy the model");
    if (opt.from_dir && opt.bench)
        cli_fail(PROG, "--bench times training a new model: drop --from");
    return opt;
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    keep_freed_memory();
    LookupModel *model = opt.from_dir ? load_model(&opt) : NULL;   /* sets the sizes */
    const Task task = task_dictionary(opt.pairs, opt.countries, opt.countries);
    if (opt.bench)
        return bench(&task, &opt);

    part1_the_task(&task, &opt);
    float *losses = checked_calloc(PROG, (size_t)opt.steps, sizeof *losses);
    int trained_steps = 0;
    if (model) {
        printf("Part 2. The model, loaded from %s\n\n", opt.from_dir);
        describe_model(model, &opt);
        printf("\n");
    } else {
        Rng rng = rng_new(opt.seed);
        model = lookup_new(opt.countries, opt.countries, opt.hiddens, opt.heads, &rng);
        if (!part2_train(model, &task, &opt, losses)) {
            lookup_free(model);
            free(losses);
            return 1;
        }
        trained_steps = opt.steps;
    }
    int status = 0;
    char err[MODEL_ERR_LEN];
    if (opt.to_dir) {
        if (lookup_save(model, opt.to_dir, err, sizeof err) == 0) {
            printf("saved the model in %s/ (PyTorch's parameter names; "
                   "tests/fixtures/make_train_fixtures.py --check %s loads it)\n\n",
                   opt.to_dir, opt.to_dir);
        } else {
            fprintf(stderr, "%s: %s\n", PROG, err);
            status = 1;
        }
    }
    TaskBatch *heldout = heldout_examples(&task, &opt);
    part3_heldout(model, &task, heldout);
    Tensor *example = part4_attention(model, &task, heldout);
    if (opt.plot_dir &&
        write_plots(opt.plot_dir, &task, heldout, example, losses, trained_steps) != 0)
        status = 1;
    tensor_free(example);
    task_batch_free(heldout);
    lookup_free(model);
    free(losses);
    return status;
}
