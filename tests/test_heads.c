/*
 * test_heads.c - the head split and merge of chapter 04 (common/heads.c)
 * and the chapter's programs.
 *
 * Legend: B = batch_size, T = num_queries, H = num_heads, D = num_hiddens,
 * d = D / H.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heads.h"
#include "helpers.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

/* Shapes (B, T, D, H) for the property checks, including H = 1, T = 1 and
 * d = 1, where index bugs like to hide. */
static const int SHAPES[][4] = {
    {2, 3, 6, 2}, {1, 1, 4, 4}, {3, 5, 12, 3}, {2, 4, 6, 1}, {4, 7, 20, 5}, {2, 6, 8, 8},
};
enum { NUM_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* X[b, t, j] = 1000*b + 100*t + j, the chapter's index-coded tensor */
static Tensor *index_coded(int B, int T, int D)
{
    Tensor *x = tensor_zeros(SHAPE(B, T, D));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT3(x, b, t, j) = (float)(1000 * b + 100 * t + j);
    return x;
}

Test(heads, transpose_qkv_puts_every_element_in_its_place)
{
    /* (2, 3, 6) with H = 2 -> (4, 3, 3); written out by hand from the
     * picture in heads.c: matrix b*H + h holds hiddens h*3 .. h*3+2. */
    static const float expected[] = {
        0,    1,    2,    100,  101,  102,  200,  201,  202,    /* seq 0, head 0 */
        3,    4,    5,    103,  104,  105,  203,  204,  205,    /* seq 0, head 1 */
        1000, 1001, 1002, 1100, 1101, 1102, 1200, 1201, 1202,   /* seq 1, head 0 */
        1003, 1004, 1005, 1103, 1104, 1105, 1203, 1204, 1205,   /* seq 1, head 1 */
    };
    Tensor *x = index_coded(2, 3, 6);
    Tensor *split = transpose_qkv(x, 2);
    cr_assert(tensor_has_shape(split, SHAPE(4, 3, 3)));
    cr_expect(floats_allclose(split->data, expected, 36, 0.0f, 0.0f, stderr));
    tensor_free(x);
    tensor_free(split);
}

Test(heads, transpose_qkv_three_heads_of_one)
{
    /* d = 1: every head is a single column. (1, 2, 3), H = 3 -> (3, 2, 1) */
    static const float expected[] = {0, 100, 1, 101, 2, 102};
    Tensor *x = index_coded(1, 2, 3);
    Tensor *split = transpose_qkv(x, 3);
    cr_assert(tensor_has_shape(split, SHAPE(3, 2, 1)));
    cr_expect(floats_allclose(split->data, expected, 6, 0.0f, 0.0f, stderr));
    tensor_free(x);
    tensor_free(split);
}

Test(heads, transpose_output_puts_heads_side_by_side)
{
    /* (4, 1, 2) with H = 2 -> (2, 1, 4): matrices 0, 1 are sequence 0's
     * heads, 2, 3 sequence 1's; each head fills its d columns. */
    static const float in[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const float expected[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const float in2[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    /* (2, 2, 3) H = 2 -> (1, 2, 6): token 0 = head 0 row 0 then head 1 row 0 */
    static const float expected2[] = {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12};
    Tensor *x = tensor_from(in, SHAPE(4, 1, 2));
    Tensor *merged = transpose_output(x, 2);
    cr_assert(tensor_has_shape(merged, SHAPE(2, 1, 4)));
    cr_expect(floats_allclose(merged->data, expected, 8, 0.0f, 0.0f, stderr));
    Tensor *x2 = tensor_from(in2, SHAPE(2, 2, 3));
    Tensor *merged2 = transpose_output(x2, 2);
    cr_assert(tensor_has_shape(merged2, SHAPE(1, 2, 6)));
    cr_expect(floats_allclose(merged2->data, expected2, 12, 0.0f, 0.0f, stderr));
    tensor_free(x);
    tensor_free(merged);
    tensor_free(x2);
    tensor_free(merged2);
}

Test(heads, transpose_qkv_equals_reshape_permute_reshape)
{
    /* d2l's three steps with the generic tensor functions, on random data */
    Rng rng = rng_new(11);
    for (int s = 0; s < NUM_SHAPES; s++) {
        const int B = SHAPES[s][0], T = SHAPES[s][1], D = SHAPES[s][2], H = SHAPES[s][3];
        Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, D));
        Tensor *view = tensor_copy(x);
        tensor_reshape(view, SHAPE(B, T, H, D / H));
        Tensor *ref = tensor_permute(view, (const int[]){0, 2, 1, 3});
        tensor_reshape(ref, SHAPE(B * H, T, D / H));
        Tensor *split = transpose_qkv(x, H);
        cr_expect(tensor_has_shape(split, SHAPE(B * H, T, D / H)), "shape %d", s);
        cr_expect(tensor_allclose(split, ref, 0.0f, 0.0f, stderr), "shape %d", s);
        tensor_free(x);
        tensor_free(view);
        tensor_free(ref);
        tensor_free(split);
    }
}

Test(heads, round_trip_is_exact)
{
    Rng rng = rng_new(12);
    for (int s = 0; s < NUM_SHAPES; s++) {
        const int B = SHAPES[s][0], T = SHAPES[s][1], D = SHAPES[s][2], H = SHAPES[s][3];
        Tensor *x = tensor_normal(&rng, 0.0f, 10.0f, SHAPE(B, T, D));
        Tensor *split = transpose_qkv(x, H);
        Tensor *back = transpose_output(split, H);
        cr_assert(tensor_has_shape(back, SHAPE(B, T, D)), "shape %d", s);
        /* bit for bit: moving a float never rounds it */
        cr_expect(memcmp(back->data, x->data, x->size * sizeof(float)) == 0, "shape %d", s);
        /* and the other direction */
        Tensor *again = transpose_qkv(back, H);
        cr_expect(memcmp(again->data, split->data, split->size * sizeof(float)) == 0);
        tensor_free(x);
        tensor_free(split);
        tensor_free(back);
        tensor_free(again);
    }
}

Test(heads, the_classic_mistake_differs)
{
    /* Reshaping straight to (B*H, T, d) is a different tensor whenever
     * H > 1 and T > 1: the test that would catch that bug. */
    Tensor *x = index_coded(2, 3, 6);
    Tensor *split = transpose_qkv(x, 2);
    Tensor *wrong = tensor_copy(x);
    tensor_reshape(wrong, SHAPE(4, 3, 3));
    cr_expect(!tensor_allclose(wrong, split, 0.0f, 0.0f, NULL));
    /* position 1 of matrix 0 holds token 0's hiddens 3..5 instead of token 1's 0..2 */
    cr_expect_eq(AT3(wrong, 0, 1, 0), 3.0f);
    cr_expect_eq(AT3(split, 0, 1, 0), 100.0f);
    tensor_free(x);
    tensor_free(split);
    tensor_free(wrong);
}

/* Kept in a static so the leak checker sees it reachable when the expected
 * error stops the process. */
static Tensor *kept;

static void split_10_hiddens_into_3(void)
{
    kept = tensor_zeros(SHAPE(1, 2, 10));
    transpose_qkv(kept, 3);
}

Test(heads, hiddens_not_divisible_by_heads_stops)
{
    expect_stops_with(split_10_hiddens_into_3,
                      "transpose_qkv: num_hiddens 10 does not divide by num_heads 3: every head "
                      "needs the same size num_hiddens / num_heads\n");
}

static void merge_5_rows_into_2_heads(void)
{
    kept = tensor_zeros(SHAPE(5, 2, 3));
    transpose_output(kept, 2);
}

Test(heads, transpose_output_rows_not_divisible_stops)
{
    expect_stops_with(merge_5_rows_into_2_heads,
                      "transpose_output: the first size 5 of x (batch_size * num_heads) does not "
                      "divide by num_heads 2\n");
}

Test(heads, repeat_interleave_1d)
{
    ValidLens *lens = valid_lens_1d((const int[]){3, 2}, 2);
    ValidLens *rep = valid_lens_repeat_interleave(lens, 3);
    cr_assert_eq(rep->ndim, 1);
    cr_assert_eq(rep->shape[0], 6);
    static const int expected[] = {3, 3, 3, 2, 2, 2};   /* not the tiling 3, 2, 3, 2, 3, 2 */
    for (int i = 0; i < 6; i++)
        cr_expect_eq(rep->data[i], expected[i], "row %d: %d, expected %d", i, rep->data[i],
                     expected[i]);
    valid_lens_free(lens);
    valid_lens_free(rep);
}

Test(heads, repeat_interleave_2d)
{
    ValidLens *lens = valid_lens_2d((const int[]){1, 2, 3, 4, 0, 5}, 2, 3);
    ValidLens *rep = valid_lens_repeat_interleave(lens, 2);
    cr_assert_eq(rep->ndim, 2);
    cr_assert_eq(rep->shape[0], 4);
    cr_assert_eq(rep->shape[1], 3);
    static const int expected[] = {1, 2, 3, 1, 2, 3, 4, 0, 5, 4, 0, 5};
    for (int i = 0; i < 12; i++)
        cr_expect_eq(rep->data[i], expected[i], "element %d: %d, expected %d", i,
                     rep->data[i], expected[i]);
    valid_lens_free(lens);
    valid_lens_free(rep);
}

Test(heads, repeat_interleave_of_no_mask_is_no_mask)
{
    cr_expect_null(valid_lens_repeat_interleave(NULL, 4));
}

/* ---- the chapter's programs ----------------------------------------------- */

Test(heads, program_runs_with_defaults)
{
    RunResult r = run_program("04_transpose_qkv/transpose_qkv", "");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "36 of 36 elements equal to step 3, 0 misplaced"), "%s", r.out);
    cr_expect(strstr(r.out, "largest difference 0 over 36 elements"));
    cr_expect(strstr(r.out, "24 of 36 elements are in the wrong place"));
    cr_expect(strstr(r.out, "interleaved = tensor([1, 1, 3, 3])"));
    cr_expect(strstr(r.out, "tiled = tensor([1, 3, 1, 3])"));
    cr_expect(strstr(r.out, "repeat_interleave 0.0000, tiling 2.0000"));
    /* matrix 1 of step 3 is sequence 0's head 1 */
    cr_expect(strstr(r.out, "[[   3,    4,    5],\n             [ 103,  104,  105],"));
    run_result_free(&r);
}

Test(heads, program_one_head_has_nothing_to_get_wrong)
{
    RunResult r = run_program("04_transpose_qkv/transpose_qkv", "--heads 1 --valid-lens 2,2");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "0 of 36 elements are in the wrong place"));
    cr_expect(strstr(r.out, "repeat_interleave 0.0000, tiling 0.0000"));
    run_result_free(&r);
}

Test(heads, program_reads_an_element_that_exists)
{
    /* the example element is sequence 1, token 2, hidden 5 when there are
     * such; with one sequence it must be sequence 0 */
    RunResult r = run_program("04_transpose_qkv/transpose_qkv", "");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "so 1205 is sequence 1, token 2, hidden 5.\n"), "%s", r.out);
    run_result_free(&r);
    r = run_program("04_transpose_qkv/transpose_qkv", "--batch 1");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "so 205 is sequence 0, token 2, hidden 5.\n"), "%s", r.out);
    run_result_free(&r);
    r = run_program("04_transpose_qkv/transpose_qkv", "--batch 1 --queries 2 --hiddens 4 --heads 2");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "so 103 is sequence 0, token 1, hidden 3.\n"), "%s", r.out);
    run_result_free(&r);
}

Test(heads, program_rejects_bad_options)
{
    static const char *const bad[] = {"--hiddens 5", "--heads 0", "--valid-lens 1",
                                      "--valid-lens 1,4", "--batch x", "--nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RunResult r = run_program("04_transpose_qkv/transpose_qkv", bad[i]);
        cr_expect_eq(r.status, 2, "'%s' exited with %d", bad[i], r.status);
        cr_expect(r.err && strncmp(r.err, "transpose_qkv: ", 15) == 0, "'%s': %s", bad[i], r.err);
        /* exactly one line */
        cr_expect(r.err && strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "'%s': %s", bad[i],
                  r.err);
        run_result_free(&r);
    }
}

/* How many elements the reshape-without-permute puts somewhere else. */
static int count_moved_by_mistake(int B, int T, int D, int H)
{
    Tensor *x = index_coded(B, T, D);
    Tensor *right = transpose_qkv(x, H);
    int moved = 0;
    for (size_t i = 0; i < x->size; i++)   /* the mistake leaves memory in place */
        moved += right->data[i] != x->data[i];
    tensor_free(x);
    tensor_free(right);
    return moved;
}

Test(heads, exercise_solution_checks_its_formulas)
{
    RunResult r = run_program("04_transpose_qkv/exercise_head_split", "--seed 3");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "All checks hold"));
    cr_expect(!strstr(r.out, "BROKEN") && !strstr(r.out, "DIFFERS"));
    /* the counts it prints are the ones computed here independently */
    char line[128];
    snprintf(line, sizeof line, "%4d of %4d", count_moved_by_mistake(4, 7, 20, 5), 4 * 7 * 20);
    cr_expect(strstr(r.out, line), "missing '%s' in\n%s", line, r.out);
    snprintf(line, sizeof line, "%4d of %4d", count_moved_by_mistake(3, 5, 12, 3), 3 * 5 * 12);
    cr_expect(strstr(r.out, line), "missing '%s'", line);
    cr_expect(strstr(r.out, "   0 of   12"));
    run_result_free(&r);
}
