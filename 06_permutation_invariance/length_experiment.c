/* length_experiment.c - trained at L, measured at L, 2L, 4L. See length_experiment.h. */
#include "length_experiment.h"

#include <math.h>
#include <stdlib.h>

#include "learn/optim.h"
#include "learn/seeds.h"
#include "learn/training.h"
#include "memory.h"
#include "random.h"

const char *const length_task_names[LENGTH_TASKS] = {"k back", "reversal"};

/* Each use of randomness draws from its own stream of the seed: the
 * parameters, the batches (the training loop's) and the held-out set from
 * random.h's, the check set from one of its own. */
enum { STREAM_CHECK = 5 };

/* The answers of a batch of task_reversal sequences for the task asked:
 * reversal keeps them; "k back" puts the token k places back at t >= k. */
static void set_answers(LengthTask task, int back, TaskBatch *batch)
{
    if (task == LENGTH_TASK_REVERSE)
        return;
    const int T = batch->num_pairs;
    for (int b = 0; b < batch->batch_size; b++)
        for (int t = 0; t < T; t++)
            batch->answers[b * T + t] = t >= back ? batch->keys[b * T + t - back] : -1;
}

int length_first_scored(LengthTask task, int back)
{
    return task == LENGTH_TASK_BACK ? back : 0;
}

double length_chance(LengthTask task, int back, int T)
{
    if (task == LENGTH_TASK_REVERSE)
        return 1.0 / (T - 1);
    double chance = 0.0;
    for (int t = back; t < T; t++)
        chance += 1.0 / t / (T - back);
    return chance;
}

/* The key that holds the answer of query t in a sequence of T tokens. */
static int right_key(LengthTask task, int back, int T, int t)
{
    return task == LENGTH_TASK_BACK ? t - back : T - 1 - t;
}

double length_right_key_weight(const PositionModel *model, const TaskBatch *set,
                               LengthTask task, int back)
{
    const int B = set->batch_size, T = set->num_pairs, H = model->num_heads;
    const int first = length_first_scored(task, back);
    Tensor *weights = NULL;   /* (B, H, T, T) */
    Tensor *logits = position_model_forward(model, set->keys, B, T, 0, &weights, NULL);
    double sum = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = first; t < T; t++)
                sum += AT4(weights, b, h, t, right_key(task, back, T, t));
    TENSOR_FREE(weights, logits);
    return sum / ((double)B * H * (T - first));
}

/* One run's training, as the loop of learn/training.h sees it: the model
 * (its step scores from position first on), the batches (task_reversal's
 * sequences with the run's answers: a draw of its own), and the stopping
 * rule's check set and count. */
typedef struct {
    const LengthSetup *setup;
    LengthRun *run;
    PositionModel *model;
    int first;
    Task task;
    TaskBatch *batch, *check;
    double best;
    int checks_without_rise;
} LengthTraining;

static void draw_batch(void *state, Rng *rng)
{
    LengthTraining *s = state;
    task_draw(&s->task, s->batch, SPLIT_TRAIN, rng);
    set_answers(s->run->task, s->setup->back, s->batch);
}

static double train_step(void *state, Adam *adam, const void *batch, int *correct)
{
    (void)correct;
    const LengthTraining *s = state;
    const TaskBatch *b = batch;
    return position_model_train_step(s->model, adam, b->keys, b->answers, b->batch_size,
                                     b->num_pairs, s->first);
}

/* After each step: every LENGTH_CHECK_EVERY steps the check set's
 * accuracy; the run is done once it has not risen for setup->patience
 * checks, and diverged when the loss stops being a number. */
static TrainingStatus check_stalled(void *state, int step, double loss, int correct)
{
    (void)correct;
    LengthTraining *s = state;
    LengthRun *run = s->run;
    run->steps = step;
    run->diverged = !isfinite(loss);
    if (step % LENGTH_CHECK_EVERY == 0) {
        const double accuracy = position_model_accuracy(s->model, s->check->keys,
                                                        s->check->answers,
                                                        s->check->batch_size,
                                                        s->check->num_pairs, s->first);
        s->checks_without_rise++;
        if (accuracy > s->best) {
            s->checks_without_rise = 0;
            s->best = accuracy;
            run->best_step = step;
        }
    }
    if (run->diverged)
        return TRAINING_DIVERGED;
    return s->checks_without_rise < s->setup->patience ? TRAINING_GOES_ON : TRAINING_DONE;
}

/* Adam steps on fresh batches of length L (the seed's RNG_BATCHES stream)
 * until the check set's accuracy has not risen for setup->patience checks,
 * or setup->steps; fills run->steps, run->best_step and run->diverged. */
static void train_until_stalled(const LengthSetup *setup, PositionModel *model, LengthRun *run)
{
    LengthTraining s = {setup, run, model, length_first_scored(run->task, setup->back),
                        task_reversal(setup->length, setup->letters), .best = -1.0};
    s.batch = task_batch_new(&s.task, setup->batch_size);
    s.check = task_batch_new(&s.task, setup->examples);
    Rng check_rng = rng_new_stream(run->seed, STREAM_CHECK);
    task_draw(&s.task, s.check, SPLIT_TRAIN, &check_rng);
    set_answers(run->task, setup->back, s.check);
    Adam *adam = adam_new(model->params, model->num_params, setup->lr);
    const BatchDraw batches = {&s, draw_batch, s.batch};
    const TrainingPlan plan = {.seed = run->seed, .first_step = 1, .last_step = setup->steps,
                               .batches = BATCH_STREAM, .draw = &batches};
    const Trainee trainee = {&s, adam, train_step, NULL};
    const TrainingWatch watch = {&s, NULL, check_stalled, NULL};
    run->steps = 0;
    training_loop(&trainee, &plan, &watch);
    task_batch_free(s.check);
    task_batch_free(s.batch);
    adam_free(adam);
}

/* seeds_run's job j: run j of the experiment */
static void train_and_score(void *arg, int j)
{
    LengthExperiment *e = arg;
    const LengthSetup *setup = &e->setup;
    LengthRun *run = &e->runs[j];
    const int S = setup->seeds;
    *run = (LengthRun){.task = (LengthTask)(j / (POSITION_SCHEMES * S)),
                       .scheme = (PositionScheme)(j / S % POSITION_SCHEMES),
                       .seed = setup->seed + (uint64_t)(j % S)};
    Rng init = rng_use(run->seed, RNG_PARAMETERS);
    /* rows for 4L positions: the learned table has them, trained or not */
    PositionModel *model = position_model_new(setup->letters, setup->num_hiddens,
                                              setup->num_heads, run->scheme, 4 * setup->length,
                                              run->task == LENGTH_TASK_BACK, &init);
    train_until_stalled(setup, model, run);
    const int first = length_first_scored(run->task, setup->back);
    for (int i = 0; i < LENGTH_SIZES && !run->diverged; i++) {
        const TaskBatch *h = e->held_out[run->task][i];
        run->accuracy[i] = position_model_accuracy(model, h->keys, h->answers, h->batch_size,
                                                   h->num_pairs, first);
        run->right_key[i] = length_right_key_weight(model, h, run->task, setup->back);
    }
    if (j % S == 0)
        run->model = model;
    else
        position_model_free(model);
}

LengthExperiment *length_experiment_run(const LengthSetup *setup)
{
    LengthExperiment *e = checked_calloc(1, sizeof *e);
    e->setup = *setup;
    for (int i = 0; i < LENGTH_SIZES; i++) {
        /* the same sequences for both tasks, only the answers differ */
        Task task = task_reversal(setup->length << i, setup->letters);
        Rng rng = rng_use(setup->seed, RNG_HELDOUT);
        for (int t = 0; t < LENGTH_TASKS; t++) {
            e->held_out[t][i] = task_batch_new(&task, setup->examples);
            Rng same = rng;
            task_draw(&task, e->held_out[t][i], SPLIT_HELDOUT, &same);
            set_answers((LengthTask)t, setup->back, e->held_out[t][i]);
        }
    }
    e->count = LENGTH_TASKS * POSITION_SCHEMES * setup->seeds;
    e->runs = checked_calloc((size_t)e->count, sizeof *e->runs);
    seeds_run(e->count, setup->num_threads, train_and_score, e);
    return e;
}

void length_experiment_free(LengthExperiment *e)
{
    if (e == NULL)
        return;
    for (int j = 0; j < e->count; j++)
        position_model_free(e->runs[j].model);
    free(e->runs);
    for (int t = 0; t < LENGTH_TASKS; t++)
        for (int i = 0; i < LENGTH_SIZES; i++)
            task_batch_free(e->held_out[t][i]);
    free(e);
}

/* One number of each of a task and scheme's S runs, summed up against a line. */
static SeedSummary runs_summary(const LengthExperiment *e, LengthTask task,
                                PositionScheme scheme, double (*number)(const LengthRun *, int),
                                int size, double line)
{
    const int S = e->setup.seeds;
    double *values = checked_calloc((size_t)S, sizeof *values);
    for (int s = 0; s < S; s++)
        values[s] = number(&e->runs[((int)task * POSITION_SCHEMES + (int)scheme) * S + s], size);
    const SeedSummary summary = seeds_summary(values, S, line);
    free(values);
    return summary;
}

static double run_accuracy(const LengthRun *run, int size) { return run->accuracy[size]; }
static double run_right_key(const LengthRun *run, int size) { return run->right_key[size]; }
static double run_steps(const LengthRun *run, int size)
{
    (void)size;
    return run->steps;
}

SeedSummary length_summary(const LengthExperiment *e, LengthTask task, PositionScheme scheme,
                           int size, double success)
{
    return runs_summary(e, task, scheme, run_accuracy, size, success);
}

SeedSummary length_right_key_summary(const LengthExperiment *e, LengthTask task,
                                     PositionScheme scheme, int size)
{
    return runs_summary(e, task, scheme, run_right_key, size, 1.0);
}

SeedSummary length_steps_summary(const LengthExperiment *e, LengthTask task,
                                 PositionScheme scheme)
{
    return runs_summary(e, task, scheme, run_steps, 0, e->setup.steps);
}

/* model, held_out (B, T) -> the weights (T, T) averaged over sequences and heads */
Tensor *position_model_mean_weights(const PositionModel *model, const TaskBatch *held_out)
{
    const int B = held_out->batch_size, T = held_out->num_pairs, H = model->num_heads;
    Tensor *weights = NULL;   /* (B, H, T, T) */
    Tensor *logits = position_model_forward(model, held_out->keys, B, T, 0, &weights, NULL);
    Tensor *mean = tensor_zeros(SHAPE(T, T));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (size_t i = 0; i < mean->size; i++)
                mean->data[i] += weights->data[((size_t)b * H + h) * T * T + i] / (float)(B * H);
    TENSOR_FREE(weights, logits);
    return mean;
}
