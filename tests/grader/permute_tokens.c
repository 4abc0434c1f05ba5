/* permute_tokens.c - grades exercise 6.1, applying a permutation to the
 * tokens, against permute_tokens (common/permute_tokens.c), exactly. The
 * input holds distinct whole numbers, so a misplaced token says which it is.
 * refuses: permute_tokens permute_along permute_queries_and_keys */
#include "exercises.h"
#include "grader.h"
#include "permute_tokens.h"

#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 100, 1, 3);
    int T = index == 0 ? 1 : draw_size(rng, index, 100, 2, 6);
    int D = index == 1 ? 1 : draw_size(rng, index, 100, 1, 4);
    case_describe("B = %d, T = %d, D = %d", batch, T, D);
    const Tensor *x = case_input("x", tensor_arange(SHAPE(batch, T, D)));
    static int perm[16], inverse[16];   /* T <= 6; live while the case is reported */
    rng_permutation(rng, perm, T);
    case_ints("perm", perm, T);

    Tensor *expected = case_keep(permute_tokens(x, perm));
    case_calling();
    Tensor *got = case_keep(my_permute_tokens(x, perm));
    case_called();
    permutation_inverse(perm, inverse, T);
    int perm_i = -1, inverse_i = -1, want = -1, have = -1, b_at = 0, i_at = 0;
    bool same_shape = got && tensor_has_shape(got, SHAPE(batch, T, D));
    for (int b = 0; same_shape && b < batch && want < 0; b++)
        for (int i = 0; i < T; i++) {
            size_t row = ((size_t)b * T + i) * D;
            if (memcmp(got->data + row, expected->data + row, (size_t)D * sizeof(float)) == 0)
                continue;
            float first = got->data[row];
            have = first == (float)(int)first ? (int)first / D % T : -1;
            want = perm[i];
            perm_i = perm[i];
            inverse_i = inverse[i];
            b_at = b;
            i_at = i;
            break;
        }
    expect_tensor("out", got, SHAPE(batch, T, D), 1);
    if (want >= 0 && have == inverse_i)
        expect_that(false, 2,
                    "out[%d, %d] holds token %d of x, inverse[%d]; (P X)[b, i] = X[b, perm[i]] "
                    "is token perm[%d] = %d: out[perm[i]] = x[i] applies the inverse", b_at,
                    i_at, have, i_at, i_at, perm_i);
    expect_that(want < 0, 2, "out[%d, %d] holds token %d of x, must hold token perm[%d] = %d",
                b_at, i_at, have, i_at, want);
}

const Exercise exercise = {"permute_tokens", "06_permutation_invariance", "6.1", 100, grade_case};
