/* positional_encoding.c - grades exercise 6.5, d2l's sinusoidal positional
 * encoding, against positional_encoding (common/positional.c). Position 0
 * is checked first: its sines are 0 and its cosines 1, exactly. An
 * exponent j / D where 2j / D belongs is named. */
#include "exercises.h"
#include "grader.h"
#include "positional.h"

#include <math.h>

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
    /* the exponent j / D where 2j / D belongs: column 2j turns too slowly */
    if (max_len > 1 && D > 2) {
        bool half_exponent = true;
        for (int p = 0; p < max_len && half_exponent; p++)
            for (int c = 0; c < D; c++) {
                double angle = p / pow(10000.0, (double)(c / 2) / D);
                double want = c % 2 == 0 ? sin(angle) : cos(angle);
                half_exponent &= fabs(AT2(got, p, c) - want) <= 2e-5 + 1e-5 * fabs(want);
            }
        expect_that(!half_exponent, 2,
                    "your column 2 turns by %.6g per position, 1 / 10000^(1/D), the exponent "
                    "j / D; columns 2j and 2j + 1 turn by 1 / 10000^(2j / D), here %.6g",
                    asin((double)AT2(got, 1, 2)), 1.0 / pow(10000.0, 2.0 / D));
    }
    /* an angle computed in float32, as d2l does, is off by up to about 60
     * positions * 6e-8; 2e-5 absolute takes it */
    expect_close("PE", expected, got, 2e-5, 1e-5, 3);
}

const Exercise exercise = {"positional_encoding", "06_permutation_invariance", "6.5", 100, grade_case,
                           "positional_encoding add_positional_encoding", NULL};
