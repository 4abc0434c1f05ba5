/* cross_entropy.c - grades exercise 5.10, the mean cross-entropy and its
 * gradient (05_multihead/training.md), against cross_entropy_with_grad
 * (common/learn/loss.c): one row and many, two classes and hundreds, and
 * logits up to 1e4, where exp overflows without the row's maximum. */
#include "exercises.h"
#include "grader.h"
#include "learn/loss.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int N = index < 2 ? 1 : draw_size(rng, index, 100, 2, 6);
    int C = index == 0 ? 2 : large_case(index, 100) ? draw_int(rng, 200, 600)
                                                     : draw_size(rng, index, 100, 2, 8);
    float scale = draw_scale(rng, index);
    case_describe("N = %d rows of C = %d classes, logits up to about %g", N, C, (double)scale);
    const Tensor *logits = case_input("logits", draw_normal(rng, scale, SHAPE(N, C)));
    static int targets[8];   /* N is at most 6 */
    for (int n = 0; n < N; n++)
        targets[n] = draw_int(rng, 0, C - 1);
    case_ints("targets", targets, N);
    Tensor *want_grad = NULL;
    double want = cross_entropy_with_grad(logits, targets, NULL, &want_grad);
    case_keep(want_grad);

    float *grad = case_output("grad_logits", (size_t)N * C);
    case_calling();
    double loss = my_cross_entropy(logits->data, targets, N, C, grad);
    case_called();

    expect_that(isfinite(loss) && fabs(loss - want) <= 1e-5 * fabs(want) + 1e-5, 1,
                "the loss is %.8g, must be %.8g: the mean over the %d rows of logsumexp(z) - "
                "z[target]", loss, want, N);
    /* the gradient of the sum: N times the mean's */
    bool summed = N > 1, moved = false;
    for (int i = 0; i < N * C; i++)
        moved = moved || fabs(want_grad->data[i]) > 1e-4;
    for (int i = 0; i < N * C && summed; i++)
        summed = fabs(grad[i] - N * want_grad->data[i]) <=
                 1e-5 * fabs(N * want_grad->data[i]) + 1e-6;
    expect_that(!(summed && moved), 2, "grad_logits is %d times too large: the loss is the mean over the "
                "%d rows, so each row's softmax - onehot is divided by N", N, N);
    expect_close_floats("grad_logits", want_grad->data, grad, SHAPE(N, C), 1e-6, 1e-4, 3);
}

const Exercise exercise = {"cross_entropy", "05_multihead", "5.10", 100, grade_case,
                           "cross_entropy cross_entropy_with_grad cross_entropy_backward",
                           "training.md"};
