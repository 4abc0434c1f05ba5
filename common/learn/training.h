/*
 * training.h - the one training loop every model here is trained by, and
 * the dictionary model's training defaults (introduced in chapter 05's
 * optional section "Attention that learns").
 *
 * A training run, as llm.c's train_gpt2.c ends:
 *
 *     for (step = first; step <= last; step++) {
 *         draw the batch of step;
 *         loss = model's step on it;        zero the grads, forward, backward, Adam
 *         watch it;                         log; stop on a loss that is not a number
 *     }
 *
 * The loop knows no model: it is handed a plain description of the run
 * (TrainingPlan), the model as its training step (Trainee), and what
 * watches the steps (TrainingWatch: 05_multihead/train's progress line,
 * divergence guard and signals, run/training_run.h; a seed experiment's
 * stop at the first loss that is not a number).
 */
#ifndef TRAINING_H
#define TRAINING_H

#include <stdbool.h>
#include <stdint.h>

#include "learn/optim.h"
#include "learn/tasks.h"

/* The dictionary model's training (05_multihead/train), the one place its
 * defaults are written: train, train_bench and decode --sharing start from
 * these. */
typedef struct {
    int countries, pairs;         /* Vk = Vv, P */
    int num_hiddens, num_heads;   /* D, H */
    int steps, batch_size;
    float lr;
} DictionaryTraining;

#define DICTIONARY_TRAINING \
    ((DictionaryTraining){.countries = 24, .pairs = 8, .num_hiddens = 32, .num_heads = 4, \
                          .steps = 400, .batch_size = 32, .lr = 0.001f})

/* Where the batches come from. Both use the training split only. */
typedef enum {
    BATCH_OF_STEP,   /* step s's batch from its own stream, rng_step(seed, s): changing
                      * the steps, or going on from a saved step, leaves every batch */
    BATCH_STREAM,    /* one stream, rng_use(seed, RNG_BATCHES), drawn from the first
                      * step on, one batch after the other */
} BatchSource;

/* What the loop runs: steps first_step to last_step on batches of
 * batch_size examples of task. */
typedef struct {
    const Task *task;
    uint64_t seed;
    int first_step, last_step;
    int batch_size;
    BatchSource batches;
} TrainingPlan;

/* A model as the loop sees it: its training step (zero the gradients,
 * forward, loss, backward, adam_step; the loss before the update, and
 * *correct, when not NULL, the right answers before it), and its
 * evaluation without gradients (for the watch's last look; may be NULL). */
typedef struct {
    void *model;
    Adam *adam;
    double (*step)(void *model, Adam *adam, const TaskBatch *batch, int *correct);
    double (*evaluate)(const void *model, const TaskBatch *batch, int *correct);
} Trainee;

/* What watches the steps; each member may be NULL. */
typedef struct {
    void *state;
    /* before step s: false stops the run (a signal came) */
    bool (*before_step)(void *state, int step);
    /* after step s, its loss and right answers: false stops the run */
    bool (*after_step)(void *state, int step, double loss, int correct);
    /* after a run that took a step and was not stopped by after_step: the
     * loss the last update's parameters give on the batch the next step
     * would take (a longer run's next loss); false: the run failed */
    bool (*after_last)(void *state, double loss);
} TrainingWatch;

/* Runs plan on trainee, watched by watch (NULL: nothing watches). Returns
 * the steps taken. */
int training_loop(const Trainee *trainee, const TrainingPlan *plan, const TrainingWatch *watch);

#endif
