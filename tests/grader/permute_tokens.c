/* permute_tokens.c - grades exercise 6.1, applying a permutation to the
 * tokens, against permute_tokens (common/permute_tokens.c), exactly. The
 * input holds distinct whole numbers, so a misplaced token says which it is. */
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
    /* x[b, t, k] = (b * T + t) * D + k, so a row's first float names the
     * sequence and the token it came from */
    int want = -1, have = -1, have_b = -1, b_at = 0, i_at = 0, k_at = 0;
    bool same_shape = got && tensor_has_shape(got, SHAPE(batch, T, D));
    for (int b = 0; same_shape && b < batch && want < 0; b++)
        for (int i = 0; i < T; i++) {
            size_t row = ((size_t)b * T + i) * D;
            if (memcmp(got->data + row, expected->data + row, (size_t)D * sizeof(float)) == 0)
                continue;
            float first = got->data[row];
            bool whole = first == (float)(int)first && first >= 0 && first < batch * T * D;
            have = whole ? (int)first / D % T : -1;
            have_b = whole ? (int)first / (D * T) : -1;
            want = perm[i];
            b_at = b;
            i_at = i;
            while (k_at < D && got->data[row + k_at] == expected->data[row + k_at])
                k_at++;
            break;
        }
    expect_tensor("out", got, SHAPE(batch, T, D), 1);
    expect_that(want < 0 || have_b < 0 || have_b == b_at, 2,
                "out[%d, %d] holds token %d of sequence %d of x; each sequence keeps its own "
                "tokens: out[b, i] = x[b, perm[i]]", b_at, i_at, have, have_b);
    expect_that(want < 0 || k_at == 0, 3,
                "out[%d, %d] starts with token perm[%d] = %d but out[%d, %d, %d] is %g, "
                "expected %g: copy all D = %d floats of the row", b_at, i_at, i_at, want, b_at,
                i_at, k_at, (double)got->data[((size_t)b_at * T + i_at) * D + k_at],
                (double)expected->data[((size_t)b_at * T + i_at) * D + k_at], D);
    expect_that(want < 0 || have != inverse[i_at] || inverse[i_at] == perm[i_at], 2,
                "out[%d, %d] holds token %d of x, inverse[%d]; (P X)[b, i] = X[b, perm[i]] "
                "is token perm[%d] = %d: out[perm[i]] = x[i] applies the inverse", b_at,
                i_at, have, i_at, i_at, want);
    expect_that(want < 0 || have >= 0, 2, "out[%d, %d, 0] is %g, no value of x; it must hold "
                "token perm[%d] = %d", b_at, i_at,
                (double)got->data[((size_t)b_at * T + i_at) * D], i_at, want);
    expect_that(want < 0, 2, "out[%d, %d] holds token %d of x, must hold token perm[%d] = %d",
                b_at, i_at, have, i_at, want);
}

const Exercise exercise = {"permute_tokens", "06_permutation_invariance", "6.1", 100, grade_case,
                           "permute_tokens permute_along permute_queries_and_keys", NULL};
