/* equivariance_gap.c - grades exercise 6.3, measuring how far a function
 * of the tokens is from equivariance, max |f(P X) - P f(X)|, against the
 * same measure made with permute_tokens (common/permute_tokens.c). Three
 * functions take turns: self-attention (equivariant: a gap of rounding
 * size), self-attention after positional encodings and causal
 * self-attention (not equivariant: a large gap), so a constant answer
 * fails. Under the identity permutation every gap is exactly 0. A gap
 * measured against the unmoved f(X), the distance from invariance, is named. */
#include "exercises.h"
#include "judge/functions.h"
#include "attention.h"
#include "grader.h"
#include "permute_tokens.h"
#include "positional.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    static const char *const names[] = {"self-attention", "self-attention after positions",
                                        "causal self-attention"};
    const GraderFunction *functions = grader_functions;   /* judge/functions.c */
    int which = index % 3;
    int batch = index < 3 ? 1 : draw_size(rng, index, 120, 1, 3);
    int T = draw_size(rng, index, 120, 2, 6), D = draw_size(rng, index, 120, 2, 5);
    bool identity = index % 7 == 6;
    case_describe("f = %s, B = %d, T = %d, D = %d, %s", names[which], batch, T, D,
                  identity ? "the identity permutation" : "a random permutation");
    const Tensor *X = case_input("X", draw_normal(rng, 1.0f, SHAPE(batch, T, D)));
    static int perm[16];
    for (int i = 0; i < T; i++)
        perm[i] = i;
    if (!identity)
        while (true) {   /* a permutation that moves something */
            rng_permutation(rng, perm, T);
            bool moved = false;
            for (int i = 0; i < T; i++)
                moved |= perm[i] != i;
            if (moved)
                break;
        }
    case_ints("perm", perm, T);

    Tensor *fX = case_keep(functions[which](X));
    Tensor *PX = case_keep(permute_tokens(X, perm));
    Tensor *fPX = case_keep(functions[which](PX));
    Tensor *PfX = case_keep(permute_tokens(fX, perm));
    float expected = tensor_max_abs_diff(fPX, PfX);
    float unmoved = tensor_max_abs_diff(fPX, fX);   /* the distance from invariance */

    case_calling();
    float got = my_equivariance_gap(functions[which], X, perm);
    case_called();

    expect_that(isfinite(got) && got >= 0.0f, 1, "your gap is %g; a largest difference is a "
                "finite number, 0 or more", (double)got);
    expect_that(!identity || got == 0.0f, 2,
                "your gap is %g under the identity permutation, where f(P X) and P f(X) are "
                "the same computation: it must be exactly 0", (double)got);
    bool right = fabsf(got - expected) <= 1e-6f + 1e-5f * expected;
    expect_that(right || fabsf(got - unmoved) > 1e-6f + 1e-5f * unmoved, 2,
                "your gap is %g = max |f(P X) - f(X)| for %s, how far f is from invariance; "
                "equivariance moves the outputs too: compare f(P X) with P f(X), whose "
                "largest difference is %g", (double)got, names[which], (double)expected);
    expect_that(right, 2,
                "your gap is %g; max |f(P X) - P f(X)| is %g for %s", (double)got,
                (double)expected, names[which]);
}

const Exercise exercise = {"equivariance_gap", "06_permutation_invariance", "6.3", 120, grade_case,
                           "equivariance_gap equivariance_table", NULL};
