/*
 * training.c - the one training loop (introduced in chapter 05's optional
 * section "Attention that learns"). See training.h.
 */
#include "learn/training.h"

#include "random.h"

/* The batch of step s: its own stream, or the next of the run's one. */
static void draw_batch(const TrainingPlan *plan, Rng *stream, int step, TaskBatch *batch)
{
    Rng own = rng_step(plan->seed, (uint64_t)step);
    task_draw(plan->task, batch, SPLIT_TRAIN, plan->batches == BATCH_OF_STEP ? &own : stream);
}

int training_loop(const Trainee *trainee, const TrainingPlan *plan, const TrainingWatch *watch)
{
    const TrainingWatch none = {0};
    const TrainingWatch *w = watch != NULL ? watch : &none;
    TaskBatch *batch = task_batch_new(plan->task, plan->batch_size);
    Rng stream = rng_use(plan->seed, RNG_BATCHES);
    int taken = 0, step = plan->first_step;
    bool stopped = false;
    for (; step <= plan->last_step; step++) {
        if (w->before_step && !w->before_step(w->state, step))
            break;
        draw_batch(plan, &stream, step, batch);
        int correct = 0;
        const double loss = trainee->step(trainee->model, trainee->adam, batch, &correct);
        if ((stopped = w->after_step && !w->after_step(w->state, step, loss, correct)))
            break;
        taken++;
    }
    if (!stopped && taken > 0 && w->after_last) {
        draw_batch(plan, &stream, step, batch);   /* the batch step `step` would take */
        w->after_last(w->state, trainee->evaluate(trainee->model, batch, NULL));
    }
    task_batch_free(batch);
    return taken;
}
