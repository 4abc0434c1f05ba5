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
                      "head_size: num_hiddens 10 does not divide by num_heads 3: every head "
                      "needs the same size\n");
}

/* "H splits D" has one check, heads_split, and one message: the layer's
 * constructor (tests/test_multihead.c), the loaders (test_layer_files.c)
 * and the programs (test_bad_input.c) all print it. */
Test(heads, heads_split_is_the_one_check_of_the_sizes)
{
    char why[160] = "";
    cr_expect(heads_split(12, 4, "--hiddens", "--heads", why, sizeof why));
    cr_expect(heads_split(12, 1, "--hiddens", "--heads", why, sizeof why));
    cr_expect(heads_split(12, 12, "--hiddens", "--heads", why, sizeof why));
    cr_expect_str_eq(why, "", "a message although the heads split: %s", why);
    cr_expect(!heads_split(100, 3, "--hiddens", "--heads", why, sizeof why));
    cr_expect_str_eq(why, "--hiddens 100 does not divide by --heads 3: every head needs the "
                          "same size");
    cr_expect(!heads_split(12, 0, "num_hiddens", "num_heads", why, sizeof why));
    cr_expect_str_eq(why, "num_heads 0: a layer needs at least one head");
    cr_expect(!heads_split(12, 24, NULL, NULL, NULL, 0), "the answer alone, without names");
    cr_expect(!heads_split(12, -3, NULL, NULL, NULL, 0));
    cr_expect_eq(head_size(12, 4), 3);
}

/* a split into 0 heads, asked as transpose_qkv asks */
static void split_into_0_heads(void)
{
    head_size(12, 0);
}

Test(heads, head_size_stops_on_0_heads)
{
    expect_stops_with(split_into_0_heads,
                      "head_size: num_heads 0: a layer needs at least one head\n");
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

/* The occurrence-th "X = tensor(...)" the program printed, as (n0, n1, n2). */
static Tensor *printed_codes(const char *out, int occurrence, int n0, int n1, int n2)
{
    static double values[1024];
    Tensor *t = tensor_zeros(SHAPE(n0, n1, n2));
    int n = tensor_numbers_in(out, "X", occurrence, values, 1024);
    cr_assert_eq(n, (int)t->size, "print %d of X holds %d numbers, expected %zu", occurrence, n,
                 t->size);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (float)values[i];
    return t;
}

/* The printed integer list "name = tensor(...)" equals expected. */
static void expect_printed_ints(const char *out, const char *name, int occurrence,
                                const int *expected, int count)
{
    double values[64];
    int n = tensor_numbers_in(out, name, occurrence, values, 64);
    cr_assert_eq(n, count, "%s holds %d numbers, expected %d", name, n, count);
    for (int i = 0; i < count; i++)
        cr_expect_eq(values[i], expected[i], "%s[%d] = %g, expected %d", name, i, values[i],
                     expected[i]);
}

/* transpose_qkv B T D H with lengths: X, step 3 and the mistake are the
 * address codes where the library and a plain reshape put them, and the
 * lengths are repeated as repeat_interleave repeats them. Returns how many
 * elements the printed mistake puts elsewhere than transpose_qkv. */
static int check_program(int B, int T, int D, int H, const int *lens)
{
    char args[128];
    int used = snprintf(args, sizeof args, "--batch %d --queries %d --hiddens %d --heads %d "
                        "--valid-lens ", B, T, D, H);
    for (int b = 0; b < B; b++)
        used += snprintf(args + used, sizeof args - (size_t)used, "%s%d", b ? "," : "", lens[b]);
    RunResult r = run_program("04_transpose_qkv/transpose_qkv", args);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", args, r.status, r.err);

    Tensor *x = index_coded(B, T, D);
    Tensor *split = transpose_qkv(x, H);
    Tensor *shown_x = printed_codes(r.out, 0, B, T, D);
    Tensor *shown_split = printed_codes(r.out, 3, B * H, T, D / H);
    Tensor *shown_mistake = printed_codes(r.out, 4, B * H, T, D / H);
    cr_expect_eq(tensor_max_abs_diff(shown_x, x), 0.0f, "%s: X", args);
    cr_expect_eq(tensor_max_abs_diff(shown_split, split), 0.0f, "%s: step 3", args);
    int moved = 0;
    for (size_t i = 0; i < x->size; i++) {
        /* the mistake leaves memory in place */
        cr_expect_eq(shown_mistake->data[i], x->data[i], "%s: mistake element %zu", args, i);
        moved += shown_mistake->data[i] != split->data[i];
    }

    ValidLens *valid_lens = valid_lens_1d(lens, B);
    ValidLens *interleaved = valid_lens_repeat_interleave(valid_lens, H);
    int tiled[64];
    for (int i = 0; i < B * H; i++)
        tiled[i] = lens[i % B];
    expect_printed_ints(r.out, "interleaved", 0, interleaved->data, B * H);
    expect_printed_ints(r.out, "tiled", 0, tiled, B * H);

    Tensor *all[] = {x, split, shown_x, shown_split, shown_mistake};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    valid_lens_free(valid_lens);
    valid_lens_free(interleaved);
    run_result_free(&r);
    return moved;
}

Test(heads, program_follows_every_element)
{
    /* the defaults: 24 of 36 elements moved by the mistake */
    cr_expect_eq(check_program(2, 3, 6, 2, (const int[]){1, 3}), 24);
    cr_expect_eq(check_program(1, 4, 8, 4, (const int[]){2}), 24);
    cr_expect_eq(check_program(3, 5, 12, 3, (const int[]){0, 5, 2}), 144);
}

Test(heads, program_one_head_has_nothing_to_get_wrong)
{
    cr_expect_eq(check_program(2, 3, 6, 1, (const int[]){2, 2}), 0);
    cr_expect_eq(check_program(2, 1, 6, 3, (const int[]){1, 0}), 0);
    /* one of everything: the smallest sizes still run */
    cr_expect_eq(check_program(1, 1, 1, 1, (const int[]){1}), 0);
}

Test(heads, program_default_lengths_and_2d_repeat)
{
    RunResult r = run_program("04_transpose_qkv/transpose_qkv", "");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    /* default lengths spread from 1 to T = 3 */
    expect_printed_ints(r.out, "valid_lens", 0, (const int[]){1, 3}, 2);
    /* 2-D lengths (B, T) -> (B*H, T), each sequence's row twice in a row */
    const int lens_2d[] = {3, 2, 1, 2, 1, 3};
    expect_printed_ints(r.out, "valid_lens", 1, lens_2d, 6);
    ValidLens *valid_lens = valid_lens_2d(lens_2d, 2, 3);
    ValidLens *repeated = valid_lens_repeat_interleave(valid_lens, 2);
    expect_printed_ints(r.out, "repeat_interleave", 0, repeated->data, 12);
    valid_lens_free(valid_lens);
    valid_lens_free(repeated);
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
    /* status 0: every formula held on every element, as the program checks */
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    /* the counts it prints are the ones computed here independently */
    char line[128];
    snprintf(line, sizeof line, "%4d of %4d", count_moved_by_mistake(4, 7, 20, 5), 4 * 7 * 20);
    cr_expect(strstr(r.out, line), "missing '%s' in\n%s", line, r.out);
    snprintf(line, sizeof line, "%4d of %4d", count_moved_by_mistake(3, 5, 12, 3), 3 * 5 * 12);
    cr_expect(strstr(r.out, line), "missing '%s'", line);
    cr_expect(strstr(r.out, "   0 of   12"));
    run_result_free(&r);
}
