/* lr_schedule.c - grades exercise 6.18, the learning-rate schedule
 * (06_permutation_invariance/your_gpt.md), against lm_learning_rate
 * (common/learn/adamw.c): the steps at each edge (0, warmup - 1, warmup,
 * decay_steps - 1, decay_steps, after), no warmup at all, and a warmup as
 * long as the decay. */
#include "exercises.h"
#include "grader.h"
#include "learn/adamw.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int warmup = index % 7 == 0 ? 0 : draw_int(rng, 1, 200);
    int decay_steps = index % 11 == 5 ? warmup : warmup + draw_int(rng, 1, 3000);
    double lr = index % 2 == 0 ? 1e-3 : draw_int(rng, 1, 100) * 1e-4;
    double min_lr = index % 3 == 0 ? lr / 10 : index % 3 == 1 ? 0.0 : lr * draw_int(rng, 1, 9) / 10;
    int edges[] = {0, warmup - 1, warmup, warmup + 1, (warmup + decay_steps) / 2,
                   decay_steps - 1, decay_steps, decay_steps + draw_int(rng, 1, 500)};
    int step = index < 8 ? edges[index] : draw_int(rng, 0, 1) ? edges[index % 8]
                                                              : draw_int(rng, 0, decay_steps + 9);
    if (step < 0)
        step = 0;
    case_describe("step %d, lr %g, min_lr %g, warmup %d, decay_steps %d", step, lr, min_lr,
                  warmup, decay_steps);
    double want = lm_learning_rate(step, lr, min_lr, warmup, decay_steps);
    case_calling();
    double got = my_lr_schedule(step, lr, min_lr, warmup, decay_steps);
    case_called();

    if (step < warmup) {
        double from_zero = lr * step / warmup;
        expect_that(fabs(got - from_zero) > 1e-9 * lr || fabs(want - from_zero) <= 1e-9 * lr, 1,
                    "the learning rate at step %d is lr * %d / %d = %.9g: the warmup starts "
                    "at step 0 with lr / (warmup + 1), never 0: count step + 1 of warmup + 1",
                    step, step, warmup, got);
    } else if (step < decay_steps) {
        double p = (double)step / decay_steps;
        double from_start = min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * p)) * (lr - min_lr);
        expect_that(fabs(got - from_start) > 1e-9 * lr || fabs(want - from_start) <= 1e-9 * lr,
                    2, "the cosine's progress is step / decay_steps = %.6g: it starts after the "
                    "warmup, (step - warmup) / (decay_steps - warmup)", p);
    }
    expect_that(isfinite(got), 3, "the learning rate is %g", got);
    expect_that(fabs(got - want) <= 1e-12 + 1e-9 * fabs(want), 3,
                "the learning rate at step %d is %.12g, must be %.12g", step, got, want);
}

const Exercise exercise = {"lr_schedule", "06_permutation_invariance", "6.18", 100, grade_case,
                           "lm_learning_rate", "your_gpt.md"};
