/* rope_rotate.c - grades exercise 6.4, one RoPE rotation of a query or key
 * vector, against rope_forward (common/rope.c), and the two properties the
 * page builds on: a rotation keeps the vector's length, and the score of a
 * rotated query and key depends on the offset of their positions only. A
 * rotation of the half split (x[i] with x[i + d/2]) is named. */
#include "exercises.h"
#include "grader.h"
#include "rope.h"

#include <math.h>
#include <string.h>

/* The half split's rotation, for naming that mistake. */
static void rotate_halves(float *x, int d, int position)
{
    for (int i = 0; i < d / 2; i++) {
        double angle = position * pow(10000.0, -2.0 * i / d);
        float a = x[i], b = x[i + d / 2];
        x[i] = (float)(a * cos(angle) - b * sin(angle));
        x[i + d / 2] = (float)(a * sin(angle) + b * cos(angle));
    }
}

static float dot(const float *a, const float *b, int d)
{
    double sum = 0;
    for (int j = 0; j < d; j++)
        sum += (double)a[j] * b[j];
    return (float)sum;
}

static const char IN_PLACE_SLIP[] =
    "x[2i + 1] was computed from the new x[2i]: the first line of the pair overwrote a "
    "before the second read it; keep the old a and b";

/* Is got what a rotation gives that writes x[2i] first and then reads it
 * back for x[2i + 1] (the in-place slip)? */
static bool reads_its_new_value(const float *x, const float *got, int d, int position)
{
    for (int i = 0; i < d / 2; i++) {
        double angle = position * pow(10000.0, -2.0 * i / d);
        float c = (float)cos(angle), s = (float)sin(angle);
        float a = x[2 * i] * c - x[2 * i + 1] * s, b = a * s + x[2 * i + 1] * c;
        if (fabsf(a - got[2 * i]) > 1e-5f + 1e-4f * fabsf(a) ||
            fabsf(b - got[2 * i + 1]) > 1e-5f + 1e-4f * fabsf(b))
            return false;
    }
    return true;
}

static void grade_case(Rng *rng, int index)
{
    int d = index == 0 ? 2 : 2 * draw_size(rng, index, 120, 2, 8);
    int position = index < 2             ? index
                   : index % 10 == 9     ? draw_int(rng, 10000, 100000)
                   : index % 5 == 4      ? draw_int(rng, 1000, 5000)
                                         : draw_int(rng, 0, 60);
    int offset = draw_int(rng, 1, 20);
    case_describe("d = %d, position %d", d, position);
    const Tensor *x = case_input("x", draw_normal(rng, 1.0f, SHAPE(1, 1, d)));

    Tensor *expected = case_keep(rope_forward(x, position));
    float *got = case_output("x", (size_t)d);
    memcpy(got, x->data, (size_t)d * sizeof(float));
    case_calling();
    my_rope_rotate(got, d, position);
    case_called();

    Tensor *rotated = case_keep(tensor_from(got, SHAPE(d)));
    expect_finite("x", rotated, 1);
    expect_that(position == 0 || !reads_its_new_value(x->data, got, d, position), 3,
                "%s", IN_PLACE_SLIP);
    float before = sqrtf(dot(x->data, x->data, d)), after = sqrtf(dot(got, got, d));
    expect_that(fabsf(after - before) <= 1e-5f + 1e-5f * before, 1,
                "the rotated vector's length is %.7g, was %.7g: a rotation keeps lengths",
                (double)after, (double)before);
    if (d > 2 && position > 0) {
        float halves[64];
        memcpy(halves, x->data, (size_t)d * sizeof(float));
        rotate_halves(halves, d, position);
        bool is_halves = true;
        for (int j = 0; j < d; j++)
            is_halves &= fabsf(halves[j] - got[j]) <= 1e-5f + 1e-4f * fabsf(halves[j]);
        expect_that(!is_halves, 2,
                    "you rotated the pairs (x[i], x[i + d/2]), the half split; this repository "
                    "(as RoFormer and llama2.c) rotates the pairs (x[2i], x[2i + 1])");
    }
    /* the score of a query at m and a key at n depends on m - n only */
    if (index % 3 == 0 && position < 1000) {
        float q[64], k[64], q2[64], k2[64];
        memcpy(q, x->data, (size_t)d * sizeof(float));
        for (int j = 0; j < d; j++)
            k[j] = x->data[(j + 1) % d] - 0.5f * x->data[j];
        memcpy(q2, q, sizeof q);
        memcpy(k2, k, sizeof k);
        case_calling();
        my_rope_rotate(q, d, position + 3);
        my_rope_rotate(k, d, position);
        my_rope_rotate(q2, d, position + 3 + offset);
        my_rope_rotate(k2, d, position + offset);
        case_called();
        expect_that(!reads_its_new_value(x->data, q, d, position + 3), 3,
                    "%s", IN_PLACE_SLIP);
        float s1 = dot(q, k, d), s2 = dot(q2, k2, d);
        expect_that(fabsf(s1 - s2) <= 1e-4f + 1e-4f * fabsf(s1), 2,
                    "a query at %d and a key at %d score %.6g, at %d and %d they score %.6g: "
                    "the same offset must give the same score", position + 3, position,
                    (double)s1, position + 3 + offset, position + offset, (double)s2);
    }
    /* angles in double and rounded once, as the repository computes them */
    expect_close_floats("x", expected->data, got, SHAPE(d), 1e-5, 1e-4, 3);
}

const Exercise exercise = {"rope_rotate", "06_permutation_invariance", "6.4", 120, grade_case,
                           "rope_rotate rope_forward rope_backward rope_theta", NULL};
