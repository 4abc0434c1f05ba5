/* clip_grad_norm.c - grades exercise 6.10, clipping by global norm
 * (06_permutation_invariance/language_model.md), against
 * parameters_clip_grad_norm (common/learn/optim.c): one to four gradients, norms below and above
 * max_norm, all zeros, norms near the factor's 1e-6, and elements of 1e20,
 * whose squares overflow float. */
#include "exercises.h"
#include "grader.h"
#include "learn/optim.h"

#include <math.h>
#include <string.h>

enum { MAX_GRADS = 4 };

static void grade_case(Rng *rng, int index)
{
    int count = index < 3 ? 1 : draw_int(rng, 1, MAX_GRADS);
    float scale = index % 7 == 5 ? 1e20f : index % 9 == 7 ? 1e-6f : index % 3 == 0 ? 0.01f : 1.0f;
    /* elements of 1e-6 meet max_norm 1e-7: the 1e-6 of the factor counts */
    double max_norm = index % 4 == 1 ? 1e30 : index % 9 == 7 ? 1e-7 : draw_int(rng, 1, 10) * 0.1;
    case_describe("%d gradients, elements about %g, max_norm %g", count, (double)scale,
                  max_norm);
    Parameter params[MAX_GRADS];
    float *grads[MAX_GRADS];
    const Tensor *originals[MAX_GRADS];
    int sizes[MAX_GRADS];
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        sizes[i] = index == 0 ? 1 : large_case(index, 100) ? draw_int(rng, 300, 900)
                                                            : draw_size(rng, index, 100, 1, 8);
        Tensor *g = draw_normal(rng, scale, SHAPE(sizes[i]));
        if (index == 2)
            memset(g->data, 0, g->size * sizeof *g->data);   /* norm 0 */
        char name[32];
        snprintf(name, sizeof name, "grads[%d] before", i);
        originals[i] = case_input(name, g);
        Tensor *want = case_keep(tensor_copy(g));
        params[i] = (Parameter){"grad", want, want};
        snprintf(name, sizeof name, "grads[%d]", i);
        grads[i] = case_output(name, (size_t)sizes[i]);
        memcpy(grads[i], g->data, g->size * sizeof *g->data);
        total += g->size;
    }
    double want_norm = parameters_clip_grad_norm(params, count, max_norm);

    case_calling();
    double norm = my_clip_grad_norm(grads, sizes, count, max_norm);
    case_called();

    expect_that(fabs(norm - want_norm) <= 1e-5 * want_norm + 1e-6, 2,
                "returned %.8g, the norm of all %zu elements together is %.8g", norm, total,
                want_norm);
    double factor = max_norm / (want_norm + 1e-6);
    for (int i = 0; i < count; i++) {
        bool clamped = true, differs = false;
        for (int j = 0; j < sizes[i]; j++) {
            double c = fmax(-max_norm, fmin(max_norm, originals[i]->data[j]));
            const double want = params[i].grad->data[j];
            clamped = clamped && fabs(grads[i][j] - c) <= 1e-5 * fabs(c) + 1e-30;
            differs = differs || fabs(want - c) > 1e-4 * fabs(want) + 1e-30;
        }
        expect_that(!(clamped && differs), 2,
                    "grads[%d] is each element clamped to [-%g, %g]: clipping by norm scales "
                    "every element of every gradient by one factor, max_norm / (norm + 1e-6) "
                    "= %.6g, so the step keeps its direction", i, max_norm, max_norm, factor);
    }
    for (int i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "grads[%d]", i);
        expect_close_floats(name, params[i].grad->data, grads[i], SHAPE(sizes[i]), 1e-30, 1e-5,
                            factor < 1.0 ? 3 : 1);
    }
}

const Exercise exercise = {"clip_grad_norm", "06_permutation_invariance", "6.10", 100,
                           grade_case, "parameters_clip_grad_norm", "language_model.md"};
