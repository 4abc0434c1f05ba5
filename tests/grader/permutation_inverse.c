/* permutation_inverse.c - grades exercise 6.2, the inverse of a
 * permutation, against permutation_inverse (common/permute_tokens.c), and
 * the property it is for: inverse[perm[i]] = i.
 * refuses: permutation_inverse */
#include "exercises.h"
#include "grader.h"
#include "permute_tokens.h"

static void grade_case(Rng *rng, int index)
{
    int n = index < 3 ? index + 1 : draw_size(rng, index, 100, 2, 12);
    case_describe("n = %d", n);
    static int perm[16], expected[16], got[16 + 2];   /* got with a guard on each side */
    rng_permutation(rng, perm, n);
    case_ints("perm", perm, n);
    permutation_inverse(perm, expected, n);
    for (int i = 0; i < n + 2; i++)
        got[i] = -12345;
    case_calling();
    my_permutation_inverse(perm, got + 1, n);
    case_called();

    expect_that(got[0] == -12345 && got[n + 1] == -12345, 1,
                "your function wrote outside inverse's %d ints", n);
    for (int i = 0; i < n; i++) {
        int j = perm[i], at = got[1 + j];
        expect_that(at == i, 2,
                    "inverse[perm[%d]] = inverse[%d] is %d, must be %d: P X puts token %d at "
                    "position %d, and the inverse takes it back", i, j, at, i, j, i);
    }
    expect_equal_ints("inverse", expected, got + 1, n, 3);
}

const Exercise exercise = {"permutation_inverse", "06_permutation_invariance", "6.2", 100, grade_case};
