/* causal_self_attention.c - grades exercise 3.3, causal self-attention
 * (queries = keys = values = X, token i sees tokens 0 .. i), against
 * dot_product_attention with valid_lens_causal (common/attention.c).
 * masked_softmax and valid_lens_causal may be called. */
#include "exercises.h"
#include "attention.h"
#include "grader.h"

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 100, 1, 3);
    int n = index == 0 ? 1 : draw_size(rng, index, 100, 2, 6);
    int d = index == 1 ? 1 : draw_size(rng, index, 100, 2, 5);
    float scale = index % 4 == 3 ? 30.0f : 1.0f;
    case_describe("B = %d, n = %d, d = %d, tokens up to about %g", batch, n, d, (double)scale);
    const Tensor *X = case_input("X", draw_normal(rng, scale, SHAPE(batch, n, d)));

    ValidLens *causal = case_keep_valid_lens(valid_lens_causal(batch, n));
    Tensor *expected = case_keep(dot_product_attention(X, X, X, causal, NULL, NULL));
    case_calling();
    Tensor *got = case_keep(my_causal_self_attention(X));
    case_called();

    expect_tensor("output", got, SHAPE(batch, n, d), 1);
    expect_finite("output", got, 2);
    /* the first token sees only itself: weight exactly 1 on its own value */
    for (int b = 0; b < batch; b++)
        for (int c = 0; c < d; c++)
            expect_that(AT3(got, b, 0, c) == AT3(X, b, 0, c), 2,
                        "output[%d, 0, %d] is %.6g, but token 0 sees only itself, so its output "
                        "is X[%d, 0, %d] = %.6g exactly", b, c, (double)AT3(got, b, 0, c), b, c,
                        (double)AT3(X, b, 0, c));
    expect_close("output", expected, got, 1e-5, 1e-4, 3);
}

const Exercise exercise = {"causal_self_attention", "03_self_attention", "3.3", 100, grade_case,
                           "dot_product_attention dot_product_attention_cache", NULL};
