/* softmax_row_backward.c - grades exercise 3.4, the softmax backward for one
 * row, against softmax_row_backward (common/softmax.c). The weights are a
 * masked softmax of random scores, so some are exactly 0. */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

#include <math.h>
#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int n = index < 3              ? index + 1
          : large_case(index, 100) ? draw_int(rng, 200, 600)
                                   : draw_size(rng, index, 100, 1, 8);
    int valid_len = index < 3 ? n : draw_int(rng, 0, n);
    /* scores up to 1e4 now and then: weights of 0 and 1, nearly one-hot */
    float scale = fmaxf(2.0f, draw_scale(rng, index));
    case_describe("n = %d, the weights of a softmax of scores up to about %g, masked at "
                  "valid_len %d", n, (double)scale, valid_len);
    Tensor *weights = draw_normal(rng, scale, SHAPE(n));
    masked_softmax_row(weights->data, n, valid_len);
    case_input("weights", weights);
    const Tensor *grad_weights = case_input("grad_weights", draw_normal(rng, 1.0f, SHAPE(n)));

    float *expected = case_output("expected", (size_t)n);
    softmax_row_backward(weights->data, grad_weights->data, expected, n);
    float *got = case_output("grad_scores", (size_t)n);
    case_calling();
    my_softmax_row_backward(weights->data, grad_weights->data, got, n);
    case_called();

    Tensor *grad = case_keep(tensor_from(got, SHAPE(n)));
    expect_finite("grad_scores", grad, 1);
    for (int j = valid_len; j < n; j++)
        expect_that(got[j] == 0.0f, 2,
                    "grad_scores[%d] is %.6g, but its weight is exactly 0 (masked): its "
                    "gradient must be exactly 0", j, (double)got[j]);
    /* shifting every score by c does not change a softmax: the gradient sums to 0 */
    double sum = 0, size = 0;
    for (int j = 0; j < n; j++) {
        sum += got[j];
        size += fabs(got[j]);
    }
    expect_that(fabs(sum) <= 1e-5 + 1e-4 * size, 2,
                "grad_scores sums to %.6g, must sum to 0: adding one number to every score "
                "leaves the weights as they are", sum);
    /* the right numbers with the wrong sign: name it */
    bool negated = true, nonzero = false;
    for (int j = 0; j < n; j++) {
        negated = negated && fabsf(got[j] + expected[j]) <= 1e-6f + 1e-4f * fabsf(expected[j]);
        nonzero = nonzero || fabsf(expected[j]) > 1e-6f;
    }
    expect_that(!(negated && nonzero), 2,
                "grad_scores is the gradient times -1: dL/ds_j = p_j (dL/dp_j - sum_i dL/dp_i "
                "p_i), the row's own gradient first");
    expect_close_floats("grad_scores", expected, got, SHAPE(n), 1e-6, 1e-4, 3);
}

const Exercise exercise = {"softmax_row_backward", "03_self_attention", "3.4", 100, grade_case,
                           "softmax_row_backward masked_softmax_backward", NULL};
