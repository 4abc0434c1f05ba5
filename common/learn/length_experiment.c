/* length_experiment.c - trained at L, measured at L, 2L, 4L. See length_experiment.h. */
#include "learn/length_experiment.h"

#include <math.h>
#include <stdlib.h>

#include "error.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "random.h"

const char *const length_task_names[LENGTH_TASKS] = {"k back", "reversal"};

/* Each use of randomness draws from its own stream of the seed. */
enum { STREAM_INIT = 1, STREAM_TRAIN = 2, STREAM_HELDOUT = 3 };

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

/* seeds_run's job j: run j of the experiment */
static void train_and_score(void *arg, int j)
{
    LengthExperiment *e = arg;
    const LengthSetup *setup = &e->setup;
    LengthRun *run = &e->runs[j];
    const int L = setup->length, S = setup->seeds;
    *run = (LengthRun){.task = (LengthTask)(j / (POSITION_SCHEMES * S)),
                       .scheme = (PositionScheme)(j / S % POSITION_SCHEMES),
                       .seed = setup->seed + (uint64_t)(j % S)};
    Rng init = rng_new_stream(run->seed, STREAM_INIT);
    Rng data = rng_new_stream(run->seed, STREAM_TRAIN);
    /* rows for 4L positions: the learned table has them, trained or not */
    PositionModel *model = position_model_new(setup->letters, setup->num_hiddens,
                                              setup->num_heads, run->scheme, 4 * L,
                                              run->task == LENGTH_TASK_BACK, &init);
    Adam *adam = adam_new(model->params, model->num_params, setup->lr);
    Task task = task_reversal(L, setup->letters);
    TaskBatch *batch = task_batch_new(&task, setup->batch_size);
    const int first = length_first_scored(run->task, setup->back);
    for (int step = 1; step <= setup->steps && !run->diverged; step++) {
        task_draw(&task, batch, SPLIT_TRAIN, &data);
        set_answers(run->task, setup->back, batch);
        const double loss = position_model_train_step(model, adam, batch->keys, batch->answers,
                                                      setup->batch_size, L, first);
        run->diverged = !isfinite(loss);
    }
    for (int i = 0; i < LENGTH_SIZES; i++) {
        const TaskBatch *h = e->held_out[run->task][i];
        run->accuracy[i] = run->diverged ? 0.0
                                         : position_model_accuracy(model, h->keys, h->answers,
                                                                   h->batch_size, h->num_pairs,
                                                                   first);
    }
    task_batch_free(batch);
    adam_free(adam);
    if (j % S == 0)
        run->model = model;
    else
        position_model_free(model);
}

LengthExperiment *length_experiment_run(const LengthSetup *setup)
{
    LengthExperiment *e = checked_calloc("length_experiment_run", 1, sizeof *e);
    e->setup = *setup;
    for (int i = 0; i < LENGTH_SIZES; i++) {
        /* the same sequences for both tasks, only the answers differ */
        Task task = task_reversal(setup->length << i, setup->letters);
        Rng rng = rng_new_stream(setup->seed, STREAM_HELDOUT);
        for (int t = 0; t < LENGTH_TASKS; t++) {
            e->held_out[t][i] = task_batch_new(&task, setup->examples);
            Rng same = rng;
            task_draw(&task, e->held_out[t][i], SPLIT_HELDOUT, &same);
            set_answers((LengthTask)t, setup->back, e->held_out[t][i]);
        }
    }
    e->count = LENGTH_TASKS * POSITION_SCHEMES * setup->seeds;
    e->runs = checked_calloc("length_experiment_run", (size_t)e->count, sizeof *e->runs);
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

SeedSummary length_summary(const LengthExperiment *e, LengthTask task, PositionScheme scheme,
                           int size, double success)
{
    const int S = e->setup.seeds;
    double *accuracy = checked_calloc("length_summary", (size_t)S, sizeof *accuracy);
    for (int s = 0; s < S; s++)
        accuracy[s] = e->runs[((int)task * POSITION_SCHEMES + (int)scheme) * S + s].accuracy[size];
    const SeedSummary summary = seeds_summary(accuracy, S, success);
    free(accuracy);
    return summary;
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
