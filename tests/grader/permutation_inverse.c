/* permutation_inverse.c - grades exercise 6.2, the inverse of a
 * permutation, against permutation_inverse (common/permute_tokens.c), and
 * the property it is for: inverse[perm[i]] = i. */
#include "exercises.h"
#include "grader.h"
#include "permute_tokens.h"

enum { MAX_N = 300 };

static void grade_case(Rng *rng, int index)
{
    /* the last cases far larger than a buffer a learner might fix */
    int n = index < 3    ? index + 1
          : index >= 95 ? draw_int(rng, 200, MAX_N)
                        : draw_size(rng, index, 100, 2, 12);
    case_describe("n = %d", n);
    static int perm[MAX_N], expected[MAX_N];
    rng_permutation(rng, perm, n);
    case_ints("perm", perm, n);
    permutation_inverse(perm, expected, n);
    int *got = case_output_ints("inverse", (size_t)n);
    case_calling();
    my_permutation_inverse(perm, got, n);
    case_called();

    for (int i = 0; i < n; i++) {
        int j = perm[i], at = got[j];
        expect_that(at == i, 2,
                    "inverse[perm[%d]] = inverse[%d] is %d, must be %d: P X puts token %d at "
                    "position %d, and the inverse takes it back", i, j, at, i, j, i);
    }
    expect_equal_ints("inverse", expected, got, n, 3);
}

const Exercise exercise = {"permutation_inverse", "06_permutation_invariance", "6.2", 100, grade_case,
                           "permutation_inverse", NULL};
