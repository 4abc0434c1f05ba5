/* test_tensor.c - creation, reshape, permute, printing and allclose. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tensor.h"

/* What tensor_fprint writes, as a string the test frees. */
static char *print_to_string(const Tensor *x)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tensor_fprint(f, x);
    fclose(f);
    return buf;
}

static void expect_prints(const Tensor *x, const char *expected)
{
    char *got = print_to_string(x);
    cr_expect_str_eq(got, expected, "printed:\n%s\nexpected:\n%s", got, expected);
    free(got);
}

Test(tensor, creation_values_and_shape)
{
    Tensor *z = tensor_zeros(SHAPE(2, 3, 4));
    cr_expect_eq(z->ndim, 3);
    cr_expect_eq(z->shape[0], 2);
    cr_expect_eq(z->shape[1], 3);
    cr_expect_eq(z->shape[2], 4);
    cr_expect_eq(z->size, 24);
    for (size_t i = 0; i < z->size; i++)
        cr_expect_eq(z->data[i], 0.0f);

    Tensor *o = tensor_full(2.5f, SHAPE(5));
    for (size_t i = 0; i < o->size; i++)
        cr_expect_eq(o->data[i], 2.5f);

    const float values[] = {1, -2, 3, -4, 5, -6};
    Tensor *x = tensor_from(values, SHAPE(2, 3));
    cr_expect_eq(AT2(x, 0, 0), 1.0f);
    cr_expect_eq(AT2(x, 0, 2), 3.0f);
    cr_expect_eq(AT2(x, 1, 0), -4.0f);
    cr_expect_eq(AT2(x, 1, 2), -6.0f);

    Tensor *c = tensor_copy(x);
    AT2(c, 1, 1) = 100.0f;
    cr_expect_eq(AT2(x, 1, 1), 5.0f, "a copy does not share data");

    tensor_free(z);
    tensor_free(o);
    tensor_free(x);
    tensor_free(c);
}

Test(tensor, at_macros_follow_row_major_order)
{
    Tensor *x = tensor_arange(SHAPE(2, 3, 4, 5));
    /* flat index of [b][h][t][d] is ((b * 3 + h) * 4 + t) * 5 + d */
    cr_expect_eq(AT4(x, 1, 2, 3, 4), 119.0f);
    cr_expect_eq(AT4(x, 1, 0, 2, 1), (float)(((1 * 3 + 0) * 4 + 2) * 5 + 1));
    tensor_reshape(x, SHAPE(6, 4, 5));
    cr_expect_eq(AT3(x, 4, 1, 3), (float)((4 * 4 + 1) * 5 + 3));
    tensor_free(x);
}

Test(tensor, seeded_uniform_and_normal_are_reproducible)
{
    Rng a = rng_new(11), b = rng_new(11);
    Tensor *u1 = tensor_uniform(&a, -2.0f, 3.0f, SHAPE(100));
    Tensor *u2 = tensor_uniform(&b, -2.0f, 3.0f, SHAPE(100));
    cr_expect_eq(memcmp(u1->data, u2->data, 100 * sizeof(float)), 0);
    for (size_t i = 0; i < u1->size; i++)
        cr_expect(u1->data[i] >= -2.0f && u1->data[i] < 3.0f);
    Tensor *n = tensor_normal(&a, 10.0f, 0.5f, SHAPE(2000));
    double mean = 0;
    for (size_t i = 0; i < n->size; i++)
        mean += n->data[i];
    mean /= (double)n->size;
    cr_expect(fabs(mean - 10.0) < 0.05, "mean %g", mean);
    tensor_free(u1);
    tensor_free(u2);
    tensor_free(n);
}

Test(tensor, reshape_infers_minus_one_and_keeps_data)
{
    Tensor *x = tensor_arange(SHAPE(2, 3, 4));
    tensor_reshape(x, SHAPE(4, -1));
    cr_expect_eq(x->ndim, 2);
    cr_expect_eq(x->shape[0], 4);
    cr_expect_eq(x->shape[1], 6);
    cr_expect_eq(AT2(x, 2, 5), 17.0f, "row-major data does not move");
    tensor_reshape(x, SHAPE(-1, 2, 2, 3));
    cr_expect_eq(x->shape[0], 2);
    cr_expect_eq(AT4(x, 1, 1, 0, 2), 20.0f);
    tensor_free(x);
}

/* Tests that expect the process to stop keep their tensors in statics:
 * still reachable at exit, so the leak checker does not count them. */
static Tensor *kept;

static void reshape_wrong_size(void)
{
    kept = tensor_arange(SHAPE(2, 3));
    tensor_reshape(kept, SHAPE(4, -1));
}

Test(tensor, reshape_to_wrong_size_stops)
{
    int status;
    char *err = stderr_of(reshape_wrong_size, &status);
    cr_expect_eq(status, DIE_STATUS);
    cr_expect_str_eq(err, "tensor_reshape: cannot view (2, 3) as (4, *): "
                          "6 elements do not divide by 4\n");
    free(err);
}

Test(tensor, permute_moves_every_element)
{
    Tensor *x = tensor_arange(SHAPE(2, 3, 4));   /* x[i][j][k] = 12i + 4j + k */
    Tensor *y = tensor_permute(x, (const int[]){2, 0, 1});
    cr_expect_eq(y->shape[0], 4);
    cr_expect_eq(y->shape[1], 2);
    cr_expect_eq(y->shape[2], 3);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                cr_expect_eq(AT3(y, k, i, j), AT3(x, i, j, k), "y[%d][%d][%d]", k, i, j);
    /* Row-major order of y, written out: y[0] = x[:, :, 0] */
    const float first_row[] = {0, 4, 8, 12, 16, 20, 1, 5};
    for (int i = 0; i < 8; i++)
        cr_expect_eq(y->data[i], first_row[i]);

    Tensor *w = tensor_arange(SHAPE(2, 3, 4, 5));
    Tensor *v = tensor_permute(w, (const int[]){0, 2, 1, 3});  /* the head permute */
    cr_expect_eq(AT4(v, 1, 3, 2, 4), AT4(w, 1, 2, 3, 4));
    cr_expect_eq(AT4(v, 0, 1, 2, 0), AT4(w, 0, 2, 1, 0));
    tensor_free(x);
    tensor_free(y);
    tensor_free(w);
    tensor_free(v);
}

/* the function that checks, named by tensor_check_shape's macro */
static void my_function(void)
{
    kept = tensor_zeros(SHAPE(2, 3, 5));
    tensor_check_shape("keys", kept, SHAPE(2, -1, 4));
}

Test(tensor, shape_check_names_function_and_shapes)
{
    int status;
    char *err = stderr_of(my_function, &status);
    cr_expect_eq(status, DIE_STATUS);
    cr_expect_str_eq(err, "tensor_check_shape: keys expected shape (2, *, 4), got (2, 3, 5)\n");
    free(err);
}

Test(tensor, shape_strings)
{
    char buf[64];
    cr_expect_str_eq(shape_str(buf, sizeof buf, SHAPE(2, 4, 100)), "(2, 4, 100)");
    cr_expect_str_eq(shape_str(buf, sizeof buf, SHAPE(3)), "(3,)");
    cr_expect_str_eq(shape_str(buf, sizeof buf, SHAPE(2, -1)), "(2, *)");
    cr_expect(tensor_has_shape(&(Tensor){.ndim = 2, .shape = {2, 3, 1, 1}, .size = 6}, SHAPE(-1, 3)));
}

/* x = arange(24).reshape(2, 3, 4): element [a][b][c] is 12a + 4b + c, so
 * every expected value below can be read off its index. */
static void expect_values(const Tensor *x, const float *expected, size_t n)
{
    cr_assert_eq(x->size, n);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(x->data[i], expected[i], "element %zu: %g, expected %g", i,
                     (double)x->data[i], (double)expected[i]);
}

Test(pieces, slice_along_each_dimension_like_narrow)
{
    Tensor *x = tensor_arange(SHAPE(2, 3, 4));

    Tensor *cols = tensor_slice(x, 2, 1, 2);   /* x[:, :, 1:3] */
    cr_expect(tensor_has_shape(cols, SHAPE(2, 3, 2)));
    expect_values(cols, (const float[]){1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}, 12);

    Tensor *rows = tensor_slice(x, 1, 2, 1);   /* x[:, 2:3] */
    cr_expect(tensor_has_shape(rows, SHAPE(2, 1, 4)));
    expect_values(rows, (const float[]){8, 9, 10, 11, 20, 21, 22, 23}, 8);

    Tensor *second = tensor_slice(x, 0, 1, 1);   /* x[1:2] */
    cr_expect(tensor_has_shape(second, SHAPE(1, 3, 4)));
    for (size_t i = 0; i < second->size; i++)
        cr_expect_eq(second->data[i], 12.0f + (float)i);

    Tensor *whole = tensor_slice(x, 1, 0, 3);
    cr_expect(tensor_allclose(whole, x, 0.0f, 0.0f, stderr), "the whole range is a copy");
    AT3(whole, 0, 0, 0) = 100.0f;
    cr_expect_eq(AT3(x, 0, 0, 0), 0.0f, "a slice does not share data");
    TENSOR_FREE(x, cols, rows, second, whole);
}

Test(pieces, select_drops_the_dimension_like_x_index)
{
    Tensor *x = tensor_arange(SHAPE(2, 3, 4));

    Tensor *x1 = tensor_select(x, 0, 1);   /* x[1] */
    cr_expect(tensor_has_shape(x1, SHAPE(3, 4)));
    for (size_t i = 0; i < x1->size; i++)
        cr_expect_eq(x1->data[i], 12.0f + (float)i);

    Tensor *mid = tensor_select(x, 1, 1);   /* x[:, 1] */
    cr_expect(tensor_has_shape(mid, SHAPE(2, 4)));
    expect_values(mid, (const float[]){4, 5, 6, 7, 16, 17, 18, 19}, 8);

    Tensor *last = tensor_select(x, 2, 3);   /* x[:, :, 3] */
    cr_expect(tensor_has_shape(last, SHAPE(2, 3)));
    expect_values(last, (const float[]){3, 7, 11, 15, 19, 23}, 6);

    Tensor *w = tensor_arange(SHAPE(2, 2, 3, 2));   /* (B, H, T, K) */
    Tensor *head = tensor_select(w, 1, 1);          /* w[:, 1] (B, T, K) */
    cr_expect(tensor_has_shape(head, SHAPE(2, 3, 2)));
    expect_values(head, (const float[]){6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23}, 12);
    TENSOR_FREE(x, x1, mid, last, w, head);
}

Test(pieces, stack_puts_tensors_one_after_another)
{
    Tensor *a = tensor_from((const float[]){1, 2, 3, 4}, SHAPE(2, 2));
    Tensor *b = tensor_from((const float[]){-1, -2, -3, -4}, SHAPE(2, 2));
    Tensor *ab = TENSOR_STACK(a, b, a);
    cr_expect(tensor_has_shape(ab, SHAPE(3, 2, 2)));
    expect_values(ab, (const float[]){1, 2, 3, 4, -1, -2, -3, -4, 1, 2, 3, 4}, 12);
    Tensor *back = tensor_select(ab, 0, 1);
    cr_expect(tensor_allclose(back, b, 0.0f, 0.0f, stderr), "select undoes stack");
    TENSOR_FREE(a, b, ab, back);
}

Test(pieces, free_all_takes_null_and_any_count)
{
    /* Under make sanitize a tensor left out here shows as a leak. */
    Tensor *list[3] = {tensor_zeros(SHAPE(2)), NULL, tensor_ones(SHAPE(3, 3))};
    tensor_free_all(list, 3);
    tensor_free_all(NULL, 0);
    TENSOR_FREE(tensor_zeros(SHAPE(1)));
    TENSOR_FREE(NULL, tensor_arange(SHAPE(2, 2)), NULL);
}

static void slice_past_the_end(void)
{
    kept = tensor_zeros(SHAPE(2, 3, 4));
    tensor_slice(kept, 1, 2, 2);
}

static void select_out_of_range(void)
{
    kept = tensor_zeros(SHAPE(2, 3));
    tensor_select(kept, 0, 2);
}

static Tensor *kept_too;   /* reachable, like kept, when the process stops */

static void stack_different_shapes(void)
{
    kept = tensor_zeros(SHAPE(2, 3));
    kept_too = tensor_zeros(SHAPE(3, 2));
    TENSOR_STACK(kept, kept_too);
}

Test(pieces, out_of_range_stops_with_a_message)
{
    expect_stops_with(slice_past_the_end, "tensor_slice: indices 2 to 3 are not inside "
                      "dimension 1 of shape (2, 3, 4)\n");
    expect_stops_with(select_out_of_range, "tensor_select: index 2 of dimension 0 is not "
                      "inside shape (2, 3)\n");
    expect_stops_with(stack_different_shapes, "tensor_stack: tensor 1 has shape (3, 2), "
                      "tensor 0 has (2, 3)\n");
}

static void make_impossible_tensor(void)
{
    tensor_zeros(SHAPE(1 << 30, 1 << 30, 1 << 30));
}

Test(tensor, impossible_size_stops_with_a_message)
{
    int status;
    char *err = stderr_of(make_impossible_tensor, &status);
    cr_expect_eq(status, DIE_STATUS);
    cr_expect_str_eq(err, "tensor_alloc_with: cannot make a tensor of shape "
                          "(1073741824, 1073741824, 1073741824): every size must be "
                          "positive and the total must fit in memory\n");
    free(err);
}

Test(print, one_dimension)
{
    const float v[] = {0.4324f, 0.5676f, 0.0f, 0.0f};
    Tensor *x = tensor_from(v, SHAPE(4));
    expect_prints(x, "tensor([0.4324, 0.5676, 0.0000, 0.0000])");
    tensor_free(x);
}

Test(print, two_dimensions_align_negative_values)
{
    const float v[] = {0.8063f, 0.5281f, 2.7724f, 1.4511f, -0.4305f, 1.3205f};
    Tensor *x = tensor_from(v, SHAPE(2, 3));
    expect_prints(x, "tensor([[ 0.8063,  0.5281,  2.7724],\n"
                     "        [ 1.4511, -0.4305,  1.3205]])");
    tensor_free(x);
}

Test(print, three_dimensions_leave_a_blank_line_between_blocks)
{
    const float v[] = {0.5f, 0.5f, 1.0f, 0.0f, 0.25f, 0.75f, -0.0f, 12.5f};
    Tensor *x = tensor_from(v, SHAPE(2, 2, 2));
    expect_prints(x, "tensor([[[ 0.5000,  0.5000],\n"
                     "         [ 1.0000,  0.0000]],\n"
                     "\n"
                     "        [[ 0.2500,  0.7500],\n"
                     "         [ 0.0000, 12.5000]]])");
    tensor_free(x);
}

Test(print, nan_and_infinity)
{
    const float v[] = {NAN, INFINITY, -INFINITY, 1.0f};
    Tensor *x = tensor_from(v, SHAPE(1, 4));
    expect_prints(x, "tensor([[   nan,    inf,   -inf, 1.0000]])");
    tensor_free(x);
}

Test(print, large_tensors_are_summarised_like_pytorch)
{
    Tensor *x = tensor_arange(SHAPE(1001));
    tensor_reshape(x, SHAPE(1001));
    char *got = print_to_string(x);
    cr_expect(strncmp(got, "tensor([   0.0000,    1.0000,    2.0000, ...,  998.0000,", 55) == 0,
              "got %.80s", got);
    cr_expect(strstr(got, "1000.0000])") != NULL);
    free(got);
    tensor_free(x);
}

Test(allclose, passes_within_tolerance_and_fails_outside)
{
    const float e[] = {1.0f, -2.0f, 100.0f};
    const float a_ok[] = {1.00001f, -2.00001f, 100.001f};
    const float a_bad[] = {1.0f, -2.1f, 100.0f};
    Tensor *expected = tensor_from(e, SHAPE(3));
    Tensor *ok = tensor_from(a_ok, SHAPE(3));
    Tensor *bad = tensor_from(a_bad, SHAPE(3));
    cr_expect(tensor_allclose(ok, expected, 1e-4f, 1e-5f, NULL));
    cr_expect_not(tensor_allclose(bad, expected, 1e-4f, 1e-5f, NULL));
    /* rtol matters: 100.001 is within 1e-5 * 100 but not within atol alone */
    cr_expect_not(tensor_allclose(ok, expected, 1e-4f, 0.0f, NULL));

    char *report = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&report, &len);
    cr_expect_not(tensor_allclose(bad, expected, 1e-4f, 1e-5f, f));
    fclose(f);
    cr_expect(strstr(report, "1 of 3 elements differ") != NULL, "report: %s", report);
    cr_expect(strstr(report, "worst at [1]") != NULL, "report: %s", report);
    free(report);
    tensor_free(expected);
    tensor_free(ok);
    tensor_free(bad);
}

Test(allclose, nan_and_shape_mismatch_never_match)
{
    const float e[] = {1.0f, 2.0f};
    const float n[] = {1.0f, NAN};
    Tensor *expected = tensor_from(e, SHAPE(2));
    Tensor *with_nan = tensor_from(n, SHAPE(2));
    Tensor *other_shape = tensor_from(e, SHAPE(1, 2));
    cr_expect_not(tensor_allclose(with_nan, expected, 1.0f, 1.0f, NULL));
    cr_expect_not(tensor_allclose(other_shape, expected, 1.0f, 1.0f, NULL));
    cr_expect(isnan(tensor_max_abs_diff(with_nan, expected)));
    /* a NaN first, then a finite difference: still NaN, never 0.1 */
    const float late[] = {NAN, 1.0f}, other[] = {0.0f, 1.1f};
    Tensor *nan_first = tensor_from(late, SHAPE(2)), *finite = tensor_from(other, SHAPE(2));
    cr_expect(isnan(tensor_max_abs_diff(nan_first, finite)));
    cr_expect(isnan(tensor_max_abs(nan_first)));
    tensor_free(nan_first);
    tensor_free(finite);
    tensor_free(expected);
    tensor_free(with_nan);
    tensor_free(other_shape);
}

/* x86's arithmetic NaN (0/0, inf - inf) has its sign bit set, and printf
 * writes it as "-nan"; what the comparisons return and report must read
 * "nan" or "NaN" instead. */
Test(non_finite, a_nan_is_never_printed_as_minus_nan)
{
    volatile float zero = 0.0f;
    const float negative_nan = -(zero / zero);
    const float minus = signbit(negative_nan) ? negative_nan : -negative_nan;
    cr_assert(isnan(minus) && signbit(minus), "the test needs a NaN with its sign bit set");
    const float a_data[] = {1.0f, minus, 3.0f}, b_data[] = {1.0f, 2.0f, 3.0f};
    Tensor *a = tensor_from(a_data, SHAPE(3));
    Tensor *b = tensor_from(b_data, SHAPE(3));
    char text[32];
    const float diff = tensor_max_abs_diff(a, b), largest = tensor_max_abs(a);
    cr_expect(isnan(diff) && !signbit(diff));
    cr_expect(isnan(largest) && !signbit(largest));
    snprintf(text, sizeof text, "%g %g", (double)diff, (double)largest);
    cr_expect_str_eq(text, "nan nan");

    char *report = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&report, &len);
    cr_expect_not(tensor_allclose(a, b, 1e-5f, 1e-5f, f));
    fclose(f);
    cr_expect(strstr(report, "worst at [1]: actual nan, expected 2, |diff| nan") != NULL,
              "report: %s", report);
    cr_expect(strstr(report, "-nan") == NULL, "report: %s", report);
    free(report);

    cr_expect_str_eq(non_finite_name(minus), "NaN");
    cr_expect_str_eq(non_finite_name(INFINITY), "inf");
    cr_expect_str_eq(non_finite_name(-INFINITY), "-inf");
    cr_expect_str_eq(non_finite_name(1e38), "finite");
    tensor_free(a);
    tensor_free(b);
}

Test(non_finite, first_non_finite_and_its_index)
{
    Tensor *x = tensor_zeros(SHAPE(2, 3, 2));
    cr_expect_eq(tensor_first_non_finite(x), SIZE_MAX);
    x->data[11] = INFINITY;
    x->data[7] = NAN;
    cr_expect_eq(tensor_first_non_finite(x), 7);
    char where[32];
    cr_expect_str_eq(tensor_index_str(where, sizeof where, 7, x->ndim, x->shape), "[1, 0, 1]");
    cr_expect_str_eq(tensor_index_str(where, sizeof where, 11, x->ndim, x->shape), "[1, 2, 1]");
    cr_expect_str_eq(tensor_index_str(where, sizeof where, 0, x->ndim, x->shape), "[0, 0, 0]");
    tensor_free(x);
}
