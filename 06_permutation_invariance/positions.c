/*
 * positions - chapter 06's theorem as a failure to learn: the same small
 * self-attention model trained to reverse sequences, without and with the
 * sinusoidal positional encoding.
 *
 * Part 1: the task, a held-out example, and the model.
 * Part 2: train both models from the same initial parameters on the same
 *         batches, for several seeds; a table of held-out accuracy beside
 *         what a guess that cannot see order gets.
 * Part 3: one held-out sequence, reversed by both models, and where each
 *         one's queries look: with positions, the anti-diagonal.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, V = vocabulary.
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
#include "learn/reversal_model.h"
#include "learn/seeds.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "tensor.h"

static const char PROG[] = "positions";

/* Sequences fit a terminal heatmap; the held-out set is evaluated in one
 * batch, a few hundred MB at the largest sizes. */
/* A run succeeds when this share of the held-out tokens is in place. */
static const double SUCCESS = 0.99;

enum { MAX_LENGTH = HEATMAP_TERMINAL_MAX, MAX_SEEDS = 64, MAX_HIDDENS = 128, MAX_HEADS = 8,
       MAX_EXAMPLES = 5000 };


typedef struct {
    uint64_t seed;
    int length, letters, num_hiddens, num_heads, steps, batch, seeds, examples;
    float lr;
    const char *plot_dir;
} Options;

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .length = 8, .letters = 16, .num_hiddens = 32, .num_heads = 1,
                   .steps = 400, .batch = 32, .seeds = 3, .examples = 1000, .lr = 0.01f};
    const CliOption options[] = {
        {"--length", CLI_INT, &opt.length, .min = 2, .max = MAX_LENGTH, .metavar = "T",
         .help = "tokens per sequence"},
        {"--letters", CLI_INT, &opt.letters, .min = 2, .max = TASK_MAX_LETTERS, .metavar = "V",
         .help = "letters to draw from, at least T"},
        {"--hiddens", CLI_INT, &opt.num_hiddens, .min = 2, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.num_heads, .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads, dividing D", .splits = &opt.num_hiddens},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 100000, .metavar = "N",
         .help = "Adam steps per model"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 4096, .metavar = "B",
         .help = "sequences per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "seeds per model (parameters, batches)"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S",
         .help = "the first seed, and the held-out set's"},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = MAX_EXAMPLES, .metavar = "N",
         .help = "held-out sequences"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write DIR/positions_attention.{dat,gp}"},
    };
    *done = cli_parse(&(CliTable){PROG, "Self-attention learns to reverse sequences only when it is "
                                  "told the positions.", CLI_COUNT(options), options},
                      argc, argv);
    if (*done != CLI_RUN)
        return opt;
    if (opt.letters < opt.length)
        cli_fail(PROG, "--letters %d is fewer than --length %d: a sequence holds %d different "
                 "letters", opt.letters, opt.length, opt.length);
    return opt;
}

/* The memory of a run's sizes: 0, or the exit status after one line. */
static int check_memory(const Options *opt)
{
    char detail[96];
    snprintf(detail, sizeof detail, "%d sequences of %d tokens a step, %d held out",
             opt->batch, opt->length, opt->examples);
    return memory_require(reversal_bytes_needed(opt->letters, opt->length, opt->num_hiddens,
                                                opt->num_heads, opt->batch, opt->examples),
                          detail, "use a smaller --batch, --examples or --hiddens");
}

/* ---- training ------------------------------------------------------------------ */

/* What watches one model's steps: the progress line, a line that
 * rewrites itself on a terminal and nothing otherwise (the table's rows
 * are the progress then), on stderr so stdout stays the same; and a loss
 * that stops being a number, which ends the run with a message. */
typedef struct {
    const char *what;
    bool terminal;
    int steps;
    int status;   /* fail's, once the loss stopped being a number */
} Progress;

static TrainingStatus after_step(void *state, int step, double loss, int correct)
{
    (void)correct;
    Progress *p = state;
    if (!isfinite(loss)) {
        p->status = fail("%s: the loss became %g at step %d; try a smaller --lr", p->what, loss,
                         step);
        return TRAINING_DIVERGED;
    }
    if (p->terminal && (step % 10 == 0 || step == p->steps)) {
        fprintf(stderr, "\r  %s: step %5d of %d, loss %.4f  ", p->what, step, p->steps, loss);
        if (step == p->steps)
            fprintf(stderr, "\r%*s\r", 60, "");
    }
    return TRAINING_GOES_ON;
}

/* One model trained from seed's initial parameters on seed's batches, by
 * the loop of learn/training.h. The two models of a seed differ only in
 * positions: *out, and 0; or *out NULL and the exit status when the loss
 * stops being a number (a line says so). */
static int train(const Options *opt, const Task *task, bool positions, uint64_t seed,
                 ReversalModel **out)
{
    Rng init = rng_use(seed, RNG_PARAMETERS);
    ReversalModel *model = reversal_new(opt->letters, opt->num_hiddens, opt->num_heads, positions,
                                        &init);
    Adam *adam = adam_new(model->params, REVERSAL_NUM_PARAMS, opt->lr);
    char what[64];
    snprintf(what, sizeof what, "%s positions, seed %llu", positions ? "with" : "without",
             (unsigned long long)seed);
    Progress progress = {what, isatty(STDERR_FILENO), opt->steps, 0};
    const Trainee trainee = reversal_trainee(model, adam);
    const TrainingPlan plan = {.task = task, .seed = seed, .first_step = 1,
                               .last_step = opt->steps, .batch_size = opt->batch,
                               .batches = BATCH_STREAM};
    const TrainingWatch watch = {&progress, NULL, after_step, NULL};
    training_loop(&trainee, &plan, &watch);   /* ends early only on progress.status */
    if (progress.status != 0) {
        reversal_free(model);
        model = NULL;
    }
    adam_free(adam);
    *out = model;
    return progress.status;
}

static double accuracy(const ReversalModel *model, const TaskBatch *held_out)
{
    int correct = 0;
    reversal_evaluate(model, held_out, &correct);
    return (double)correct / ((double)held_out->batch_size * held_out->num_pairs);
}

/* ---- Part 1 -------------------------------------------------------------------- */

static void part1_task(const Options *opt, const Task *task, const TaskBatch *held_out)
{
    const int T = opt->length;
    printf("Positions, learned: reversing a sequence\n\n"
           "Part 1. The task and the model\n\n"
           "A sequence is %d different letters out of %d; the answer at position t is\n"
           "the letter at position %d - t. A held-out example:\n\n    ", T, opt->letters, T - 1);
    task_print_sequence(stdout, task, held_out->keys, T);
    printf("  ->  ");
    task_print_sequence(stdout, task, held_out->answers, T);
    printf("\n\nThe model: embed_tokens (%d, %d), optionally + the positional encoding\n"
           "PE[:%d] (common/positional.c), self-attention with %d head%s (num_hiddens %d,\n"
           "no biases), readout %d -> %d. Both models start from the same parameters\n"
           "and see the same batches: %d Adam steps of %d sequences, lr %g. Held-out:\n"
           "%d sequences, none of them trained on.\n\n", opt->letters, opt->num_hiddens, T,
           opt->num_heads, plural(opt->num_heads, "", "s"), opt->num_hiddens, opt->num_hiddens,
           opt->letters, opt->steps, opt->batch, (double)opt->lr, opt->examples);
}

/* ---- Part 2 -------------------------------------------------------------------- */

/* Train both models for every seed and print the table; models[0] and
 * models[1] keep the first seed's two models for part 3. Returns 0, or the
 * exit status when a training broke down. */
static int part2_table(const Options *opt, const Task *task, const TaskBatch *held_out,
                        ReversalModel **models)
{
    printf("Part 2. Held-out accuracy over %d %s (%llu to %llu), the share of tokens\n"
           "put in the right place\n\n"
           "                       succeeded    median   lowest to highest\n", opt->seeds,
           plural(opt->seeds, "seed", "seeds"), (unsigned long long)opt->seed,
           (unsigned long long)(opt->seed + (uint64_t)opt->seeds - 1));
    for (int with = 0; with < 2; with++) {
        double acc[MAX_SEEDS];
        for (int s = 0; s < opt->seeds; s++) {
            ReversalModel *model;
            const int status = train(opt, task, with, opt->seed + (uint64_t)s, &model);
            if (status != 0)
                return status;
            acc[s] = accuracy(model, held_out);
            if (s == 0)
                models[with] = model;
            else
                reversal_free(model);
        }
        const SeedSummary sum = seeds_summary(acc, opt->seeds, SUCCESS);
        char count[32];
        snprintf(count, sizeof count, "%d of %d", sum.succeeded, opt->seeds);
        printf("  %-19s  %9s  %7.1f%%  %6.1f%% to %6.1f%%\n",
               with ? "with positions" : "without positions", count, 100.0 * sum.median,
               100.0 * sum.lowest, 100.0 * sum.highest);
    }
    printf("  (succeeded: at least %.0f%% of the held-out tokens in the right place)\n",
           100.0 * SUCCESS);
    /* What a model that sees which letters are there, but not where, can
     * do: position t's answer is one of the other T - 1 letters, each as
     * likely; when T is odd the middle letter is its own answer, and
     * nothing tells the middle apart, so all T letters are as likely. */
    const int T = opt->length, choices = T % 2 == 0 ? T - 1 : T;
    printf("  guessing among the %s%d letters of the sequence: %.1f%%\n\n",
           T % 2 == 0 ? "other " : "", choices, 100.0 / choices);
    return 0;
}

/* ---- Part 3 -------------------------------------------------------------------- */

/* The model's answer for the first held-out sequence, as letters. */
static void print_answer(const char *label, const ReversalModel *model, const Task *task,
                         const TaskBatch *held_out, Tensor **weights)
{
    const int T = held_out->num_pairs, V = model->vocab;
    TaskBatch *one = task_batch_example(held_out, 0);
    Tensor *logits = reversal_forward(model, one, weights, NULL);
    int predicted[MAX_LENGTH], right = 0;
    for (int t = 0; t < T; t++) {
        const float *row = &AT3(logits, 0, t, 0);
        predicted[t] = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > row[predicted[t]])
                predicted[t] = v;
        right += predicted[t] == one->answers[t];
    }
    printf("  %-18s", label);
    task_print_sequence(stdout, task, predicted, T);
    printf("   (%d of %d right)\n", right, T);
    tensor_free(logits);
    task_batch_free(one);
}

/* The mean over held-out sequences, heads and positions t of the weight
 * query t puts on key T-1-t. */
static double mirror_weight(const ReversalModel *model, const TaskBatch *held_out)
{
    const int B = held_out->batch_size, T = held_out->num_pairs, H = model->num_heads;
    Tensor *weights = NULL;   /* (B, H, T, T) */
    Tensor *logits = reversal_forward(model, held_out, &weights, NULL);
    double sum = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                sum += AT4(weights, b, h, t, T - 1 - t);
    TENSOR_FREE(weights, logits);
    return sum / ((double)B * H * T);
}

/* panels (2 * H, T, T) as DIR/positions_attention.{dat,gp}: 0, or the exit
 * status. */
static int plot_panels(const char *dir, const Tensor *panels, const char *const *titles)
{
    const int status = plot_heatmaps(dir, "positions_attention", panels, "key position",
                                     "query position", titles);
    if (status != 0)
        return status;
    printf("\nwrote %s/positions_attention.dat and %s/positions_attention.gp "
           "(render: gnuplot %s/positions_attention.gp)\n", dir, dir, dir);
    return 0;
}

static int part3_heatmaps(const Options *opt, const Task *task, const TaskBatch *held_out,
                          ReversalModel *const *models)
{
    const int T = opt->length, H = opt->num_heads;
    printf("Part 3. One held-out sequence, and where the queries look (seed %llu)\n\n",
           (unsigned long long)opt->seed);
    printf("  %-18s", "sequence");
    task_print_sequence(stdout, task, held_out->keys, T);
    printf("\n  %-18s", "reversed");
    task_print_sequence(stdout, task, held_out->answers, T);
    printf("\n");
    Tensor *weights[2];   /* (1, H, T, T) each */
    print_answer("without positions", models[0], task, held_out, &weights[0]);
    print_answer("with positions", models[1], task, held_out, &weights[1]);

    /* every head of both models, queries down and keys across */
    Tensor *panels = tensor_zeros(SHAPE(2, H, T, T));
    char title_text[2 * MAX_HEADS][64];
    const char *titles[2 * MAX_HEADS];
    for (int with = 0; with < 2; with++)
        for (int h = 0; h < H; h++) {
            const int p = with * H + h;
            float *panel = panels->data + (size_t)p * T * T;
            memcpy(panel, &AT4(weights[with], 0, h, 0, 0), (size_t)T * T * sizeof(float));
            snprintf(title_text[p], 64, "%s positions, head %d", with ? "with" : "without", h);
            titles[p] = title_text[p];
            Tensor *matrix = tensor_from(panel, SHAPE(T, T));
            printf("\n");
            heatmap_terminal(stdout, matrix, title_text[p]);
            tensor_free(matrix);
        }
    printf("\nRows are positions asking (queries), columns positions answering (keys).\n"
           "Without positions a query can only ask for letters, not places; with them,\n"
           "position t looks at position %d - t: the anti-diagonal. The weight a query\n"
           "puts on its mirror position, averaged over the held-out sequences and the\n"
           "heads: %.3f without positions, %.3f with (1/%d = %.3f is an even spread).\n",
           T - 1, mirror_weight(models[0], held_out), mirror_weight(models[1], held_out), T,
           1.0 / T);
    const int status = opt->plot_dir != NULL ? plot_panels(opt->plot_dir, panels, titles) : 0;
    TENSOR_FREE(panels, weights[0], weights[1]);
    return status;
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
    Task task = task_reversal(opt.length, opt.letters);
    TaskBatch *held_out = task_examples(&task, opt.examples, SPLIT_HELDOUT, opt.seed);

    part1_task(&opt, &task, held_out);
    ReversalModel *models[2] = {NULL, NULL};
    status = part2_table(&opt, &task, held_out, models);
    if (status == 0)
        status = part3_heatmaps(&opt, &task, held_out, models);
    reversal_free(models[0]);
    reversal_free(models[1]);
    task_batch_free(held_out);
    return status;
}
