/* attention_grad_qk.c - grades exercise 3.8, the scores' gradient taken
 * back to the queries and keys (03_self_attention/backward.md): dQ = dS K /
 * sqrt(d), dK = dS^T Q / sqrt(d), against those products worked in double
 * here (dot_product_attention_backward computes them inside). */
#include "exercises.h"
#include "grader.h"

#include <math.h>

/* a (B, m, k) times b (B, k, n) or its transpose, in double, times factor */
static Tensor *product(const Tensor *grad, const Tensor *x, bool transpose_grad, double factor)
{
    int B = grad->shape[0], rows = grad->shape[transpose_grad ? 2 : 1];
    int inner = grad->shape[transpose_grad ? 1 : 2], cols = x->shape[2];
    Tensor *out = tensor_zeros(SHAPE(B, rows, cols));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < rows; i++)
            for (int c = 0; c < cols; c++) {
                double sum = 0.0;
                for (int j = 0; j < inner; j++)
                    sum += (double)(transpose_grad ? AT3(grad, b, j, i) : AT3(grad, b, i, j)) *
                           AT3(x, b, j, c);
                AT3(out, b, i, c) = (float)(sum * factor);
            }
    return out;
}

/* got equals want times factor, everywhere want is not tiny */
static bool scaled_by(const Tensor *want, const Tensor *got, double factor)
{
    bool any = false;
    for (size_t i = 0; i < want->size; i++) {
        double w = want->data[i] * factor;
        if (fabs(got->data[i] - w) > 1e-4 * (1e-3 + fabs(w)))
            return false;
        any = any || fabs(w) > 1e-3;
    }
    return any;
}

static void grade_case(Rng *rng, int index)
{
    bool large = large_case(index, 100);
    int batch = index < 3 ? 1 : draw_size(rng, index, 100, 1, 3);
    int num_queries = index == 0 ? 1 : large ? draw_int(rng, 65, 150) : draw_size(rng, index, 100, 1, 5);
    int num_keys = index == 1 ? 1 : large ? draw_int(rng, 65, 150) : draw_size(rng, index, 100, 1, 6);
    int d = index == 2 ? 1 : large ? draw_int(rng, 33, 70) : draw_size(rng, index, 100, 1, 5);
    if (index >= 3 && !large && num_queries == num_keys)
        num_keys++;   /* dK with the wrong product would not even fit */
    case_describe("B = %d, T = %d, n_k = %d, d = %d", batch, num_queries, num_keys, d);
    const Tensor *queries = case_input("queries", draw_normal(rng, 1.0f, SHAPE(batch, num_queries, d)));
    const Tensor *keys = case_input("keys", draw_normal(rng, 1.0f, SHAPE(batch, num_keys, d)));
    const Tensor *grad_scores =
        case_input("grad_scores", draw_normal(rng, 1.0f, SHAPE(batch, num_queries, num_keys)));
    double factor = 1.0 / sqrt((double)d);
    Tensor *want_q = case_keep(product(grad_scores, keys, false, factor));
    Tensor *want_k = case_keep(product(grad_scores, queries, true, factor));

    Tensor *got_q = NULL, *got_k = NULL;
    case_calling();
    my_attention_grad_qk(queries, keys, grad_scores, &got_q, &got_k);
    case_called();
    case_keep(got_q);
    case_keep(got_k);

    expect_that(got_q != NULL && got_k != NULL, 1,
                "*grad_queries or *grad_keys is NULL: both are new tensors");
    expect_tensor("grad_queries", got_q, SHAPE(batch, num_queries, d), 1);
    expect_tensor("grad_keys", got_k, SHAPE(batch, num_keys, d), 1);
    expect_finite("grad_queries", got_q, 2);
    expect_finite("grad_keys", got_k, 2);
    if (d > 1) {
        bool q_unscaled = scaled_by(want_q, got_q, sqrt((double)d));
        bool k_unscaled = scaled_by(want_k, got_k, sqrt((double)d));
        expect_that(!q_unscaled && !k_unscaled, 3,
                    "%s is %s times what it must be: the scores were divided by sqrt(d), so "
                    "their gradient is divided by sqrt(d) on its way back",
                    q_unscaled ? "grad_queries" : "grad_keys", "sqrt(d)");
    }
    expect_close("grad_queries", want_q, got_q, 1e-5, 1e-4, 2);
    expect_close("grad_keys", want_k, got_k, 1e-5, 1e-4, 2);
}

const Exercise exercise = {"attention_grad_qk", "03_self_attention", "3.8", 100, grade_case,
                           "dot_product_attention_backward", "backward.md"};
