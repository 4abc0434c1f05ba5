/* attention_grad_values.c - grades exercise 3.5, the values' gradient
 * dV = P^T dO, against dot_product_attention_backward (common/attention.c)
 * asked for grad_values only. The weights are those of
 * dot_product_attention_cache, masked by valid_lens, so some keys are seen
 * by no query. */
#include "exercises.h"
#include "attention.h"
#include "grader.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int batch = index < 3 ? 1 : draw_size(rng, index, 100, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 100, 1, 4);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 100, 1, 5);
    int d = draw_int(rng, 1, 3);
    int v = index == 2 ? 1 : draw_size(rng, index, 100, 1, 6);
    int kind = index % 3;   /* 0: no mask, 1: 1-D, 2: 2-D */
    /* scores up to a few thousand now and then: weights of 0 and 1 */
    float scale = draw_scale(rng, index) > 1.0f ? 30.0f : 1.0f;
    case_describe("B = %d, T = %d, n_k = %d, v = %d, valid_lens %s, the weights of scores up "
                  "to about %g", batch, num_queries, num_keys, v,
                  kind == 0 ? "None" : kind == 1 ? "1-D" : "2-D", (double)(scale * scale));
    Tensor *queries = case_keep(draw_normal(rng, scale, SHAPE(batch, num_queries, d)));
    Tensor *keys = case_keep(draw_normal(rng, scale, SHAPE(batch, num_keys, d)));
    Tensor *values = case_keep(draw_normal(rng, 1.0f, SHAPE(batch, num_keys, v)));
    ValidLens *valid_lens = case_keep_valid_lens(
        kind == 0 ? NULL : draw_valid_lens(rng, batch, num_queries, num_keys, kind == 2));
    AttentionCache cache = {NULL, NULL};
    case_keep(dot_product_attention_cache(queries, keys, values, valid_lens, NULL, &cache));
    const Tensor *weights = case_input("weights", cache.weights);
    const Tensor *grad_output =
        case_input("grad_output", draw_normal(rng, 1.0f, SHAPE(batch, num_queries, v)));

    Tensor *expected = NULL;
    dot_product_attention_backward(queries, keys, values, &cache, grad_output, NULL, NULL,
                                   &expected);
    case_keep(expected);
    case_calling();
    Tensor *got = case_keep(my_attention_grad_values(weights, grad_output));
    case_called();

    expect_tensor("grad_values", got, SHAPE(batch, num_keys, v), 1);
    expect_finite("grad_values", got, 2);
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < num_keys; j++) {
            /* a key no query sees took no part in the output */
            bool seen = false;
            for (int i = 0; i < num_queries; i++)
                seen = seen || AT3(weights, b, i, j) != 0.0f;
            for (int c = 0; c < v && !seen; c++)
                expect_that(AT3(got, b, j, c) == 0.0f, 2,
                            "grad_values[%d, %d, %d] is %.6g, but every weight of key %d is 0 "
                            "(no query sees it): its gradient must be exactly 0", b, j, c,
                            (double)AT3(got, b, j, c), j);
        }
    /* each row of P sums to 1 (or is 0 when no key is valid), so summing
     * dV over the keys gives dO summed over the queries that see a key */
    for (int b = 0; b < batch; b++)
        for (int c = 0; c < v; c++) {
            double want = 0, have = 0, size = 0;
            for (int i = 0; i < num_queries; i++)
                if (valid_lens == NULL || valid_len_at(valid_lens, b, i) > 0) {
                    want += AT3(grad_output, b, i, c);
                    size += fabs(AT3(grad_output, b, i, c));
                }
            for (int j = 0; j < num_keys; j++)
                have += AT3(got, b, j, c);
            expect_that(fabs(have - want) <= 1e-4 * (1 + size), 2,
                        "grad_values[%d, :, %d] sums over the keys to %.6g, but each query "
                        "hands out its gradient with weights that sum to 1, so it must sum to "
                        "%.6g, grad_output[%d, :, %d] summed over the queries that see a key",
                        b, c, have, want, b, c);
        }
    expect_close("grad_values", expected, got, 1e-5, 1e-4, 3);
}

const Exercise exercise = {"attention_grad_values", "03_self_attention", "3.5", 100, grade_case,
                           "dot_product_attention_backward", NULL};
