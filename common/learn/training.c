/*
 * training.c - the one training loop (introduced in chapter 05's optional
 * section "Attention that learns"). See training.h.
 */
#include "learn/training.h"

#include "tensor.h"

/* The usual batches: batch_size examples of the task's training split. */
typedef struct {
    const Task *task;
    TaskBatch *examples;
} TaskExamples;

static void draw_examples(void *state, Rng *rng)
{
    TaskExamples *t = state;
    task_draw(t->task, t->examples, SPLIT_TRAIN, rng);
}

/* The batch of step s, from its own stream or the next of the run's one. */
static void draw_batch(const TrainingPlan *plan, const BatchDraw *draw, Rng *stream, int step)
{
    Rng own = rng_step(plan->seed, (uint64_t)step);
    draw->draw(draw->state, plan->batches == BATCH_OF_STEP ? &own : stream);
}

TrainingStatus training_loop(const Trainee *trainee, const TrainingPlan *plan,
                             const TrainingWatch *watch)
{
    const TrainingWatch none = {0};
    const TrainingWatch *w = watch != NULL ? watch : &none;
    /* the plan's own batches, or its task's */
    TaskExamples examples = {plan->task, plan->draw == NULL
                                             ? task_batch_new(plan->task, plan->batch_size)
                                             : NULL};
    const BatchDraw task_batches = {&examples, draw_examples, examples.examples};
    const BatchDraw *draw = plan->draw != NULL ? plan->draw : &task_batches;
    Rng stream = rng_use(plan->seed, RNG_BATCHES);
    TrainingStatus status = TRAINING_GOES_ON;
    int step = plan->first_step;
    for (; step <= plan->last_step && status == TRAINING_GOES_ON; step++) {
        if (w->before_step && !w->before_step(w->state, step)) {
            status = TRAINING_STOPPED;
            break;
        }
        draw_batch(plan, draw, &stream, step);
        int correct = 0;
        const double loss = trainee->step(trainee->model, trainee->adam, draw->batch, &correct);
        if (w->after_step)
            status = w->after_step(w->state, step, loss, correct);
    }
    if (status == TRAINING_GOES_ON) {
        status = TRAINING_DONE;
        /* every step taken: the last update's loss on the batch the next step would take */
        if (step > plan->first_step && w->after_last && trainee->evaluate) {
            draw_batch(plan, draw, &stream, step);
            if (!w->after_last(w->state, trainee->evaluate(trainee->model, draw->batch, NULL)))
                status = TRAINING_DIVERGED;
        }
    }
    task_batch_free(examples.examples);
    return status;
}
