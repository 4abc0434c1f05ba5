/* causal_valid_lens.c - grades exercise 2.4, the causal mask as a 2-D
 * valid_lens, against valid_lens_causal (common/valid_lens.c) where
 * n_k = T, and against the rule it teaches where the queries are the last
 * T of n_k positions: query i sits at position n_k - T + i and sees keys
 * 0 .. n_k - T + i. */
#include "exercises.h"
#include "grader.h"
#include "softmax.h"

#include <stdlib.h>

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 100, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 100, 1, 6);
    /* half the cases have as many keys as queries, as in training */
    int num_keys = index % 2 ? num_queries : num_queries + draw_int(rng, 0, 5);
    case_describe("B = %d, T = %d, n_k = %d", batch, num_queries, num_keys);

    /* the repository's mask, shifted by the keys before the first query */
    ValidLens *expected = case_keep_valid_lens(valid_lens_causal(batch, num_queries));
    for (int i = 0; i < batch * num_queries; i++)
        expected->data[i] += num_keys - num_queries;

    case_calling();
    ValidLens *got = case_keep_valid_lens(my_causal_valid_lens(batch, num_queries, num_keys));
    case_called();

    expect_that(got != NULL, 1, "your function returned NULL, not a valid_lens");
    expect_that(got->ndim == 2 && got->shape[0] == batch && got->shape[1] == num_queries, 1,
                "valid_lens has %d dimensions (%d, %d), must be 2-D (B, T) = (%d, %d)",
                got->ndim, got->shape[0], got->ndim == 2 ? got->shape[1] : 0, batch,
                num_queries);
    /* the property the mask is for: query i sees itself, never position i + 1 */
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++) {
            int at = num_keys - num_queries + i, len = got->data[b * num_queries + i];
            expect_that(len > at, 2,
                        "query %d of sequence %d sits at position %d but its valid_len %d "
                        "hides it from itself", i, b, at, len);
            expect_that(len <= at + 1, 2,
                        "query %d of sequence %d sits at position %d but its valid_len %d "
                        "lets it see position %d, in its future", i, b, at, len, at + 1);
        }
    expect_equal_ints("valid_lens", expected->data, got->data, batch * num_queries, 3);
}

const Exercise exercise = {"causal_valid_lens", "02_softmax_mask", "2.4", 100, grade_case,
                           "valid_lens_causal", NULL};
