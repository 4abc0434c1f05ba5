/*
 * length_experiment.h - ways of adding positions, trained at one length
 * and measured at longer ones (chapter 06's page relative_positions.md:
 * parts 4 and 5 of 06_permutation_invariance/relative_positions).
 *
 * Legend: L = the training length, S = seeds, V = letters, T = tokens.
 *
 * Two tasks on task_reversal's sequences of different letters; only the
 * answers differ:
 *   LENGTH_TASK_BACK     the token k places back (causal mask), scored
 *                        from position k on;
 *   LENGTH_TASK_REVERSE  the token at T-1-t (no mask), every position.
 * For each task, each PositionScheme and each seed, one PositionModel is
 * trained at length L and scored on held-out sets of L, 2L and 4L tokens
 * (the same sequences for both tasks, never trained on). Parameters,
 * batches, the check set and held-out sets draw from streams of their own,
 * so a run depends on its seed alone, whatever the number of threads.
 *
 * When training stops: every LENGTH_CHECK_EVERY steps the model's token
 * accuracy is measured on a check set of its own (examples sequences of
 * length L from the training half, drawn apart from the batches; the
 * held-out sets play no part), and training stops once that accuracy has
 * not risen for patience checks in a row, or after steps steps. That is an
 * early-stopping rule, not a proof that a model has stopped learning: a
 * longer patience lets some models go on rising (relative_positions.md
 * shows which numbers move).
 *
 * Beside relative_positions.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef LENGTH_EXPERIMENT_H
#define LENGTH_EXPERIMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "learn/position_model.h"
#include "learn/seeds.h"
#include "learn/tasks.h"
#include "tensor.h"

enum { LENGTH_TASKS = 2, LENGTH_SIZES = 3 };   /* measured at L, 2L, 4L */
typedef enum { LENGTH_TASK_BACK, LENGTH_TASK_REVERSE } LengthTask;
/* "k back", "reversal" */
extern const char *const length_task_names[LENGTH_TASKS];

/* Check every 100 steps. */
enum { LENGTH_CHECK_EVERY = 100 };

typedef struct {
    uint64_t seed;                      /* seeds seed ... seed + seeds - 1 */
    int length, letters, back;          /* L, V (at least 4L), k (below L) */
    int num_hiddens, num_heads;
    int steps;                          /* the most Adam steps a model takes */
    int patience;                       /* checks without a rise before a model stops */
    int batch_size, seeds, examples, num_threads;
    float lr;                           /* Adam's */
} LengthSetup;

/* The page's run (relative_positions --train). */
#define LENGTH_DEFAULTS                                                                     \
    ((LengthSetup){.seed = 0, .length = 6, .letters = 24, .back = 1, .num_hiddens = 32,    \
                   .num_heads = 4, .steps = 4000, .patience = 5, .batch_size = 16,          \
                   .seeds = 4, .examples = 200, .num_threads = 2, .lr = 0.01f})

typedef struct {
    LengthTask task;
    PositionScheme scheme;
    uint64_t seed;
    int steps;                          /* the Adam steps it took (the rule above) */
    int best_step;                      /* the step of its best check (0: no check) */
    double accuracy[LENGTH_SIZES];      /* held-out token accuracy at L, 2L, 4L */
    /* the attention weight on the key that holds the answer (t - k, or
     * T-1-t), averaged over the heads, the scored queries and the held-out
     * sequences, at L, 2L, 4L */
    double right_key[LENGTH_SIZES];
    bool diverged;                      /* the loss stopped being a number */
    PositionModel *model;               /* the first seed's of a task and scheme, else NULL */
} LengthRun;

typedef struct {
    LengthSetup setup;
    TaskBatch *held_out[LENGTH_TASKS][LENGTH_SIZES];   /* examples sequences each */
    LengthRun *runs;   /* (LENGTH_TASKS, POSITION_SCHEMES, S) */
    int count;
} LengthExperiment;

/* Draw the held-out sets, then train and score every run, shared out
 * between num_threads threads (seeds_run). New; length_experiment_free. */
LengthExperiment *length_experiment_run(const LengthSetup *setup);
void length_experiment_free(LengthExperiment *experiment);   /* NULL is fine */

/* The S accuracies of a task and scheme at length index size (L << size)
 * as a success rate, median and range (seeds.h). */
SeedSummary length_summary(const LengthExperiment *experiment, LengthTask task,
                           PositionScheme scheme, int size, double success);
/* The same over the S seeds for the weight on the right key at length
 * index size, and for the steps taken (succeeded: the runs that stopped at
 * the most steps, setup.steps, rather than by the rule). */
SeedSummary length_right_key_summary(const LengthExperiment *experiment, LengthTask task,
                                     PositionScheme scheme, int size);
SeedSummary length_steps_summary(const LengthExperiment *experiment, LengthTask task,
                                 PositionScheme scheme);

/* The first position a task scores: k for "k back", 0 for reversal. */
int length_first_scored(LengthTask task, int back);

/* What a model that sees which letters are there, but not where, gets at
 * length T by guessing among the candidates: for reversal the other T - 1
 * letters; for "k back" at position t the t earlier ones, a mean of 1/t
 * over the scored positions. */
double length_chance(LengthTask task, int back, int T);

/* model, set (B sequences of T) -> the attention weight on the key that
 * holds the answer (t - k for "k back", T-1-t for reversal), averaged over
 * the heads, the scored queries and the sequences. */
double length_right_key_weight(const PositionModel *model, const TaskBatch *set,
                               LengthTask task, int back);

/* model, held_out (B sequences of T) -> the attention weights (T, T)
 * averaged over the sequences and the heads, new. */
Tensor *position_model_mean_weights(const PositionModel *model, const TaskBatch *held_out);

#endif
