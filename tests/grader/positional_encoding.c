/* positional_encoding.c - grades exercise 6.5, d2l's sinusoidal positional
 * encoding, against positional_encoding (common/positional.c). Position 0
 * is checked first: its sines are 0 and its cosines 1, exactly.
 * refuses: positional_encoding add_positional_encoding */
#include "exercises.h"
#include "grader.h"
#include "positional.h"

static void grade_case(Rng *rng, int index)
{
    int max_len = index == 0 ? 1 : draw_size(rng, index, 100, 2, 60);
    int D = index == 1 ? 1 : index == 2 ? 3 : draw_size(rng, index, 100, 2, 12);
    case_describe("max_len = %d, D = %d", max_len, D);

    Tensor *expected = case_keep(positional_encoding(max_len, D));
    case_calling();
    Tensor *got = case_keep(my_positional_encoding(max_len, D));
    case_called();

    expect_tensor("PE", got, SHAPE(max_len, D), 1);
    for (int c = 0; c < D; c++) {
        float want = c % 2 == 0 ? 0.0f : 1.0f, have = AT2(got, 0, c);
        expect_that(have == want, 2,
                    "PE[0, %d] is %.6g; at position 0 every angle is 0, so column %d, a %s, "
                    "is %g", c, (double)have, c, c % 2 == 0 ? "sine" : "cosine", (double)want);
    }
    /* an angle computed in float32, as d2l does, is off by up to about 60
     * positions * 6e-8; 2e-5 absolute takes it */
    expect_close("PE", expected, got, 2e-5, 1e-5, 3);
}

const Exercise exercise = {"positional_encoding", "06_permutation_invariance", "6.5", 100, grade_case};
