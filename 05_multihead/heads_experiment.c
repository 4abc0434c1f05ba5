/*
 * heads_experiment - why several heads: a task that one head with a linear
 * readout does not learn and several heads do, at the same num_hiddens.
 *
 * Part 1: the two-key task (a query naming two countries of a dictionary,
 *         answered by both capitals in order) and the model.
 * Part 2: the same model with 1, 2, 4 (and 8) heads of size D / H, each
 *         trained from many seeds: how many succeed, the median and the
 *         range of held-out accuracy, each answer on its own, and chance.
 * Part 3: where each head of the first seed's models looks on one held-out
 *         example.
 * Part 4: one head set by hand: what one softmax row can do with the
 *         linear readout (without --mlp).
 *
 * --mlp N adds models with a residual ReLU MLP between the attention and
 * the readout, as a Transformer block has: the table then has a row for
 * each head count and readout, linear and MLP, from the same seeds.
 *
 * Legend: B = batch_size, P = entries of a dictionary, H = num_heads,
 * D = num_hiddens, d = D / H, N = the MLP's hidden units.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heads.h"
#include "io/cli.h"
#include "io/plot.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "tensor.h"

static const char PROG[] = "heads_experiment";

/* The held-out set is evaluated in one batch: at the largest sizes it
 * still takes a few hundred MB. */
enum { MAX_COUNTS = 6, MAX_ROWS = 2 * MAX_COUNTS, MAX_SEEDS = 64, MAX_HIDDENS = 128, MAX_PAIRS = HEATMAP_TERMINAL_MAX,
       MAX_EXAMPLES = 5000, MAX_MLP = 512, MAX_THREADS = 16 };

/* A run succeeds when both capitals are right on this share of the
 * held-out examples. */
static const double SUCCESS = 0.99;

typedef struct {
    uint64_t seed;
    const char *heads_text;
    int head_counts[MAX_COUNTS], num_counts;
    int num_hiddens, pairs, countries, steps, batch, seeds, examples, mlp, threads;
    int num_rows;   /* the models of a seed: each head count, linear, then with the MLP */
    float lr;
    bool seeds_given;
    const char *plot_dir;
} Options;

/* --heads LIST into head_counts, each dividing --hiddens; and the rows of
 * the table, one per head count, two with --mlp. */
static void read_head_counts(Options *opt)
{
    long counts[MAX_COUNTS];
    char err[CLI_ERR_LEN];
    opt->num_counts = cli_read_long_list("--heads", opt->heads_text, 1, MAX_HIDDENS, counts,
                                         MAX_COUNTS, err, sizeof err);
    if (opt->num_counts < 0)
        cli_fail(PROG, "%s", err);
    for (int i = 0; i < opt->num_counts; i++) {
        opt->head_counts[i] = (int)counts[i];
        if (!heads_split(opt->num_hiddens, opt->head_counts[i], "--hiddens", "--heads", err,
                         sizeof err))
            cli_fail(PROG, "%s", err);
    }
    if (opt->countries < opt->pairs)
        cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt->countries, opt->pairs, opt->pairs);
    opt->num_rows = opt->num_counts * (opt->mlp > 0 ? 2 : 1);
}

/* The largest model, once per thread: each thread trains and scores its
 * own; refused in one line when it does not fit. */
static int check_memory(const Options *opt)
{
    int most_heads = 1;
    for (int i = 0; i < opt->num_counts; i++)
        most_heads = opt->head_counts[i] > most_heads ? opt->head_counts[i] : most_heads;
    const int jobs = opt->num_rows * opt->seeds;
    const int at_once = opt->threads < jobs ? opt->threads : jobs;
    char detail[96];
    snprintf(detail, sizeof detail, "%d %s at once, batches of %d, %d held out", at_once,
             plural(at_once, "model", "models"), opt->batch, opt->examples);
    return memory_require(at_once * two_key_bytes_needed(opt->countries, opt->countries,
                                                         opt->pairs, opt->num_hiddens,
                                                         most_heads, opt->mlp, opt->batch,
                                                         opt->examples),
                          detail, "use fewer --threads, a smaller --batch or --examples");
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .heads_text = "1,2,4", .num_hiddens = 32, .pairs = 6,
                   .countries = 16, .steps = 600, .batch = 32, .seeds = 4, .examples = 1000,
                   .mlp = 0, .threads = 2, .lr = 0.01f};
    const CliOption options[] = {
        {"--heads", CLI_STRING, &opt.heads_text, .metavar = "LIST",
         .help = "head counts to compare, each dividing D"},
        {"--hiddens", CLI_INT, &opt.num_hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens, for every head count"},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary"},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "C",
         .help = "words per vocabulary, at least P"},
        {"--mlp", CLI_INT, &opt.mlp, .min = 0, .max = MAX_MLP, .metavar = "N",
         .help = "also with a residual ReLU MLP of N units before the readout"},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 100000, .metavar = "N",
         .help = "Adam steps per model"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 4096, .metavar = "B",
         .help = "examples per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "seeds per head count (the chapter's table: 16)", .given = &opt.seeds_given},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S",
         .help = "the first seed, and the held-out set's"},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = MAX_EXAMPLES, .metavar = "N",
         .help = "held-out examples"},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = MAX_THREADS, .metavar = "T",
         .help = "models trained at once (the same numbers for any T)"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write DIR/two_keys_H_heads[_mlp].{dat,gp}"},
    };
    *done = cli_parse(&(CliTable){PROG, "Why several heads: a query that names two keys, answered with "
                                  "1, 2 and 4 heads\nat the same num_hiddens, each from many seeds.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    read_head_counts(&opt);
    return opt;
}

/* Row r of the table: its heads, and its MLP's units (0: linear readout). */
static int row_heads(const Options *opt, int r)
{
    return opt->head_counts[r % opt->num_counts];
}

static int row_mlp(const Options *opt, int r)
{
    return r < opt->num_counts ? 0 : opt->mlp;
}

/* ---- training ------------------------------------------------------------------ */

/* Every (row, seed) pair is one job; the jobs are shared out
 * between threads, each model from its own seed's streams, so the numbers
 * do not depend on the threads. */
typedef struct {
    const Options *opt;
    const Task *task;
    const TaskBatch *held_out;
    TwoKeyCorrect correct[MAX_ROWS][MAX_SEEDS];
    int bad_step[MAX_ROWS][MAX_SEEDS];     /* 0, or the step whose loss was not a number */
    TwoKeyModel *first_models[MAX_ROWS];   /* the first seed's, for part 3 */
} Runs;

/* Job j: row j / S, seed S + j % S. */
static void run_job(void *arg, int job)
{
    Runs *runs = arg;
    const Options *opt = runs->opt;
    const int i = job / opt->seeds, s = job % opt->seeds;
    /* the same batches for every row of a seed */
    const TwoKeyTraining how = {opt->countries, opt->countries, opt->num_hiddens,
                                row_heads(opt, i), row_mlp(opt, i), opt->steps, opt->batch,
                                opt->lr};
    TwoKeyModel *model = two_key_train(runs->task, &how, opt->seed + (uint64_t)s,
                                       &runs->bad_step[i][s]);
    if (model != NULL)
        two_key_evaluate(model, runs->held_out, NULL, &runs->correct[i][s]);
    if (s == 0)
        runs->first_models[i] = model;
    else
        two_key_free(model);
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
    Rng rng = rng_new(0);   /* for the sizes only */
    TwoKeyModel *plain = two_key_new(opt->countries, opt->countries, opt->num_hiddens, 1, &rng);
    printf("The model reads the query as ONE vector, the two countries' embeddings\n"
           "side by side, and attends over the %d entries with H heads of size %d / H;\n"
           "a linear readout gives both capitals (common/learn/two_key_model.h).\n"
           "Whatever H, it has num_hiddens %d and %zu parameters.", opt->pairs, opt->num_hiddens,
           opt->num_hiddens, parameters_count(plain->params, plain->num_params));
    two_key_free(plain);
    if (opt->mlp > 0) {
        TwoKeyModel *mlp = two_key_new_mlp(opt->countries, opt->countries, opt->num_hiddens, 1,
                                           opt->mlp, &rng);
        printf("\nWith --mlp, each is also trained with a residual MLP of %d ReLU units\n"
               "between the attention and the readout, as a Transformer block has one:\n"
               "%zu parameters.", opt->mlp, parameters_count(mlp->params, mlp->num_params));
        two_key_free(mlp);
    }
    printf("\n\nTraining: %d Adam steps of %d examples, lr %g, the same batches for every\n"
           "model of a seed; held-out: %d examples, none of them trained on.\n\n", opt->steps,
           opt->batch, (double)opt->lr, opt->examples);
}

/* ---- Part 2 -------------------------------------------------------------------- */

/* One row of the table: head count i over the seeds. */
static void print_row(const Options *opt, const Runs *runs, int i, double N)
{
    const int H = row_heads(opt, i), S = opt->seeds;
    double both[MAX_SEEDS], better[MAX_SEEDS], other[MAX_SEEDS];
    for (int s = 0; s < S; s++) {
        const TwoKeyCorrect *c = &runs->correct[i][s];
        both[s] = c->pairs / N;
        better[s] = (c->first > c->second ? c->first : c->second) / N;
        other[s] = (c->first > c->second ? c->second : c->first) / N;
    }
    const SeedSummary sum = seeds_summary(both, S, SUCCESS);
    char count[32];
    snprintf(count, sizeof count, "%d of %d", sum.succeeded, S);
    printf("  %5d  %9d  %9s  %7.1f%%  %6.1f%% to %6.1f%%  %7.1f%%  %7.1f%%\n", H,
           opt->num_hiddens / H, count, 100.0 * sum.median, 100.0 * sum.lowest,
           100.0 * sum.highest, 100.0 * seeds_median(better, S),
           100.0 * seeds_median(other, S));
}

/* The name of row i's models: "2 heads", or "2 heads with the MLP". */
static const char *row_name(const Options *opt, int i, char *buf, size_t len)
{
    const int H = row_heads(opt, i);
    snprintf(buf, len, "%d %s%s", H, plural(H, "head", "heads"),
             row_mlp(opt, i) > 0 ? " with the MLP" : "");
    return buf;
}

/* The seeds of row i on the less common side of SUCCESS, if any: those
 * below it when most succeed, those above it when most fail. */
static void print_exceptions(const Options *opt, const Runs *runs, int i, double N)
{
    int failed = 0;
    for (int s = 0; s < opt->seeds; s++)
        failed += runs->correct[i][s].pairs / N < SUCCESS;
    const bool list_failed = 2 * failed <= opt->seeds;
    if (failed == 0 || failed == opt->seeds)
        return;
    char name[64];
    printf("  %s %.0f%% with %s:", list_failed ? "below" : "at least", 100.0 * SUCCESS,
           row_name(opt, i, name, sizeof name));
    int shown = 0;
    for (int s = 0; s < opt->seeds; s++) {
        const double both = runs->correct[i][s].pairs / N;
        if ((both < SUCCESS) != list_failed)
            continue;
        printf("%s seed %llu (%.1f%%)", shown % 4 == 0 ? "\n   " : ",",
               (unsigned long long)(opt->seed + (uint64_t)s), 100.0 * both);
        shown++;
    }
    printf("\n");
}

/* Train every head count from every seed and print the table; models[i]
 * keeps the first seed's model of head count i for part 3. Returns 0, or
 * the exit status after one line on stderr when a loss was not a number. */
static int part2_table(const Options *opt, const Task *task, const TaskBatch *held_out,
                        TwoKeyModel **models)
{
    const double N = held_out->batch_size;
    const int P = opt->pairs;
    Runs *runs = checked_calloc(1, sizeof *runs);
    *runs = (Runs){.opt = opt, .task = task, .held_out = held_out};
    fflush(stdout);
    seeds_run(opt->num_rows * opt->seeds, opt->threads, run_job, runs);
    for (int i = 0; i < opt->num_rows; i++)
        models[i] = runs->first_models[i];
    char name[64];
    for (int i = 0; i < opt->num_rows; i++)
        for (int s = 0; s < opt->seeds; s++)
            if (runs->bad_step[i][s] != 0) {
                const int status = fail("%s, seed %llu: the loss stopped being a number at "
                                        "step %d; try a smaller --lr",
                                        row_name(opt, i, name, sizeof name),
                                        (unsigned long long)(opt->seed + (uint64_t)s),
                                        runs->bad_step[i][s]);
                free(runs);
                return status;
            }
    printf("Part 2. Held-out accuracy over %d %s (%llu to %llu)\n\n", opt->seeds,
           plural(opt->seeds, "seed", "seeds"), (unsigned long long)opt->seed,
           (unsigned long long)(opt->seed + (uint64_t)opt->seeds - 1));
    printf("                                 both capitals right          one capital right\n"
           "  heads  head size  succeeded    median   lowest to highest    better     other\n");
    for (int i = 0; i < opt->num_rows; i++) {
        if (opt->mlp > 0 && i % opt->num_counts == 0)
            printf("  %s\n", i == 0 ? "linear readout:" : "with the MLP:");
        print_row(opt, runs, i, N);
    }
    printf("  (succeeded: both right on at least %.0f%% of the held-out examples; one\n"
           "  capital right: each model's better answer and its other one, medians)\n",
           100.0 * SUCCESS);
    printf("  chance: two different capitals of the example, drawn at random, are both\n"
           "  right 1 time in %d (%.1f%%); one capital 1 time in %d (%.1f%%)\n",
           P * (P - 1), 100.0 / (P * (P - 1)), P, 100.0 / P);
    for (int i = 0; i < opt->num_rows; i++)
        print_exceptions(opt, runs, i, N);
    if (!opt->seeds_given)
        printf("  (%d seeds by default, a quick look; the chapter's table is --seeds 16)\n",
               opt->seeds);
    printf("\n");
    free(runs);
    return 0;
}

/* ---- Part 3 -------------------------------------------------------------------- */

/* Where model's heads look on held-out example 0: a (H, P) heatmap. */
static int show_heads(const Options *opt, const TwoKeyModel *model, const TaskBatch *example)
{
    const int H = model->num_heads, P = opt->pairs;
    Tensor *weights = NULL;   /* (1, H, 1, P) */
    Tensor *logits = two_key_forward(model, example, NULL, &weights, NULL);
    tensor_reshape(weights, SHAPE(H, P));
    const bool mlp = model->mlp_hiddens > 0;
    char title[80];
    snprintf(title, sizeof title, "%d %s%s: heads down, entries across", H,
             plural(H, "head", "heads"), mlp ? " with the MLP" : "");
    printf("\n");
    heatmap_terminal(stdout, weights, title);
    int status = 0;
    if (opt->plot_dir != NULL) {
        char name[64];
        snprintf(name, sizeof name, "two_keys_%d_heads%s", H, mlp ? "_mlp" : "");
        status = plot_heatmaps(opt->plot_dir, name, weights, "entry", "head", NULL);
        if (status == 0)
            printf("wrote %s/%s.dat and %s/%s.gp (render: gnuplot %s/%s.gp)\n", opt->plot_dir,
                   name, opt->plot_dir, name, opt->plot_dir, name);
    }
    TENSOR_FREE(weights, logits);
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
    for (int i = 0; i < opt->num_rows && status == 0; i++)
        status = show_heads(opt, models[i], example);
    task_batch_free(example);
    return status;
}

/* ---- Part 4 -------------------------------------------------------------------- */

static void part4_by_hand(const Options *opt, const TaskBatch *held_out)
{
    printf("\nPart 4. One head, set by hand\n\n");
    if (opt->num_hiddens < opt->countries) {
        printf("  (the hand-set head gives each country and capital an axis of its own: it\n"
               "  needs --hiddens at least --countries)\n");
        return;
    }
    Rng rng = rng_new(0);   /* every parameter is overwritten */
    TwoKeyModel *model = two_key_new(opt->countries, opt->countries, opt->num_hiddens, 1, &rng);
    two_key_set_by_hand(model);
    TwoKeyCorrect c;
    two_key_evaluate(model, held_out, NULL, &c);
    const double N = held_out->batch_size;
    printf("  The same model with 1 head, its weights written by two_key_set_by_hand()\n"
           "  (common/learn/two_key_model.c): half the weight on each of the two entries\n"
           "  the query names, their capitals' blend read out for both answers, and the\n"
           "  tie broken by a fixed order of capitals. On the same held-out examples:\n"
           "  both capitals right %.1f%%, the first %.1f%%, the second %.1f%%\n",
           100.0 * c.pairs / N, 100.0 * c.first / N, 100.0 * c.second / N);
    two_key_free(model);
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    int status = check_memory(&opt);
    if (status != 0)
        return status;
    Task task = task_two_keys(opt.pairs, opt.countries, opt.countries);
    TaskBatch *held_out = task_examples(&task, opt.examples, SPLIT_HELDOUT, opt.seed);

    part1_task(&opt, &task, held_out);
    TwoKeyModel *models[MAX_ROWS] = {NULL};
    status = part2_table(&opt, &task, held_out, models);
    if (status == 0)
        status = part3_heads(&opt, &task, held_out, models);
    if (status == 0 && opt.mlp == 0)
        part4_by_hand(&opt, held_out);
    for (int i = 0; i < opt.num_rows; i++)
        two_key_free(models[i]);
    task_batch_free(held_out);
    return status;
}
