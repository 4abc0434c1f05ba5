/*
 * npy.c - reading and writing NumPy's .npy files (introduced in chapter 05).
 * See npy.h for what is read, what is written and how errors come back.
 *
 * Reading goes in passes, each reading from the file only what it needs:
 *   pass 1: the preamble: magic string, version, header length;
 *   pass 2: the header, a Python dict literal with exactly three keys;
 *   pass 3: what the header promises: dtype, order, shape, data length;
 *   pass 4: the numbers, converted one by one from little-endian bytes.
 * Nothing is allocated for the numbers until pass 3 has checked that the
 * file holds exactly as many bytes as the shape says, so a header that
 * claims a huge shape cannot make the reader ask for huge memory, and a
 * huge file that is not a .npy file is refused after its first 10 bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/npy.h"
#include "io/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
/* the magic string, the version (2 bytes) and the header's length (2) */
enum { MAGIC_LEN = 6, PREAMBLE_LEN = 10, MAX_PARSED_DIMS = 64, ARRAY_ALIGN = 64 };

/* ---- errors ------------------------------------------------------------ */

/* Where an error line goes: "name: problem" into err, or onto stderr. */
typedef struct {
    const char *name;
    char *err;
    size_t err_len;
} ErrSink;

static int npy_fail(const ErrSink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int npy_fail(const ErrSink *sink, const char *fmt, ...)
{
    char reason[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(reason, sizeof reason, fmt, args);
    va_end(args);
    return error_format(sink->err, sink->err_len, sink->name, "%s", reason);
}

static void clear_err(char *err, size_t err_len)
{
    if (err != NULL && err_len > 0)
        err[0] = '\0';
}

/* Text from the file, made safe to print on one line: at most max
 * characters, anything but printable ASCII shown as '?'. */
static void printable(char *out, size_t out_len, const char *text, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < out_len; i++)
        out[n++] = (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
    out[n] = '\0';
}

/* ---- little-endian numbers --------------------------------------------- */

/* Bytes are put together by hand, so the code is right on any machine,
 * whatever its own byte order. */
static uint32_t le_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le_u64(const unsigned char *p)
{
    return (uint64_t)le_u32(p) | (uint64_t)le_u32(p + 4) << 32;
}

static void put_le_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* The bit patterns of IEEE floats, read as such (memcpy is the defined way
 * to reinterpret bytes in C). */
static float f32_from_bits(uint32_t bits)
{
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static double f64_from_bits(uint64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* ---- the header dict ---------------------------------------------------- */

typedef enum { DTYPE_F4, DTYPE_F8, DTYPE_I4, DTYPE_I8 } Dtype;

static const struct {
    const char *descr;
    Dtype dtype;
    size_t itemsize;
    bool is_float;
} DTYPES[] = {
    {"<f4", DTYPE_F4, 4, true},
    {"<f8", DTYPE_F8, 8, true},
    {"<i4", DTYPE_I4, 4, false},
    {"<i8", DTYPE_I8, 8, false},
};

/* What a header says, once parsed and checked. */
typedef struct {
    char descr[16];
    int dtype_index;            /* into DTYPES */
    int ndim;
    int shape[TENSOR_MAX_DIMS];
    size_t count;               /* product of the shape */
    const unsigned char *data;  /* the numbers: count * itemsize bytes */
} NpyArray;

/* A cursor over the header text. */
typedef struct {
    const char *start, *p, *end;
    const ErrSink *sink;
} Cursor;

static int malformed(const Cursor *c, const char *what)
{
    if (c->p >= c->end)
        return npy_fail(c->sink, "malformed header: %s, but the header ends", what);
    char seen[2];
    printable(seen, sizeof seen, c->p, 1);
    return npy_fail(c->sink, "malformed header: %s at byte %td of the header, found '%s'",
                    what, c->p - c->start, seen);
}

static void skip_space(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Skip spaces, then take ch if it comes next: true when it did. */
static bool take_char(Cursor *c, char ch)
{
    skip_space(c);
    if (c->p >= c->end || *c->p != ch)
        return false;
    c->p++;
    return true;
}

/* Skip spaces, then expect ch. */
static int expect_char(Cursor *c, char ch, const char *what)
{
    return take_char(c, ch) ? 0 : malformed(c, what);
}

/* A Python string in single or double quotes, without escapes (no key or
 * dtype this reader accepts needs one). */
static int parse_string(Cursor *c, char *out, size_t out_len, const char *what)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return malformed(c, what);
    const char quote = *c->p++;
    const char *text = c->p;
    while (c->p < c->end && *c->p != quote && *c->p != '\\')
        c->p++;
    if (c->p >= c->end || *c->p == '\\')
        return malformed(c, "expected the end of a quoted string");
    size_t len = (size_t)(c->p - text);
    c->p++;
    if (len + 1 > out_len) {
        char shown[40];
        printable(shown, sizeof shown, text, len);
        return npy_fail(c->sink, "malformed header: the string '%s...' is too long to be "
                        "a key or a dtype", shown);
    }
    memcpy(out, text, len);
    out[len] = '\0';
    return 0;
}

/* True or False. */
static int parse_bool(Cursor *c, bool *value)
{
    skip_space(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        *value = true;
        c->p += 4;
    } else if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        *value = false;
        c->p += 5;
    } else {
        return malformed(c, "expected True or False for 'fortran_order'");
    }
    return 0;
}

/* One dimension: a whole number, with an optional L (files written by
 * Python 2 say "3L"). A minus sign or a size past INT_MAX is refused here,
 * with its own message. */
static int parse_dim(Cursor *c, long long *dim)
{
    skip_space(c);
    if (c->p < c->end && *c->p == '-') {
        const char *digits = ++c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && c->p - digits < 20)
            c->p++;
        /* -0 is Python's 0: an empty dimension, refused as such later */
        bool zero = c->p > digits;
        for (const char *d = digits; d < c->p; d++)
            zero = zero && *d == '0';
        if (zero && (c->p >= c->end || *c->p < '0' || *c->p > '9')) {
            *dim = 0;
            return 0;
        }
        char shown[24];
        printable(shown, sizeof shown, digits, (size_t)(c->p - digits));
        return npy_fail(c->sink, "bad shape: dimension -%s is negative", shown);
    }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return malformed(c, "expected a whole number in 'shape'");
    long long value = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        value = value * 10 + (*c->p - '0');
        c->p++;
        if (value > INT_MAX) {
            return npy_fail(c->sink, "bad shape: a dimension is larger than %d, the most "
                            "a tensor dimension can be", INT_MAX);
        }
    }
    if (c->p < c->end && *c->p == 'L')
        c->p++;
    *dim = value;
    return 0;
}

/* A tuple of dimensions: (), (3,), (2, 3), (2, 3,). "(3)" is not a tuple in
 * Python, just the number 3, and NumPy refuses it too. */
static int parse_shape(Cursor *c, long long *dims, int *ndim)
{
    *ndim = 0;
    if (expect_char(c, '(', "expected '(' to start 'shape'") != 0)
        return -1;
    if (take_char(c, ')'))
        return 0;   /* () */
    for (;;) {
        long long dim = 0;
        if (parse_dim(c, &dim) != 0)
            return -1;
        if (*ndim == MAX_PARSED_DIMS)
            return npy_fail(c->sink, "bad shape: more than %d dimensions", MAX_PARSED_DIMS);
        dims[(*ndim)++] = dim;
        skip_space(c);
        if (*ndim == 1 && c->p < c->end && *c->p == ')')
            return malformed(c, "expected ',' after the only dimension, as in (3,)");
        if (take_char(c, ')'))
            return 0;
        if (expect_char(c, ',', "expected ',' or ')' in 'shape'") != 0)
            return -1;
        if (take_char(c, ')'))
            return 0;   /* a comma before the end: (3,), (2, 3,) */
    }
}

/* "(2, 3)" or "(3,)" for messages, from the parsed dimensions. */
static void dims_str(char *buf, size_t len, const long long *dims, int ndim)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
}

/* The value of 'descr': a quoted dtype such as '<f4' into arr->descr.
 * Returns 0, or -1 after reporting. */
static int parse_descr(Cursor *c, NpyArray *arr)
{
    skip_space(c);
    if (c->p < c->end && (*c->p == '[' || *c->p == '('))
        return npy_fail(c->sink, "structured dtypes (a list of fields in 'descr') are not "
                        "supported; save a plain array of numbers");
    return parse_string(c, arr->descr, sizeof arr->descr,
                        "expected a quoted dtype such as '<f4' for 'descr'");
}

/* Pass 2: the dictionary, {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), }, each key once, into arr->descr, *fortran_order and
 * dims (ndim of them). Returns 0, or -1 after reporting. */
static int parse_header_dict(Cursor *c, NpyArray *arr, bool *fortran_order, long long *dims,
                             int *ndim)
{
    bool have_descr = false, have_order = false, have_shape = false;
    if (expect_char(c, '{', "expected '{' at the start of the header") != 0)
        return -1;
    skip_space(c);
    while (c->p < c->end && *c->p != '}') {
        char key[32];
        if (parse_string(c, key, sizeof key, "expected a quoted key") != 0)
            return -1;
        if (expect_char(c, ':', "expected ':' after a key") != 0)
            return -1;
        bool *seen = strcmp(key, "descr") == 0           ? &have_descr
                     : strcmp(key, "fortran_order") == 0 ? &have_order
                     : strcmp(key, "shape") == 0         ? &have_shape
                                                         : NULL;
        if (seen == NULL) {
            char shown[40];
            printable(shown, sizeof shown, key, strlen(key));
            return npy_fail(c->sink, "header has an unexpected key '%s' (a .npy header has "
                            "exactly 'descr', 'fortran_order' and 'shape')", shown);
        }
        if (*seen)
            return npy_fail(c->sink, "header repeats the key '%s'", key);
        *seen = true;
        const int status = seen == &have_descr ? parse_descr(c, arr)
                           : seen == &have_order ? parse_bool(c, fortran_order)
                                                 : parse_shape(c, dims, ndim);
        if (status != 0)
            return -1;
        skip_space(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            skip_space(c);
        } else if (c->p < c->end && *c->p != '}') {
            return malformed(c, "expected ',' or '}' after a value");
        }
    }
    if (expect_char(c, '}', "expected '}' at the end of the header") != 0)
        return -1;
    skip_space(c);   /* NumPy pads with spaces and ends with '\n' */
    if (c->p != c->end)
        return malformed(c, "expected only spaces after '}'");

    if (!have_descr || !have_order || !have_shape)
        return npy_fail(c->sink, "header has no '%s' key", !have_descr ? "descr"
                        : !have_order ? "fortran_order" : "shape");
    return 0;
}

/* Pass 3: what the header promises, checked: a known little-endian dtype,
 * C order, 1 to TENSOR_MAX_DIMS dimensions, none empty, a byte count that
 * fits. Fills arr's dtype_index, shape, ndim and count. */
static int check_header(const ErrSink *sink, NpyArray *arr, bool fortran_order,
                        const long long *dims, int ndim)
{
    arr->dtype_index = -1;
    for (int i = 0; i < (int)(sizeof DTYPES / sizeof DTYPES[0]); i++)
        if (strcmp(arr->descr, DTYPES[i].descr) == 0)
            arr->dtype_index = i;
    if (arr->dtype_index < 0) {
        char shown[24];
        printable(shown, sizeof shown, arr->descr, strlen(arr->descr));
        if (shown[0] == '>')
            return npy_fail(sink, "big-endian data ('%s') is not supported; save it with "
                            ".astype('<%s')", shown, shown + 1);
        return npy_fail(sink, "unsupported dtype '%s' (this reader knows '<f4', '<f8', "
                        "'<i4' and '<i8')", shown);
    }
    if (fortran_order)
        return npy_fail(sink, "fortran_order is True; only C order is supported (save "
                        "np.ascontiguousarray(x) instead)");
    char shape_text[64 + 24 * TENSOR_MAX_DIMS];
    dims_str(shape_text, sizeof shape_text, dims, ndim);
    if (ndim == 0)
        return npy_fail(sink, "shape () is a 0-d array; a tensor has 1 to %d dimensions "
                        "(save it as np.array([x]))", TENSOR_MAX_DIMS);
    if (ndim > TENSOR_MAX_DIMS)
        return npy_fail(sink, "shape %s has %d dimensions; a tensor has at most %d",
                        shape_text, ndim, TENSOR_MAX_DIMS);
    const size_t itemsize = DTYPES[arr->dtype_index].itemsize;
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0)
            return npy_fail(sink, "shape %s is empty; a tensor holds at least one number",
                            shape_text);
        /* the byte count, count * itemsize, must fit in size_t too */
        if (count > SIZE_MAX / itemsize / (size_t)dims[i])
            return npy_fail(sink, "shape %s has too many elements: its size overflows",
                            shape_text);
        count *= (size_t)dims[i];
        arr->shape[i] = (int)dims[i];
    }
    arr->ndim = ndim;
    arr->count = count;
    return 0;
}

/* The header's text (len bytes): pass 2, then pass 3. */
static int parse_header(const char *text, size_t len, const ErrSink *sink, NpyArray *arr)
{
    Cursor cursor = {text, text, text + len, sink};
    bool fortran_order = false;
    long long dims[MAX_PARSED_DIMS];
    int ndim = 0;
    if (parse_header_dict(&cursor, arr, &fortran_order, dims, &ndim) != 0)
        return -1;
    return check_header(sink, arr, fortran_order, dims, ndim);
}

/* ---- the whole file ------------------------------------------------------ */

/* Pass 1 on a file of len bytes, of which bytes holds at least the first
 * min(len, PREAMBLE_LEN): the magic string, the version and the header's
 * length. Only the preamble is needed, so a file that is not a .npy file
 * is refused before the rest of it is read. The header starts at
 * PREAMBLE_LEN; *header_len is its length. */
static int parse_preamble(const unsigned char *bytes, size_t len, const ErrSink *sink,
                          size_t *header_len)
{
    if (len == 0)
        return npy_fail(sink, "the file is empty, not a .npy file");
    if (memcmp(bytes, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) != 0)
        return npy_fail(sink, "not a .npy file (it does not start with \\x93NUMPY)");
    if (len < MAGIC_LEN + 2)
        return npy_fail(sink, "truncated: the file ends before the version bytes");
    const int major = bytes[6], minor = bytes[7];
    if (major != 1 || minor != 0)
        return npy_fail(sink, "unsupported .npy version %d.%d (this reader knows 1.0, which "
                        "np.save writes)", major, minor);
    if (len < PREAMBLE_LEN)
        return npy_fail(sink, "truncated: the file ends inside the header length");
    *header_len = (size_t)(bytes[8] | bytes[9] << 8);
    if (*header_len > len - PREAMBLE_LEN)
        return npy_fail(sink, "truncated header: it should be %zu bytes, but only %zu follow",
                        *header_len, len - PREAMBLE_LEN);
    return 0;
}

/* Pass 3's last check: the data after the header, have bytes, must be
 * exactly what the shape says. */
static int check_data_len(const NpyArray *arr, size_t have, const ErrSink *sink)
{
    const size_t need = arr->count * DTYPES[arr->dtype_index].itemsize;
    char shape_text[80];
    shape_str(shape_text, sizeof shape_text, arr->ndim, arr->shape);
    if (have < need)
        return npy_fail(sink, "truncated data: shape %s of %s needs %zu bytes, but only %zu "
                        "follow the header", shape_text, arr->descr, need, have);
    if (have > need)
        return npy_fail(sink, "data longer than the shape says: shape %s of %s needs %zu "
                        "bytes, but %zu follow the header", shape_text, arr->descr, need, have);
    return 0;
}

/* Passes 1 to 3 on the bytes of a whole file in memory: fills arr, or fails. */
static int parse_npy(const unsigned char *bytes, size_t len, const ErrSink *sink, NpyArray *arr)
{
    size_t header_len;
    if (parse_preamble(bytes, len, sink, &header_len) != 0)
        return -1;
    if (parse_header((const char *)bytes + PREAMBLE_LEN, header_len, sink, arr) != 0)
        return -1;
    const size_t data_start = PREAMBLE_LEN + header_len;
    if (check_data_len(arr, len - data_start, sink) != 0)
        return -1;
    arr->data = bytes + data_start;
    return 0;
}

/* "element 5 (index [1, 2])" for the element at flat offset i. */
static const char *element_str(char *buf, size_t len, size_t i, int ndim, const int *shape)
{
    char index[80];
    snprintf(buf, len, "element %zu (index %s)", i, tensor_index_str(index, sizeof index, i,
                                                                      ndim, shape));
    return buf;
}

/* An '<i4' or '<i8' item as a whole number. */
static int64_t int_item(const unsigned char *item, Dtype dtype)
{
    return dtype == DTYPE_I4 ? (int64_t)(int32_t)le_u32(item) : (int64_t)le_u64(item);
}

/* Pass 4 for floats: arr's numbers as a float32 tensor, each checked. */
static Tensor *convert_floats(const NpyArray *arr, const ErrSink *sink)
{
    Tensor *x = tensor_zeros(arr->ndim, arr->shape);
    const Dtype dtype = DTYPES[arr->dtype_index].dtype;
    char where[120];
    for (size_t i = 0; i < arr->count; i++) {
        const unsigned char *item = arr->data + i * DTYPES[arr->dtype_index].itemsize;
        int status = 0;
        if (dtype == DTYPE_F4) {
            x->data[i] = f32_from_bits(le_u32(item));
        } else if (dtype == DTYPE_F8) {
            double v = f64_from_bits(le_u64(item));
            /* Checked before the conversion: a double that rounds past
             * FLT_MAX has no float value (the conversion is undefined in
             * C). Halfway between FLT_MAX and 2^128, 0x1.ffffffp+127, is
             * the first double that rounds up; below it, to FLT_MAX. */
            if (isfinite(v) && fabs(v) >= 0x1.ffffffp+127)
                status = npy_fail(sink, "%s = %g is outside the float32 range",
                                  element_str(where, sizeof where, i, arr->ndim, arr->shape), v);
            x->data[i] = status == 0 ? (float)v : 0.0f;
        } else {
            const int64_t v = int_item(item, dtype);
            /* float32 holds every whole number up to 2^24; past that, only
             * some. One that would change is refused rather than rounded. */
            const float f = (float)v;
            if (fabsf(f) >= 0x1p63f || (int64_t)f != v)
                status = npy_fail(sink, "%s = %lld has no exact float32 value (whole numbers are "
                                  "exact up to 16777216); save it as '<f4' if rounding is meant",
                                  element_str(where, sizeof where, i, arr->ndim, arr->shape),
                                  (long long)v);
            x->data[i] = f;
        }
        if (status == 0 && !isfinite(x->data[i]))
            status = npy_fail(sink, "%s is %s; the data must be finite",
                              element_str(where, sizeof where, i, arr->ndim, arr->shape),
                              non_finite_name(x->data[i]));
        if (status != 0) {
            tensor_free(x);
            return NULL;
        }
    }
    return x;
}

/* Pass 4 for integers: arr's numbers into out, each checked to fit an int. */
static int convert_ints(const NpyArray *arr, const ErrSink *sink, NpyInts *out)
{
    if (DTYPES[arr->dtype_index].is_float)
        return npy_fail(sink, "holds floating-point data ('%s'), but integers were expected "
                        "('<i4' or '<i8', such as np.array([3, 2]))", arr->descr);
    int *data = checked_malloc(arr->count, sizeof *data);
    for (size_t i = 0; i < arr->count; i++) {
        const int64_t v = int_item(arr->data + i * DTYPES[arr->dtype_index].itemsize,
                                   DTYPES[arr->dtype_index].dtype);
        if (v < INT_MIN || v > INT_MAX) {
            char where[120];
            free(data);
            return npy_fail(sink, "%s = %lld does not fit in an int",
                            element_str(where, sizeof where, i, arr->ndim, arr->shape),
                            (long long)v);
        }
        data[i] = (int)v;
    }
    out->ndim = arr->ndim;
    for (int d = 0; d < TENSOR_MAX_DIMS; d++)
        out->shape[d] = d < arr->ndim ? arr->shape[d] : 1;
    out->size = arr->count;
    out->data = data;
    return 0;
}

void npy_ints_free(NpyInts *ints)
{
    if (ints == NULL)
        return;
    free(ints->data);
    memset(ints, 0, sizeof *ints);
}

/* n bytes from fd into buf; false on an error or an early end. */
static bool read_exact(int fd, unsigned char *buf, size_t n)
{
    while (n > 0) {
        ssize_t got = read(fd, buf, n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = 0;   /* the file ended early: it changed while read */
            return false;
        }
        buf += got;
        n -= (size_t)got;
    }
    return true;
}

static int read_failed(const ErrSink *sink)
{
    return npy_fail(sink, "cannot read: %s", errno ? strerror(errno) : "the file changed size");
}

/* Passes 1 to 3 on a file, reading only what each pass needs: the
 * preamble, then the header, then (once the header's shape agrees with the
 * file's size) the data into *buffer, which arr->data then points at. A
 * file that is not a .npy file is refused after 10 bytes, however large it
 * is; one that is not a regular file (a named pipe, a device) is refused
 * before anything is read: it is opened without waiting for a writer. */
static int load_array(const char *path, const ErrSink *sink, NpyArray *arr,
                      unsigned char **buffer)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return npy_fail(sink, "cannot open: %s", strerror(errno));
    struct stat st;
    int status = -1;
    unsigned char preamble[PREAMBLE_LEN];
    char *header = NULL;
    size_t header_len = 0;
    if (fstat(fd, &st) != 0) {
        read_failed(sink);
    } else if (!S_ISREG(st.st_mode)) {
        npy_fail(sink, "cannot read: %s", S_ISDIR(st.st_mode) ? "it is a directory"
                                                             : "not a regular file");
    } else {
        const size_t size = (size_t)st.st_size;
        if (fcntl(fd, F_SETFL, 0) != 0 ||
            !read_exact(fd, preamble, size < PREAMBLE_LEN ? size : PREAMBLE_LEN))
            read_failed(sink);
        else if (parse_preamble(preamble, size, sink, &header_len) == 0) {
            header = checked_malloc(header_len + 1, 1);
            if (!read_exact(fd, (unsigned char *)header, header_len))
                read_failed(sink);
            else if (parse_header(header, header_len, sink, arr) == 0 &&
                     check_data_len(arr, size - PREAMBLE_LEN - header_len, sink) == 0) {
                // the data, exactly as many bytes as the shape says
                const size_t need = arr->count * DTYPES[arr->dtype_index].itemsize;
                *buffer = malloc(need > 0 ? need : 1);
                if (*buffer == NULL)
                    npy_fail(sink, "out of memory reading %zu bytes", need);
                else if (!read_exact(fd, *buffer, need))
                    read_failed(sink);
                else
                    status = 0;
            }
        }
    }
    free(header);
    close(fd);
    arr->data = *buffer;
    return status;
}

/* Passes 1 to 3 on the file at path or, with path NULL, on len bytes in
 * memory; *buffer is what to free once the numbers are converted. */
static int read_array(const char *path, const void *bytes, size_t len, const ErrSink *sink,
                      NpyArray *arr, unsigned char **buffer)
{
    *buffer = NULL;
    clear_err(sink->err, sink->err_len);
    if (path != NULL)
        return load_array(path, sink, arr, buffer);
    if (bytes == NULL && len > 0)
        return npy_fail(sink, "no bytes to read");
    return parse_npy(bytes, len, sink, arr);
}

/* A float tensor from a file or from memory (read_array). */
static Tensor *read_floats(const char *path, const void *bytes, size_t len, const char *name,
                           char *err, size_t err_len)
{
    const ErrSink sink = {name ? name : "<memory>", err, err_len};
    NpyArray arr;
    unsigned char *buffer;
    Tensor *x = read_array(path, bytes, len, &sink, &arr, &buffer) == 0
                    ? convert_floats(&arr, &sink) : NULL;
    free(buffer);
    return x;
}

/* Integers from a file or from memory (read_array). */
static int read_ints(const char *path, const void *bytes, size_t len, const char *name,
                     NpyInts *out, char *err, size_t err_len)
{
    const ErrSink sink = {name ? name : "<memory>", err, err_len};
    NpyArray arr;
    unsigned char *buffer;
    memset(out, 0, sizeof *out);
    const int status = read_array(path, bytes, len, &sink, &arr, &buffer) == 0
                           ? convert_ints(&arr, &sink, out) : -1;
    free(buffer);
    return status;
}

Tensor *npy_load(const char *path, char *err, size_t err_len)
{
    return read_floats(path, NULL, 0, path, err, err_len);
}

Tensor *npy_parse(const void *bytes, size_t len, const char *name, char *err, size_t err_len)
{
    return read_floats(NULL, bytes, len, name, err, err_len);
}

int npy_load_ints(const char *path, NpyInts *out, char *err, size_t err_len)
{
    return read_ints(path, NULL, 0, path, out, err, err_len);
}

int npy_parse_ints(const void *bytes, size_t len, const char *name, NpyInts *out,
                   char *err, size_t err_len)
{
    return read_ints(NULL, bytes, len, name, out, err, err_len);
}

/* ---- writing ------------------------------------------------------------- */

/* The preamble and header NumPy 1.24's np.save writes, byte for byte:
 * the dict with its keys sorted, room for the first dimension to grow to
 * 21 digits, then spaces so that the data starts at a multiple of 64
 * bytes, and a final '\n'. Returns the length written into buf. */
static size_t format_header(unsigned char *buf, size_t buf_len, const char *descr,
                            int ndim, const int *shape)
{
    char dict[256];
    int used = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                        descr);
    for (int i = 0; i < ndim; i++)
        used += snprintf(dict + used, sizeof dict - (size_t)used, "%s%d", i ? ", " : "", shape[i]);
    used += snprintf(dict + used, sizeof dict - (size_t)used, "%s), }", ndim == 1 ? "," : "");
    char first[16];
    int growth = 21 - snprintf(first, sizeof first, "%d", shape[0]);
    size_t text_len = (size_t)used + (size_t)growth + 1;   /* + '\n' */
    /* like NumPy: a header already aligned still gets a full 64 spaces */
    size_t pad = ARRAY_ALIGN - (MAGIC_LEN + 2 + 2 + text_len) % ARRAY_ALIGN;
    size_t header_len = text_len + pad;
    size_t total = MAGIC_LEN + 2 + 2 + header_len;
    if (total > buf_len)
        return 0;
    memcpy(buf, MAGIC, MAGIC_LEN);
    buf[6] = 1;   /* version 1.0 */
    buf[7] = 0;
    buf[8] = (unsigned char)(header_len & 0xff);
    buf[9] = (unsigned char)(header_len >> 8);
    memcpy(buf + 10, dict, (size_t)used);
    memset(buf + 10 + used, ' ', (size_t)growth + pad);
    buf[total - 1] = '\n';
    return total;
}

/* What is written: a tensor as '<f4', or ints of a shape as '<i4'. */
typedef struct {
    const Tensor *x;      /* or NULL, and then: */
    const int *ints;
    int ndim;
    const int *shape;
} Values;

/* The whole file, header and data, in one new buffer of *len bytes; NULL
 * with the sink filled. Both dtypes are 4 bytes a number, little-endian. */
static unsigned char *encode(const Values *v, const ErrSink *sink, size_t *len)
{
    const int ndim = v->x ? v->x->ndim : v->ndim;
    const int *shape = v->x ? v->x->shape : v->shape;
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS) {
        npy_fail(sink, "cannot save %d dimensions; a tensor has 1 to %d", ndim, TENSOR_MAX_DIMS);
        return NULL;
    }
    bool overflow;
    const size_t count = shape_size(ndim, shape, &overflow);
    char text[512];
    if (overflow) {
        npy_fail(sink, "cannot save shape %s: every size must be positive",
                 shape_str(text, sizeof text, ndim, shape));
        return NULL;
    }
    const size_t header_len = format_header((unsigned char *)text, sizeof text,
                                            v->x ? "<f4" : "<i4", ndim, shape);
    unsigned char *bytes = malloc(header_len + 4 * count);
    if (bytes == NULL) {
        npy_fail(sink, "out of memory for %zu bytes", header_len + 4 * count);
        return NULL;
    }
    memcpy(bytes, text, header_len);
    for (size_t i = 0; i < count; i++) {
        uint32_t bits;
        if (v->x != NULL) {
            memcpy(&bits, &v->x->data[i], 4);
        } else {
#if INT_MAX > INT32_MAX
            if (v->ints[i] < INT32_MIN || v->ints[i] > INT32_MAX) {
                free(bytes);
                npy_fail(sink, "value %d at %zu does not fit in '<i4'", v->ints[i], i);
                return NULL;
            }
#endif
            bits = (uint32_t)(int32_t)v->ints[i];
        }
        put_le_u32(bytes + header_len + 4 * i, bits);
    }
    *len = header_len + 4 * count;
    return bytes;
}

char *npy_path(const char *dir, const char *name)
{
    const size_t len = strlen(dir) + 1 + strlen(name) + sizeof ".npy";
    char *path = malloc(len);
    if (path == NULL)
        die("out of memory");
    snprintf(path, len, "%s%s%s.npy", dir, *dir ? "/" : "", name);
    return path;
}

/* v as NAME.npy into the set; a NaN or an infinity is refused. */
static int save_into(FileSet *set, const char *dir, const char *name, const Values *v,
                     char *err, size_t err_len)
{
    char *path = npy_path(dir, name), *file = npy_path("", name);
    const ErrSink sink = {path, err, err_len};
    const size_t bad = v->x ? tensor_first_non_finite(v->x) : SIZE_MAX;
    size_t len = 0;
    unsigned char *bytes = NULL;
    char where[120];
    clear_err(err, err_len);
    if (bad != SIZE_MAX)
        npy_fail(&sink, "%s is %s: nothing that is not a number is written",
                 element_str(where, sizeof where, bad, v->x->ndim, v->x->shape),
                 non_finite_name((double)v->x->data[bad]));
    else
        bytes = encode(v, &sink, &len);
    const int status = bytes == NULL ? -1 : fileset_write(set, file, bytes, len, err, err_len);
    free(bytes);
    free(path);
    free(file);
    return status;
}

int npy_save_into(FileSet *set, const char *dir, const char *name, const Tensor *x, char *err,
                  size_t err_len)
{
    return save_into(set, dir, name, &(Values){.x = x}, err, err_len);
}

int npy_save_ints_into(FileSet *set, const char *dir, const char *name, const int *values,
                       int ndim, const int *shape, char *err, size_t err_len)
{
    return save_into(set, dir, name, &(Values){NULL, values, ndim, shape}, err, err_len);
}

/* ---- one file, written in place (tests and tools) ----------------------------- */

static int save_file(const char *path, const Values *v, char *err, size_t err_len)
{
    const ErrSink sink = {path, err, err_len};
    size_t len = 0;
    clear_err(err, err_len);
    unsigned char *bytes = encode(v, &sink, &len);
    if (bytes == NULL)
        return -1;
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL && fwrite(bytes, 1, len, f) == len;
    int saved = errno;
    if (f != NULL && fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    free(bytes);
    return ok ? 0 : npy_fail(&sink, "cannot write: %s", strerror(saved));
}

int npy_save(const char *path, const Tensor *x, char *err, size_t err_len)
{
    return save_file(path, &(Values){.x = x}, err, err_len);
}

int npy_save_ints(const char *path, const int *values, int ndim, const int *shape,
                  char *err, size_t err_len)
{
    return save_file(path, &(Values){NULL, values, ndim, shape}, err, err_len);
}
