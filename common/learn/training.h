/*
 * training.h - the one training loop the small models are trained by (the
 * language model's program writes its own, as llm.c's main does), and
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
 * watches the steps (TrainingWatch). Its users, and what they hand it:
 *   05_multihead/train        the dictionary, a stream per step (BATCH_OF_STEP); the
 *                             progress line, divergence guard and signals
 *                             (run/training_run.h)
 *   decode --sharing          the dictionary, a stream per step; no watch
 *   two_key_train             two keys; stops at a loss that is not a number
 *   06's positions            reversal; the progress line, and stops at a loss
 *                             that is not a number
 *   length_experiment         reversal with the answers it asks for (a BatchDraw
 *                             of its own); stops once a check set's accuracy
 *                             no longer rises
 *   induction_experiment      repeating sequences, not a task (a BatchDraw of
 *                             its own); records each step's two part losses
 */
#ifndef TRAINING_H
#define TRAINING_H

#include <stdbool.h>
#include <stdint.h>

#include "learn/optim.h"
#include "learn/tasks.h"
#include "random.h"

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

/* The generator a step's batch is drawn from (a task's batches: from its
 * training split only). */
typedef enum {
    BATCH_OF_STEP,   /* step s's batch from its own stream, rng_step(seed, s): changing
                      * the steps, or going on from a saved step, leaves every batch */
    BATCH_STREAM,    /* one stream, rng_use(seed, RNG_BATCHES), drawn from the first
                      * step on, one batch after the other */
} BatchSource;

/* A run's own batches, for a run whose batches are not a task's examples
 * as task_draw gives them (induction heads' repeating sequences; a task
 * whose answers the run rewrites): draw fills the batch from rng (the
 * generator BatchSource names), state holding what it needs; the
 * trainee's step then reads batch. */
typedef struct {
    void *state;
    void (*draw)(void *state, Rng *rng);
    const void *batch;
} BatchDraw;

/* What the loop runs: steps first_step to last_step, each on a batch of
 * batch_size examples of task's training split, or, when draw is not
 * NULL, on the batch it draws (task and batch_size are then unused). */
typedef struct {
    const Task *task;
    uint64_t seed;
    int first_step, last_step;
    int batch_size;
    BatchSource batches;
    const BatchDraw *draw;
} TrainingPlan;

/* A model as the loop sees it: its training step (zero the gradients,
 * forward, loss, backward, adam_step; the loss before the update, and
 * *correct, when not NULL, the right answers before it), and its
 * evaluation without gradients (for the watch's last look; may be NULL).
 * model is what the step works on: the model, or a run's state around it;
 * batch is the plan's: a TaskBatch, or its BatchDraw's batch. */
typedef struct {
    void *model;
    Adam *adam;
    double (*step)(void *model, Adam *adam, const void *batch, int *correct);
    double (*evaluate)(const void *model, const void *batch, int *correct);
} Trainee;

/* How a run goes on, or how it ended. */
typedef enum {
    TRAINING_GOES_ON,    /* (after_step) take the next step */
    TRAINING_DONE,       /* every step of the plan, or as many as a stopping rule wanted */
    TRAINING_STOPPED,    /* stopped from outside before a step (a signal) */
    TRAINING_DIVERGED,   /* a loss or an update stopped being a number */
} TrainingStatus;

/* What watches the steps; each member may be NULL. */
typedef struct {
    void *state;
    /* before step s: false stops the run (a signal came): TRAINING_STOPPED */
    bool (*before_step)(void *state, int step);
    /* after step s, its loss and right answers: TRAINING_GOES_ON, or how
     * the run ends (DONE: a stopping rule; DIVERGED) */
    TrainingStatus (*after_step)(void *state, int step, double loss, int correct);
    /* after a run that took every step of its plan, when the trainee can
     * evaluate: the loss the last update's parameters give on the batch
     * the next step would take (a longer run's next loss); false: that
     * update failed, TRAINING_DIVERGED */
    bool (*after_last)(void *state, double loss);
} TrainingWatch;

/* Runs plan on trainee, watched by watch (NULL: nothing watches), and
 * says how the run ended. */
TrainingStatus training_loop(const Trainee *trainee, const TrainingPlan *plan,
                             const TrainingWatch *watch);

#endif
