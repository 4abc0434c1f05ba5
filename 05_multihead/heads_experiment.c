/*
 * heads_experiment - why several heads: a task that one head cannot do and
 * several can, at the same num_hiddens.
 *
 * Part 1: the two-key task (a query naming two countries of a dictionary,
 *         answered by both capitals in order) and the model.
 * Part 2: the same model with 1, 2 and 4 heads of size D / H, trained from
 *         several seeds; a table of held-out accuracy.
 * Part 3: where each head of the first seed's models looks on one held-out
 *         example.
 *
 * Legend: B = batch_size, P = entries of a dictionary, H = num_heads,
 * D = num_hiddens, d = D / H.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/cli.h"
#include "io/plot.h"
#include "learn/optim.h"
#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "tensor.h"

static const char PROG[] = "heads_experiment";

/* The held-out set is evaluated in one batch: at the largest sizes it
 * still takes a few hundred MB. */
enum { MAX_COUNTS = 6, MAX_SEEDS = 8, MAX_HIDDENS = 128, MAX_PAIRS = HEATMAP_TERMINAL_MAX,
       MAX_EXAMPLES = 5000 };


typedef struct {
    uint64_t seed;
    const char *heads_text;
    int head_counts[MAX_COUNTS], num_counts;
    int hiddens, pairs, countries, steps, batch, seeds, examples;
    float lr;
    const char *plot_dir;
} Options;

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .heads_text = "1,2,4", .hiddens = 32, .pairs = 6, .countries = 16,
                   .steps = 600, .batch = 32, .seeds = 3, .examples = 1000, .lr = 0.01f};
    const CliOption options[] = {
        {"--heads", CLI_STRING, &opt.heads_text, .metavar = "LIST",
         .help = "head counts to compare, each dividing D"},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens, for every head count"},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary"},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "C",
         .help = "words per vocabulary, at least P"},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 100000, .metavar = "N",
         .help = "Adam steps per model"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 4096, .metavar = "B",
         .help = "examples per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "seeds per head count"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S",
         .help = "the first seed, and the held-out set's"},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = MAX_EXAMPLES, .metavar = "N",
         .help = "held-out examples"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write DIR/two_keys_H_heads.{dat,gp}"},
    };
    cli_parse(&(CliTable){PROG, "Why several heads: a query that names two keys, answered with "
                          "1, 2 and 4 heads\nat the same num_hiddens.",
                          CLI_COUNT(options), options},
              argc, argv);
    long counts[MAX_COUNTS];
    opt.num_counts = cli_long_list(PROG, "--heads", opt.heads_text, 1, MAX_HIDDENS, counts,
                                   MAX_COUNTS);
    for (int i = 0; i < opt.num_counts; i++) {
        opt.head_counts[i] = (int)counts[i];
        if (opt.hiddens % opt.head_counts[i] != 0)
            cli_fail(PROG, "--heads: %d heads do not divide --hiddens %d", opt.head_counts[i],
                     opt.hiddens);
    }
    if (opt.countries < opt.pairs)
        cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt.countries, opt.pairs, opt.pairs);
    return opt;
}

/* ---- training ------------------------------------------------------------------ */

/* A line that rewrites itself on a terminal (stderr); nothing otherwise. */
static void show_progress(bool terminal, int heads, uint64_t seed, int step, int steps,
                          double loss)
{
    if (!terminal)
        return;
    fprintf(stderr, "\r  %d %s, seed %llu: step %5d of %d, loss %.4f  ", heads,
            plural(heads, "head", "heads"), (unsigned long long)seed, step, steps, loss);
    if (step == steps)
        fprintf(stderr, "\r%*s\r", 60, "");
}

/* A model with H heads trained from seed's initial parameters on seed's
 * batches (the same batches for every H). NULL when the loss stops being a
 * number. */
static TwoKeyModel *train(const Options *opt, const Task *task, int heads, uint64_t seed)
{
    Rng init = rng_use(seed, RNG_PARAMETERS), data = rng_use(seed, RNG_BATCHES);
    TwoKeyModel *model = two_key_new(opt->countries, opt->countries, opt->hiddens, heads, &init);
    Adam *adam = adam_new(model->params, TWO_KEY_NUM_PARAMS, opt->lr);
    TaskBatch *batch = task_batch_new(task, opt->batch);
    const bool terminal = isatty(STDERR_FILENO);
    for (int step = 1; step <= opt->steps; step++) {
        task_draw(task, batch, SPLIT_TRAIN, &data);
        const double loss = two_key_train_step(model, adam, batch);
        if (!isfinite(loss)) {
            fflush(stdout);
            fprintf(stderr, "%s: %d heads, seed %llu: the loss became %s at step %d; try a "
                    "smaller --lr\n", PROG, heads, (unsigned long long)seed,
                    non_finite_name(loss), step);
            two_key_free(model);
            model = NULL;
            break;
        }
        if (step % 10 == 0 || step == opt->steps)
            show_progress(terminal, heads, seed, step, opt->steps, loss);
    }
    task_batch_free(batch);
    adam_free(adam);
    return model;
}

/* ---- Part 1 -------------------------------------------------------------------- */

/* Held-out example 0, three entries to a line, then the query:
 *     {Japan: Lima, France: Tokyo, Peru: Oslo,
 *      Chile: Rome}
 *     query Peru Japan  ->  Oslo Lima */
static void print_example(const Task *task, const TaskBatch *held_out)
{
    const int P = held_out->num_pairs;
    printf("{");
    for (int j = 0; j < P; j++)
        printf("%s%s: %s", j == 0 ? "" : j % 3 == 0 ? ",\n     " : ", ",
               task->key_words[held_out->keys[j]], task->value_words[held_out->values[j]]);
    printf("}\n    query %s %s  ->  %s %s\n\n", task->key_words[held_out->queries[0]],
           task->key_words[held_out->queries[1]], task->value_words[held_out->answers[0]],
           task->value_words[held_out->answers[1]]);
}

static void part1_task(const Options *opt, const Task *task, const TaskBatch *held_out)
{
    printf("Why several heads: one query that names two keys\n\n"
           "Part 1. The task and the model\n\n"
           "An example is a dictionary of %d countries, each paired with a capital, out\n"
           "of %d of each, and a query naming two of its countries; the answer is their\n"
           "two capitals, in the query's order. A held-out example:\n\n    ",
           opt->pairs, opt->countries);
    print_example(task, held_out);
    Rng rng = rng_new(0);
    TwoKeyModel *sizes = two_key_new(opt->countries, opt->countries, opt->hiddens, 1, &rng);
    printf("The model reads the query as ONE vector, the two countries' embeddings\n"
           "side by side, and attends over the %d entries with H heads of size %d / H;\n"
           "a readout gives both capitals (common/learn/two_key_model.h). Whatever H, it has\n"
           "num_hiddens %d and %zu parameters. Training: %d Adam steps of %d examples,\n"
           "lr %g, the same batches for every H; held-out: %d examples, none of them\n"
           "trained on.\n\n", opt->pairs, opt->hiddens, opt->hiddens,
           parameters_count(sizes->params, TWO_KEY_NUM_PARAMS), opt->steps, opt->batch,
           (double)opt->lr, opt->examples);
    two_key_free(sizes);
}

/* ---- Part 2 -------------------------------------------------------------------- */

/* Train every head count from every seed and print the table; models[i]
 * keeps the first seed's model of head count i for part 3. */
static bool part2_table(const Options *opt, const Task *task, const TaskBatch *held_out,
                        TwoKeyModel **models)
{
    const double N = held_out->batch_size;
    printf("Part 2. Held-out accuracy: both capitals right\n\n"
           "  heads  head size");
    for (int s = 0; s < opt->seeds; s++) {
        char seed[32];
        snprintf(seed, sizeof seed, "seed %llu", (unsigned long long)(opt->seed + (uint64_t)s));
        printf("%10s", seed);
    }
    printf("      mean   first right  second right\n");
    for (int i = 0; i < opt->num_counts; i++) {
        const int H = opt->head_counts[i];
        printf("  %5d  %9d", H, opt->hiddens / H);
        fflush(stdout);
        double pairs = 0.0, first = 0.0, second = 0.0;
        for (int s = 0; s < opt->seeds; s++) {
            TwoKeyModel *model = train(opt, task, H, opt->seed + (uint64_t)s);
            if (model == NULL)
                return false;
            TwoKeyCorrect correct;
            two_key_evaluate(model, held_out, NULL, &correct);
            pairs += correct.pairs / N;
            first += correct.first / N;
            second += correct.second / N;
            printf("  %7.1f%%", 100.0 * correct.pairs / N);
            fflush(stdout);
            if (s == 0)
                models[i] = model;
            else
                two_key_free(model);
        }
        printf("  %7.1f%%  %11.1f%%  %11.1f%%\n", 100.0 * pairs / opt->seeds,
               100.0 * first / opt->seeds, 100.0 * second / opt->seeds);
    }
    printf("  (first right, second right: each capital on its own, mean over the seeds)\n\n");
    return true;
}

/* ---- Part 3 -------------------------------------------------------------------- */

/* Where model's heads look on held-out example 0: a (H, P) heatmap. */
static int show_heads(const Options *opt, const TwoKeyModel *model, const TaskBatch *example)
{
    const int H = model->num_heads, P = opt->pairs;
    Tensor *weights = NULL;   /* (1, H, 1, P) */
    Tensor *logits = two_key_forward(model, example, NULL, &weights, NULL);
    tensor_reshape(weights, SHAPE(H, P));
    char title[64];
    snprintf(title, sizeof title, "%d %s: heads down, entries across", H,
             plural(H, "head", "heads"));
    printf("\n");
    heatmap_terminal(stdout, weights, title);
    int status = 0;
    if (opt->plot_dir != NULL) {
        char name[64];
        snprintf(name, sizeof name, "two_keys_%d_heads", H);
        status = plot_heatmaps(opt->plot_dir, name, weights, "entry", "head", NULL) == 0 ? 0 : 1;
        if (status == 0)
            printf("wrote %s/%s.dat and %s/%s.gp (render: gnuplot %s/%s.gp)\n", opt->plot_dir,
                   name, opt->plot_dir, name, opt->plot_dir, name);
    }
    tensor_free(weights);
    tensor_free(logits);
    return status;
}

static int part3_heads(const Options *opt, const Task *task, const TaskBatch *held_out,
                       TwoKeyModel *const *models)
{
    printf("Part 3. Where the heads look (seed %llu, the held-out example of part 1)\n\n"
           "  entries:", (unsigned long long)opt->seed);
    int asked[2] = {-1, -1};
    for (int j = 0; j < opt->pairs; j++) {
        printf("  %d %s", j, task->key_words[held_out->keys[j]]);
        for (int i = 0; i < 2; i++)
            if (held_out->keys[j] == held_out->queries[i])
                asked[i] = j;
    }
    printf("\n  the query names entry %d, then entry %d\n", asked[0], asked[1]);
    TaskBatch *example = task_batch_example(held_out, 0);
    int status = 0;
    for (int i = 0; i < opt->num_counts && status == 0; i++)
        status = show_heads(opt, models[i], example);
    task_batch_free(example);
    return status;
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    Task task = task_two_keys(opt.pairs, opt.countries, opt.countries);
    TaskBatch *held_out = task_batch_new(&task, opt.examples);
    Rng held_out_rng = rng_use(opt.seed, RNG_HELDOUT);
    task_draw(&task, held_out, SPLIT_HELDOUT, &held_out_rng);

    part1_task(&opt, &task, held_out);
    TwoKeyModel *models[MAX_COUNTS] = {NULL};
    int status = 1;
    if (part2_table(&opt, &task, held_out, models))
        status = part3_heads(&opt, &task, held_out, models);
    for (int i = 0; i < opt.num_counts; i++)
        two_key_free(models[i]);
    task_batch_free(held_out);
    return status;
}
