/*
 * test_npy.c - .npy files: NumPy's own files of every dtype read right,
 * the versions np.save does not write refused, round trips, byte-for-byte agreement with np.save, every malformed
 * case refused with its message, and the fuzzer's regression files.
 *
 * The fixtures in tests/fixtures/npy were written by NumPy; the script that
 * made them, make_npy_fixtures.py, sits beside them and lists the values
 * that are repeated here.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "helpers.h"
#include "io/npy.h"

#define FIXTURES "tests/fixtures/npy/"
#define REGRESSIONS "tests/fuzz/regressions/npy/"

/* ---- small helpers ------------------------------------------------------- */

static void expect_shape(const int *shape, int ndim, int want_ndim, const int *want,
                         const char *what)
{
    cr_expect_eq(ndim, want_ndim, "%s: ndim %d, expected %d", what, ndim, want_ndim);
    for (int i = 0; i < want_ndim && i < ndim; i++)
        cr_expect_eq(shape[i], want[i], "%s: shape[%d] = %d, expected %d", what, i, shape[i],
                     want[i]);
}

/* Exact equality: the numbers went through no arithmetic. */
static void expect_floats(const Tensor *x, const float *want, size_t n, const char *what)
{
    cr_assert_eq(x->size, n, "%s: %zu values, expected %zu", what, x->size, n);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(x->data[i], want[i], "%s: value %zu is %.9g, expected %.9g", what, i,
                     (double)x->data[i], (double)want[i]);
}

static unsigned char *read_bytes(const char *path, size_t *len)
{
    char *text = read_text_file(path, len);
    cr_assert_not_null(text, "cannot read %s", path);
    return (unsigned char *)text;
}

static char scratch[64];

static void make_scratch(void)
{
    scratch_dir_make(scratch, sizeof scratch, "npy_test");
    cr_assert(scratch[0] != '\0', "cannot make a scratch directory");
}

static void remove_scratch(void)
{
    scratch_dir_remove(scratch);
}

static int count_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot list %s", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* ---- NumPy's files, every dtype ------------------------------------------ */

/* The values of make_npy_fixtures.py, as C literals of the same type. */
static const float F4_VALUES[] = {1.5f, -20.25f, 300.0f, -4.0f, 0.125f, -6e-3f};
static const float F8_VALUES[] = {(float)0.1, (float)-2.7, (float)1e10, (float)-1e-10};
static const int I4_VALUES[] = {3, 0, -7, 2147483647, -2147483647 - 1};
static const int I8_VALUES[] = {2, 6, -1, 4};

Test(npy, reads_float_files)
{
    char path[128] = FIXTURES "v1_f4.npy", err[NPY_ERR_LEN];
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert_not_null(x, "%s", err);
    cr_expect_str_eq(err, "", "no message on success");
    expect_shape(x->shape, x->ndim, 2, (const int[]){2, 3}, path);
    expect_floats(x, F4_VALUES, 6, path);
    tensor_free(x);

    /* '<f8' becomes float32: each value rounded once, as torch's .float() */
    snprintf(path, sizeof path, FIXTURES "v1_f8.npy");
    x = npy_load(path, err, sizeof err);
    cr_assert_not_null(x, "%s", err);
    expect_shape(x->shape, x->ndim, 3, (const int[]){2, 2, 1}, path);
    expect_floats(x, F8_VALUES, 4, path);
    tensor_free(x);
}

Test(npy, reads_integer_files)
{
    char path[128], err[NPY_ERR_LEN];
    NpyInts ints;

    snprintf(path, sizeof path, FIXTURES "v1_i4.npy");
    cr_assert_eq(npy_load_ints(path, &ints, err, sizeof err), 0, "%s", err);
    expect_shape(ints.shape, ints.ndim, 1, (const int[]){5}, path);
    cr_assert_eq(ints.size, 5);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(ints.data[i], I4_VALUES[i], "%s[%d] = %d", path, i, ints.data[i]);
    npy_ints_free(&ints);
    cr_expect_null(ints.data, "npy_ints_free forgets the data");

    snprintf(path, sizeof path, FIXTURES "v1_i8.npy");
    cr_assert_eq(npy_load_ints(path, &ints, err, sizeof err), 0, "%s", err);
    expect_shape(ints.shape, ints.ndim, 2, (const int[]){2, 2}, path);
    cr_assert_eq(ints.size, 4);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(ints.data[i], I8_VALUES[i], "%s[%d] = %d", path, i, ints.data[i]);
    npy_ints_free(&ints);

    /* integers also load as floats, like torch's .float() */
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert_not_null(x, "%s", err);
    expect_floats(x, (const float[]){2.0f, 6.0f, -1.0f, 4.0f}, 4, path);
    tensor_free(x);
}

Test(npy, four_dimensions_in_row_major_order)
{
    char err[NPY_ERR_LEN];
    Tensor *x = npy_load(FIXTURES "v1_f4_4d.npy", err, sizeof err);
    cr_assert_not_null(x, "%s", err);
    expect_shape(x->shape, x->ndim, 4, (const int[]){2, 1, 3, 4}, "v1_f4_4d.npy");
    /* np.arange(24) * 0.5 - 3 reshaped: x[b][0][t][d] = (12 b + 4 t + d) / 2 - 3 */
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 3; t++)
            for (int d = 0; d < 4; d++)
                cr_expect_eq(AT4(x, b, 0, t, d), (float)(12 * b + 4 * t + d) * 0.5f - 3.0f,
                             "x[%d][0][%d][%d] = %g", b, t, d, (double)AT4(x, b, 0, t, d));
    tensor_free(x);
}

/* ---- writing ------------------------------------------------------------- */

Test(npy, round_trip_of_floats_and_ints, .init = make_scratch, .fini = remove_scratch)
{
    char path[512], err[NPY_ERR_LEN];
    Rng rng = rng_new(11);
    Tensor *x = tensor_normal(&rng, 0.0f, 3.0f, SHAPE(2, 3, 4, 5));
    snprintf(path, sizeof path, "%s/x.npy", scratch);
    cr_assert_eq(npy_save(path, x, err, sizeof err), 0, "%s", err);
    Tensor *back = npy_load(path, err, sizeof err);
    cr_assert_not_null(back, "%s", err);
    expect_shape(back->shape, back->ndim, 4, x->shape, "round trip");
    expect_floats(back, x->data, x->size, "round trip");

    const int lens[] = {3, -2, 0, 2147483647, -2147483647 - 1, 6};
    snprintf(path, sizeof path, "%s/valid_lens.npy", scratch);
    cr_assert_eq(npy_save_ints(path, lens, SHAPE(2, 3), err, sizeof err), 0, "%s", err);
    NpyInts ints;
    cr_assert_eq(npy_load_ints(path, &ints, err, sizeof err), 0, "%s", err);
    expect_shape(ints.shape, ints.ndim, 2, (const int[]){2, 3}, "ints round trip");
    for (int i = 0; i < 6; i++)
        cr_expect_eq(ints.data[i], lens[i]);
    npy_ints_free(&ints);
    tensor_free(x);
    tensor_free(back);
}

/* np.save of the same array gives the same bytes: what we write is what
 * NumPy writes, so NumPy reads it. */
static void expect_same_bytes(const char *written, const char *by_numpy)
{
    size_t len_a, len_b;
    unsigned char *a = read_bytes(written, &len_a);
    unsigned char *b = read_bytes(by_numpy, &len_b);
    cr_expect_eq(len_a, len_b, "%s is %zu bytes, NumPy's %zu", written, len_a, len_b);
    size_t first = 0;
    while (first < len_a && first < len_b && a[first] == b[first])
        first++;
    cr_expect(first == len_a && len_a == len_b, "%s differs from %s at byte %zu",
              written, by_numpy, first);
    free(a);
    free(b);
}

Test(npy, writes_what_numpy_save_writes, .init = make_scratch, .fini = remove_scratch)
{
    char path[512], err[NPY_ERR_LEN];
    const char *float_files[] = {FIXTURES "v1_f4.npy", FIXTURES "v1_f4_4d.npy"};
    for (int i = 0; i < 2; i++) {
        Tensor *x = npy_load(float_files[i], err, sizeof err);
        cr_assert_not_null(x, "%s", err);
        snprintf(path, sizeof path, "%s/copy.npy", scratch);
        cr_assert_eq(npy_save(path, x, err, sizeof err), 0, "%s", err);
        expect_same_bytes(path, float_files[i]);
        tensor_free(x);
    }
    NpyInts ints;
    cr_assert_eq(npy_load_ints(FIXTURES "v1_i4.npy", &ints, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/ints.npy", scratch);
    cr_assert_eq(npy_save_ints(path, ints.data, ints.ndim, ints.shape, err, sizeof err), 0,
                 "%s", err);
    expect_same_bytes(path, FIXTURES "v1_i4.npy");
    npy_ints_free(&ints);
    cr_expect_eq(count_files(scratch), 2, "no temporary file is left");
}

Test(npy, save_into_a_missing_directory, .init = make_scratch, .fini = remove_scratch)
{
    char path[512], err[NPY_ERR_LEN], expected[600];
    Tensor *x = tensor_arange(SHAPE(3));
    snprintf(path, sizeof path, "%s/missing/x.npy", scratch);
    cr_expect_eq(npy_save(path, x, err, sizeof err), -1);
    snprintf(expected, sizeof expected, "%s: cannot write: No such file or directory", path);
    cr_expect_str_eq(err, expected);
    cr_expect_eq(npy_save_ints(path, (const int[]){1, 2}, SHAPE(2), err, sizeof err), -1);
    cr_expect_str_eq(err, expected);
    cr_expect_eq(count_files(scratch), 0);
    tensor_free(x);
}

Test(npy, save_ints_refuses_a_bad_shape, .init = make_scratch, .fini = remove_scratch)
{
    char path[512], err[NPY_ERR_LEN], expected[600];
    snprintf(path, sizeof path, "%s/v.npy", scratch);
    cr_expect_eq(npy_save_ints(path, (const int[]){1}, SHAPE(2, 0), err, sizeof err), -1);
    snprintf(expected, sizeof expected,
             "%s: cannot save shape (2, 0): every size must be positive", path);
    cr_expect_str_eq(err, expected);
    cr_expect_eq(npy_save_ints(path, (const int[]){1}, 0, (const int[]){1}, err, sizeof err), -1);
    snprintf(expected, sizeof expected, "%s: cannot save 0 dimensions; a tensor has 1 to 4", path);
    cr_expect_str_eq(err, expected);
    cr_expect_eq(count_files(scratch), 0);
}

/* A disk that fills up halfway through a set: the file size limit makes
 * the write fail (EFBIG, not the silent end SIGXFSZ would bring). The
 * earlier set must stay as it was, the line must name the file by its
 * final name, and nothing may be left beside the directory. Criterion runs
 * each test in its own process, so the limit ends with the test. */
Test(npy, failed_write_leaves_the_old_set, .init = make_scratch, .fini = remove_scratch)
{
    char path[512], err[NPY_ERR_LEN], expected[600];
    snprintf(path, sizeof path, "%s/x.npy", scratch);
    Tensor *small = tensor_arange(SHAPE(2));
    FileSet *set = fileset_begin(scratch, err, sizeof err);
    cr_assert_not_null(set, "%s", err);
    cr_assert_eq(npy_save_into(set, scratch, "x", small, err, sizeof err), 0, "%s", err);
    cr_assert_eq(fileset_commit(set, err, sizeof err), 0, "%s", err);
    size_t before_len;
    unsigned char *before = read_bytes(path, &before_len);

    struct rlimit limit = {4096, 4096};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &limit), 0);
    Tensor *big = tensor_arange(SHAPE(64, 64));   /* 16 KB of data */
    set = fileset_begin(scratch, err, sizeof err);
    cr_assert_not_null(set, "%s", err);
    cr_expect_eq(npy_save_into(set, scratch, "x", big, err, sizeof err), -1);
    fileset_abandon(set);
    snprintf(expected, sizeof expected, "%s: cannot write: File too large", path);
    cr_expect_str_eq(err, expected);

    size_t after_len;
    unsigned char *after = read_bytes(path, &after_len);
    cr_expect(after_len == before_len && memcmp(after, before, before_len) == 0,
              "the earlier file is untouched");
    cr_expect_eq(count_files(scratch), 1);
    cr_expect_eq(set_leftovers(scratch), 0, "something is left beside the directory");
    free(before);
    free(after);
    tensor_free(small);
    tensor_free(big);
}

/* A NaN or an infinity is never written into a set: the line names the
 * file and the element, and the set can still be abandoned whole. */
Test(npy, a_set_refuses_a_number_that_is_not_finite, .init = make_scratch,
     .fini = remove_scratch)
{
    char err[NPY_ERR_LEN], expected[600];
    Tensor *x = tensor_arange(SHAPE(2, 3));
    x->data[4] = INFINITY;
    FileSet *set = fileset_begin(scratch, err, sizeof err);
    cr_assert_not_null(set, "%s", err);
    cr_expect_eq(npy_save_into(set, scratch, "v", x, err, sizeof err), -1);
    fileset_abandon(set);
    snprintf(expected, sizeof expected, "%s/v.npy: element 4 (index [1, 1]) is inf: nothing "
             "that is not a number is written", scratch);
    cr_expect_str_eq(err, expected);
    cr_expect_eq(count_files(scratch), 0);
    cr_expect_eq(set_leftovers(scratch), 0);
    tensor_free(x);
}

/* ---- NumPy files that are refused ------------------------------------------ */

typedef struct {
    const char *file;
    bool as_ints;          /* read with npy_load_ints instead of npy_load */
    const char *message;   /* after "tests/fixtures/npy/FILE: " */
} RefusedFile;

static const RefusedFile REFUSED[] = {
    {"unsupported_fortran.npy", false,
     "fortran_order is True; only C order is supported (save np.ascontiguousarray(x) instead)"},
    {"unsupported_big_endian.npy", false,
     "big-endian data ('>f4') is not supported; save it with .astype('<f4')"},
    {"unsupported_complex.npy", false,
     "unsupported dtype '<c8' (this reader knows '<f4', '<f8', '<i4' and '<i8')"},
    {"unsupported_int16.npy", true,
     "unsupported dtype '<i2' (this reader knows '<f4', '<f8', '<i4' and '<i8')"},
    {"unsupported_bool.npy", true,
     "unsupported dtype '|b1' (this reader knows '<f4', '<f8', '<i4' and '<i8')"},
    {"unsupported_structured.npy", false,
     "structured dtypes (a list of fields in 'descr') are not supported; save a plain array "
     "of numbers"},
    {"unsupported_scalar.npy", false,
     "shape () is a 0-d array; a tensor has 1 to 4 dimensions (save it as np.array([x]))"},
    {"unsupported_5d.npy", false, "shape (1, 1, 1, 1, 2) has 5 dimensions; a tensor has at most 4"},
    {"unsupported_empty.npy", false, "shape (0,) is empty; a tensor holds at least one number"},
    {"unsupported_empty_2d.npy", true, "shape (2, 0) is empty; a tensor holds at least one number"},
    {"unsupported_i8_too_big.npy", true, "element 1 (index [1]) = 2147483648 does not fit in an int"},
    {"unsupported_f8_too_big.npy", false,
     "element 1 (index [1]) = -1e+300 is outside the float32 range"},
    {"unsupported_nan.npy", false, "element 2 (index [1, 0]) is NaN; the data must be finite"},
    {"unsupported_inf.npy", false, "element 1 (index [1]) is -inf; the data must be finite"},
    {"v1_f4.npy", true,
     "holds floating-point data ('<f4'), but integers were expected ('<i4' or '<i8', such as "
     "np.array([3, 2]))"},
    {"v1_f8.npy", true,
     "holds floating-point data ('<f8'), but integers were expected ('<i4' or '<i8', such as "
     "np.array([3, 2]))"},
    /* what np.lib.format.write_array writes when asked for a version that
     * np.save never chooses for an array a tensor can hold */
    {"unsupported_v2.npy", false,
     "unsupported .npy version 2.0 (this reader knows 1.0, which np.save writes)"},
    {"unsupported_v3.npy", true,
     "unsupported .npy version 3.0 (this reader knows 1.0, which np.save writes)"},
    {"no_such_file.npy", false, "cannot open: No such file or directory"},
};

Test(npy, numpy_files_that_are_refused)
{
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
        const RefusedFile *r = &REFUSED[i];
        char path[128], err[NPY_ERR_LEN], expected[NPY_ERR_LEN + 128];
        snprintf(path, sizeof path, FIXTURES "%s", r->file);
        snprintf(expected, sizeof expected, "%s: %s", path, r->message);
        if (r->as_ints) {
            NpyInts ints;
            cr_expect_eq(npy_load_ints(path, &ints, err, sizeof err), -1, "%s was read", path);
            cr_expect_null(ints.data);
        } else {
            Tensor *x = npy_load(path, err, sizeof err);
            cr_expect_null(x, "%s was read", path);
            tensor_free(x);
        }
        cr_expect_str_eq(err, expected);
    }
}

Test(npy, a_directory_is_not_a_file)
{
    char err[NPY_ERR_LEN];
    cr_expect_null(npy_load("tests/fixtures/npy", err, sizeof err));
    cr_expect_str_eq(err, "tests/fixtures/npy: cannot read: it is a directory");
}

/* ---- malformed bytes --------------------------------------------------------- */

/* A file with the given preamble and header text, padded as NumPy pads,
 * followed by data_len bytes of data (the 2 x 3 '<f4' values of v1_f4.npy
 * repeated as needed). The caller frees. */
static unsigned char *build_npy(int major, const char *header, size_t data_len, size_t *len)
{
    const size_t len_bytes = major == 1 ? 2 : 4;
    size_t text_len = strlen(header) + 1;
    size_t pad = 64 - (6 + 2 + len_bytes + text_len) % 64;
    size_t header_len = text_len + pad;
    *len = 6 + 2 + len_bytes + header_len + data_len;
    unsigned char *bytes = malloc(*len);
    memcpy(bytes, "\x93NUMPY", 6);
    bytes[6] = (unsigned char)major;
    bytes[7] = 0;
    for (size_t i = 0; i < len_bytes; i++)
        bytes[8 + i] = (unsigned char)(header_len >> (8 * i));
    unsigned char *text = bytes + 8 + len_bytes;
    memcpy(text, header, strlen(header));
    memset(text + strlen(header), ' ', pad);
    text[header_len - 1] = '\n';
    unsigned char *data = text + header_len;
    for (size_t i = 0; i < data_len; i++) {
        float v = F4_VALUES[(i / 4) % 6];
        unsigned char le[4];
        memcpy(le, &v, 4);   /* the test machine is little-endian, as the fixtures */
        data[i] = le[i % 4];
    }
    return bytes;
}

typedef struct {
    const char *header;
    size_t data_len;
    const char *message;   /* after "case.npy: " */
} BadHeader;

#define GOOD_REST "'fortran_order': False, 'shape': (2, 3), }"

static const BadHeader BAD_HEADERS[] = {
    /* missing, extra and repeated keys */
    {"{'descr': '<f4', 'fortran_order': False, }", 24, "header has no 'shape' key"},
    {"{'fortran_order': False, 'shape': (2, 3), }", 24, "header has no 'descr' key"},
    {"{'descr': '<f4', 'shape': (2, 3), }", 24, "header has no 'fortran_order' key"},
    {"{}", 24, "header has no 'descr' key"},
    {"{descr: '<f4', " GOOD_REST, 24,
     "malformed header: expected a quoted key at byte 1 of the header, found 'd'"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", 24,
     "header has an unexpected key 'extra' (a .npy header has exactly 'descr', "
     "'fortran_order' and 'shape')"},
    {"{'descr': '<f4', 'descr': '<f4', " GOOD_REST, 24, "header repeats the key 'descr'"},
    /* dtypes */
    {"{'descr': '>f8', " GOOD_REST, 48,
     "big-endian data ('>f8') is not supported; save it with .astype('<f8')"},
    {"{'descr': '<f2', " GOOD_REST, 12,
     "unsupported dtype '<f2' (this reader knows '<f4', '<f8', '<i4' and '<i8')"},
    {"{'descr': '=f4', " GOOD_REST, 24,
     "unsupported dtype '=f4' (this reader knows '<f4', '<f8', '<i4' and '<i8')"},
    {"{'descr': 4, " GOOD_REST, 24,
     "malformed header: expected a quoted dtype such as '<f4' for 'descr' at byte 10 of the "
     "header, found '4'"},
    {"{'descr': 'a_dtype_name_that_is_much_too_long_to_be_real', " GOOD_REST, 24,
     "malformed header: the string 'a_dtype_name_that_is_much_too_long_to_b...' is too long "
     "to be a key or a dtype"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'des\\cr': 1}", 24,
     "malformed header: expected the end of a quoted string at byte 62 of the header, "
     "found '\\'"},
    /* order */
    {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24,
     "fortran_order is True; only C order is supported (save np.ascontiguousarray(x) instead)"},
    {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 24,
     "malformed header: expected True or False for 'fortran_order' at byte 34 of the header, "
     "found '0'"},
    /* shapes */
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24,
     "malformed header: expected ',' or ')' in 'shape' at byte 53 of the header, found '3'"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 24,
     "malformed header: expected ',' after the only dimension, as in (3,) at byte 52 of the "
     "header, found ')'"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", 24,
     "malformed header: expected '(' to start 'shape' at byte 50 of the header, found '['"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 24,
     "malformed header: expected a whole number in 'shape' at byte 54 of the header, found 'x'"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24,
     "bad shape: dimension -3 is negative"},
    /* -0 is 0 in Python: an empty array, not a negative size */
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (-0, 4), }", 24,
     "shape (0, 4) is empty; a tensor holds at least one number"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 1), }", 24,
     "bad shape: a dimension is larger than 2147483647, the most a tensor dimension can be"},
    {"{'descr': '<f4', 'fortran_order': False, "
        "'shape': (2147483647, 2147483647, 2147483647, 2147483647), }", 24,
     "shape (2147483647, 2147483647, 2147483647, 2147483647) has too many elements: its "
     "size overflows"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 6), }", 24,
     "shape (1, 1, 1, 1, 6) has 5 dimensions; a tensor has at most 4"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4,
     "shape () is a 0-d array; a tensor has 1 to 4 dimensions (save it as np.array([x]))"},
    {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", 24,
     "malformed header: expected ',' or ')' in 'shape', but the header ends"},
    /* the dict itself */
    {"'descr': '<f4', " GOOD_REST, 24,
     "malformed header: expected '{' at the start of the header at byte 0 of the header, "
     "found '''"},
    {"{'descr': '<f4', " GOOD_REST " x", 24,
     "malformed header: expected only spaces after '}' at byte 60 of the header, found 'x'"},
    {"{'descr': '<f4' " GOOD_REST, 24,
     "malformed header: expected ',' or '}' after a value at byte 16 of the header, found '''"},
    /* the data */
    {"{'descr': '<f4', " GOOD_REST, 23,
     "truncated data: shape (2, 3) of <f4 needs 24 bytes, but only 23 follow the header"},
    {"{'descr': '<f4', " GOOD_REST, 28,
     "data longer than the shape says: shape (2, 3) of <f4 needs 24 bytes, but 28 follow "
     "the header"},
    {"{'descr': '<i8', " GOOD_REST, 0,
     "truncated data: shape (2, 3) of <i8 needs 48 bytes, but only 0 follow the header"},
};

Test(npy, malformed_headers_are_refused_with_their_message)
{
    for (size_t i = 0; i < sizeof BAD_HEADERS / sizeof BAD_HEADERS[0]; i++) {
        const BadHeader *b = &BAD_HEADERS[i];
        size_t len;
        unsigned char *bytes = build_npy(1, b->header, b->data_len, &len);
        char err[NPY_ERR_LEN], expected[NPY_ERR_LEN];
        snprintf(expected, sizeof expected, "case.npy: %s", b->message);
        Tensor *x = npy_parse(bytes, len, "case.npy", err, sizeof err);
        cr_expect_null(x, "case %zu (%s) was read", i, b->header);
        cr_expect_str_eq(err, expected, "case %zu: %s\n  got:      %s\n  expected: %s",
                         i, b->header, err, expected);
        tensor_free(x);
        free(bytes);
    }
}

Test(npy, headers_numpy_would_also_accept)
{
    /* key order, double quotes, a trailing comma in the shape, Python 2's
     * "3L", no final comma: all still the 2 x 3 array */
    const char *const headers[] = {
        "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
        "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 2 , 3 ) }",
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        size_t len;
        unsigned char *bytes = build_npy(1, headers[i], 24, &len);
        char err[NPY_ERR_LEN];
        Tensor *x = npy_parse(bytes, len, "case.npy", err, sizeof err);
        cr_expect_not_null(x, "%s: %s", headers[i], err);
        if (x) {
            expect_shape(x->shape, x->ndim, 2, (const int[]){2, 3}, headers[i]);
            expect_floats(x, F4_VALUES, 6, headers[i]);
        }
        tensor_free(x);
        free(bytes);
    }
}

/* Versions 2.0 and 3.0 (a 4-byte header length) are NumPy's, but np.save
 * writes them only for headers that no tensor needs: a well-formed file of
 * either is refused at its version, in one line. */
Test(npy, versions_2_and_3_are_refused_in_one_line)
{
    for (int major = 2; major <= 3; major++) {
        size_t len;
        unsigned char *bytes = build_npy(major, "{'descr': '<f4', " GOOD_REST, 24, &len);
        char err[NPY_ERR_LEN], expected[NPY_ERR_LEN];
        snprintf(expected, sizeof expected, "case.npy: unsupported .npy version %d.0 (this "
                 "reader knows 1.0, which np.save writes)", major);
        Tensor *x = npy_parse(bytes, len, "case.npy", err, sizeof err);
        cr_expect_null(x, "version %d.0 was read", major);
        cr_expect_str_eq(err, expected);
        cr_expect(strchr(err, '\n') == NULL, "one line: %s", err);
        tensor_free(x);
        free(bytes);
    }
}

typedef struct {
    const char *what;
    size_t keep;            /* bytes of v1_f4.npy kept; 0 means use bytes below */
    const char *bytes;      /* or the whole file, when keep is 0 */
    size_t len;
    const char *message;    /* after "case.npy: " */
} BadPreamble;

static const BadPreamble BAD_PREAMBLES[] = {
    {"empty", 0, "", 0, "the file is empty, not a .npy file"},
    {"a GIF", 0, "GIF89a\x01\x00\x01\x00", 10,
     "not a .npy file (it does not start with \\x93NUMPY)"},
    {"magic cut short", 0, "\x93NUM", 4, "truncated: the file ends before the version bytes"},
    {"wrong case", 0, "\x93numpy\x01\x00", 8, "not a .npy file (it does not start with \\x93NUMPY)"},
    {"only the magic", 6, NULL, 0, "truncated: the file ends before the version bytes"},
    {"version 4.0", 0, "\x93NUMPY\x04\x00\x10\x00", 10,
     "unsupported .npy version 4.0 (this reader knows 1.0, which np.save writes)"},
    {"version 1.1", 0, "\x93NUMPY\x01\x01\x10\x00", 10,
     "unsupported .npy version 1.1 (this reader knows 1.0, which np.save writes)"},
    {"version 0.0", 0, "\x93NUMPY\x00\x00\x10\x00", 10,
     "unsupported .npy version 0.0 (this reader knows 1.0, which np.save writes)"},
    {"version 2.0, its header length cut", 0, "\x93NUMPY\x02\x00\x10\x00\x00", 11,
     "unsupported .npy version 2.0 (this reader knows 1.0, which np.save writes)"},
    {"header length cut", 9, NULL, 0, "truncated: the file ends inside the header length"},
    {"header cut", 60, NULL, 0, "truncated header: it should be 118 bytes, but only 50 follow"},
    {"header length past the end", 0, "\x93NUMPY\x01\x00\xff\xff{}", 12,
     "truncated header: it should be 65535 bytes, but only 2 follow"},
    {"data cut", 151, NULL, 0,
     "truncated data: shape (2, 3) of <f4 needs 24 bytes, but only 23 follow the header"},
};

Test(npy, malformed_preambles_are_refused_with_their_message)
{
    size_t good_len;
    unsigned char *good = read_bytes(FIXTURES "v1_f4.npy", &good_len);
    cr_assert_eq(good_len, 152);
    for (size_t i = 0; i < sizeof BAD_PREAMBLES / sizeof BAD_PREAMBLES[0]; i++) {
        const BadPreamble *b = &BAD_PREAMBLES[i];
        const void *bytes = b->keep ? (const void *)good : (const void *)b->bytes;
        size_t len = b->keep ? b->keep : b->len;
        char err[NPY_ERR_LEN], expected[NPY_ERR_LEN];
        snprintf(expected, sizeof expected, "case.npy: %s", b->message);
        Tensor *x = npy_parse(bytes, len, "case.npy", err, sizeof err);
        cr_expect_null(x, "%s was read", b->what);
        cr_expect_str_eq(err, expected, "%s", b->what);
        tensor_free(x);
        NpyInts ints;
        cr_expect_eq(npy_parse_ints(bytes, len, "case.npy", &ints, err, sizeof err), -1);
        cr_expect_str_eq(err, expected, "%s, as ints", b->what);
    }
    free(good);
}

/* err NULL: a bug (error.h's error_format), said by die, not a line the
 * caller never sees */
static void load_without_a_buffer(void)
{
    program_name("attention");
    Tensor *x = npy_load(FIXTURES "unsupported_5d.npy", NULL, 0);
    exit(x == NULL ? 5 : 6);
}

Test(npy, messages_fit_a_short_buffer)
{
    char err[16];
    cr_expect_null(npy_parse("GIF89a", 6, "picture.gif", err, sizeof err));
    cr_expect_str_eq(err, "picture.gif: no", "cut to the buffer, still terminated");
    cr_expect_null(npy_parse("GIF89a", 6, NULL, err, sizeof err));
    cr_expect_str_eq(err, "<memory>: not a");

    int status;
    char *text = stderr_of(load_without_a_buffer, &status);
    cr_expect_eq(status, DIE_STATUS, "die's abort: %d", status);
    cr_expect(text != NULL && strncmp(text, "attention: error_format: no buffer for the line",
                                      47) == 0,
              "%s", text ? text : "(none)");
    free(text);
}

/* ---- the fuzzer's regression files ------------------------------------------- */

/* Every input the fuzzer ever found a problem with (tests/fuzz/README.md).
 * Each must be read or refused cleanly: a crash, a sanitizer report or a
 * leak fails this test. A refusal names the input; a success gives finite
 * numbers and a consistent shape. */
Test(npy, fuzz_regressions_read_cleanly)
{
    DIR *d = opendir(REGRESSIONS);
    cr_assert_not_null(d, "cannot list " REGRESSIONS);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "README.md") == 0)
            continue;
        char path[512], err[NPY_ERR_LEN];
        snprintf(path, sizeof path, REGRESSIONS "%s", e->d_name);
        size_t len;
        unsigned char *text = read_bytes(path, &len);
        /* a buffer of exactly the file's length, as the fuzzer gives, so
         * that AddressSanitizer sees a read one byte past the end */
        unsigned char *bytes = malloc(len > 0 ? len : 1);
        memcpy(bytes, text, len);
        free(text);
        files++;

        Tensor *x = npy_parse(bytes, len, e->d_name, err, sizeof err);
        if (x == NULL) {
            cr_expect(strncmp(err, e->d_name, strlen(e->d_name)) == 0 && strlen(err) >
                      strlen(e->d_name) + 2, "%s: refused without a message: '%s'", path, err);
        } else {
            bool overflow;
            cr_expect_eq(shape_size(x->ndim, x->shape, &overflow), x->size, "%s", path);
            for (size_t i = 0; i < x->size; i++)
                cr_expect(isfinite(x->data[i]), "%s: value %zu is not finite", path, i);
            tensor_free(x);
        }
        NpyInts ints;
        if (npy_parse_ints(bytes, len, e->d_name, &ints, err, sizeof err) == 0) {
            bool overflow;
            cr_expect_eq(shape_size(ints.ndim, ints.shape, &overflow), ints.size, "%s", path);
            npy_ints_free(&ints);
        } else {
            cr_expect_null(ints.data);
            cr_expect(strlen(err) > strlen(e->d_name) + 2, "%s: no message", path);
        }
        free(bytes);
    }
    closedir(d);
    cr_expect_gt(files, 0, "the regression folder has no inputs");
}

/* ---- files that are not what they seem ----------------------------------------- */

/* A named pipe with no writer: opening it for reading the usual way waits
 * forever; the reader refuses it at once. */
Test(npy, a_named_pipe_is_refused_without_waiting, .timeout = 10)
{
    make_scratch();
    char path[128], err[NPY_ERR_LEN], expected[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/queries.npy", scratch);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_null(npy_load(path, err, sizeof err));
    snprintf(expected, sizeof expected, "%s: cannot read: not a regular file", path);
    cr_expect_str_eq(err, expected);
    NpyInts ints;
    cr_expect_eq(npy_load_ints(path, &ints, err, sizeof err), -1);
    cr_expect_str_eq(err, expected);
    unlink(path);
    scratch_dir_remove(scratch);
}

/* A 30 GB file (sparse: it takes no disk) that is not a .npy file is
 * refused after its first bytes, not with "out of memory" after reading it;
 * the address space is capped at 1 GB to prove nothing large is allocated
 * (except under AddressSanitizer, whose shadow memory needs far more). */

static void load_huge_file(void)
{
#if !UNDER_ASAN   /* AddressSanitizer reserves terabytes of address space itself */
    struct rlimit limit = {1u << 30, 1u << 30};
    setrlimit(RLIMIT_AS, &limit);
#endif
    char err[NPY_ERR_LEN];
    char path[128];
    snprintf(path, sizeof path, "%s/huge.npy", scratch);
    Tensor *x = npy_load(path, err, sizeof err);
    fprintf(stderr, "%s\n", err);
    exit(x == NULL ? 0 : 3);
}

Test(npy, a_huge_file_is_refused_by_its_first_bytes, .timeout = 20)
{
    make_scratch();
    char path[128], expected[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/huge.npy", scratch);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fputs("not numpy", f);
    fclose(f);
    cr_assert_eq(truncate(path, 30LL << 30), 0, "cannot make a sparse 30 GB file");
    int status;
    char *err = stderr_of(load_huge_file, &status);
    snprintf(expected, sizeof expected,
             "%s: not a .npy file (it does not start with \\x93NUMPY)\n", path);
    cr_expect_eq(status, 0);
    cr_expect_str_eq(err, expected);
    free(err);
    unlink(path);
    scratch_dir_remove(scratch);
}

/* Save bytes as scratch/NAME and load them as floats; returns the tensor. */
static Tensor *load_built(const char *name, const unsigned char *bytes, size_t len, char *err)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(bytes, 1, len, f);
    fclose(f);
    return npy_load(path, err, NPY_ERR_LEN);
}

/* A header for a 1-D array of n items of descr, 64-byte aligned as NumPy writes. */
static size_t header_1d(unsigned char *buf, const char *descr, int n)
{
    char dict[128];
    int used = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }",
                        descr, n);
    size_t header_len = (size_t)used + 1;
    header_len += 64 - (10 + header_len) % 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)header_len;
    buf[9] = 0;
    memset(buf + 10, ' ', header_len);
    memcpy(buf + 10, dict, (size_t)used);
    buf[10 + header_len - 1] = '\n';
    return 10 + header_len;
}

Test(npy, float64_values_that_round_to_float_max_are_read)
{
    make_scratch();
    /* FLT_MAX itself, a double just above it that rounds down to it, and
     * the halfway point 2^128 - 2^103, which rounds up to infinity. */
    const double values[3] = {0x1.fffffep+127, 0x1.fffffe8p+127, 0x1.ffffffp+127};
    unsigned char bytes[256];
    size_t head = header_1d(bytes, "<f8", 2);
    memcpy(bytes + head, values, 16);   /* this machine is little-endian, as the test suite assumes */
    char err[NPY_ERR_LEN];
    Tensor *x = load_built("near_max.npy", bytes, head + 16, err);
    cr_assert_not_null(x, "%s", err);
    cr_expect_eq(x->data[0], 0x1.fffffep+127f);
    cr_expect_eq(x->data[1], 0x1.fffffep+127f);
    tensor_free(x);
    head = header_1d(bytes, "<f8", 3);
    memcpy(bytes + head, values, 24);
    cr_expect_null(load_built("past_max.npy", bytes, head + 24, err));
    cr_expect(strstr(err, "element 2 (index [2]) = 3.40282e+38 is outside the float32 range") != NULL,
              "%s", err);
    scratch_dir_remove(scratch);
}

Test(npy, integers_without_an_exact_float_are_refused)
{
    make_scratch();
    /* 2^24 and 2^25 are exact in float32; 2^24 + 1 is not. */
    const int32_t values[3] = {16777216, 33554432, 16777217};
    unsigned char bytes[256];
    size_t head = header_1d(bytes, "<i4", 2);
    memcpy(bytes + head, values, 8);
    char err[NPY_ERR_LEN];
    Tensor *x = load_built("exact.npy", bytes, head + 8, err);
    cr_assert_not_null(x, "%s", err);
    cr_expect_eq(x->data[0], 16777216.0f);
    cr_expect_eq(x->data[1], 33554432.0f);
    tensor_free(x);
    head = header_1d(bytes, "<i4", 3);
    memcpy(bytes + head, values, 12);
    cr_expect_null(load_built("inexact.npy", bytes, head + 12, err));
    cr_expect(strstr(err, ": element 2 (index [2]) = 16777217 has no exact float32 value") != NULL,
              "%s", err);
    scratch_dir_remove(scratch);
}

Test(npy, a_long_path_keeps_the_reason_whole)
{
    /* /tmp/aaa.../aaa.../queries.npy: 600 characters in folders of 99 */
    char path[700], err[NPY_ERR_LEN];
    memset(path, 'a', sizeof path);
    memcpy(path, "/tmp/", 5);
    for (int i = 104; i < 600; i += 100)
        path[i] = '/';
    strcpy(path + 600, "/queries.npy");
    cr_expect_null(npy_load(path, err, sizeof err));
    const char *reason = ": cannot open: No such file or directory";
    size_t len = strlen(err);
    cr_assert(len > strlen(reason));
    cr_expect_str_eq(err + len - strlen(reason), reason);
    cr_expect(strstr(err, "...") != NULL, "%s", err);
    cr_expect(strncmp(err, "/tmp/aaa", 8) == 0, "%s", err);
    cr_expect(strstr(err, "aaa/queries.npy: ") != NULL, "%s", err);
}
