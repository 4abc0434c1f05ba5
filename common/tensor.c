/* tensor.c - creation, shape, printing and comparison. See tensor.h. */
#include "tensor.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

char *shape_str(char *buf, size_t len, int ndim, const int *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && used < len; i++) {
        if (shape[i] < 0)
            used += (size_t)snprintf(buf + used, len - used, "%s*", i ? ", " : "");
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", shape[i]);
    }
    if (used < len)
        snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
    return buf;
}

size_t shape_size(int ndim, const int *shape, bool *overflow)
{
    size_t size = 1;
    *overflow = false;
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS) {
        *overflow = true;
        return 0;
    }
    for (int i = 0; i < ndim; i++) {
        /* sizeof(float) stays in the check so that size * 4 bytes fits too */
        if (shape[i] <= 0 || size > SIZE_MAX / sizeof(float) / (size_t)shape[i]) {
            *overflow = true;
            return 0;
        }
        size *= (size_t)shape[i];
    }
    return size;
}

Tensor *tensor_alloc_with(int ndim, const int *shape, float *(*allocate)(size_t count),
                          bool zero)
{
    char buf[80];
    bool overflow;
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS)
        die("a tensor has 1 to %d dimensions, not %d", TENSOR_MAX_DIMS, ndim);
    size_t size = shape_size(ndim, shape, &overflow);
    if (overflow)
        die("cannot make a tensor of shape %s: every size must be positive "
            "and the total must fit in memory", shape_str(buf, sizeof buf, ndim, shape));
    Tensor *x = checked_malloc(1, sizeof *x);
    x->ndim = ndim;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++)
        x->shape[i] = i < ndim ? shape[i] : 1;
    x->size = size;
    x->data = allocate(size);
    if (x->data == NULL) {
        free(x);
        die("out of memory: a tensor of shape %s needs %zu bytes (%.1f MB)",
            shape_str(buf, sizeof buf, ndim, shape), size * sizeof(float),
            (double)(size * sizeof(float)) / 1e6);
    }
    if (zero)
        memset(x->data, 0, size * sizeof(float));
    return x;
}

static float *uninitialised_floats(size_t count)
{
    memory_counted();
    return malloc(count * sizeof(float));   /* shape_size kept count * 4 in range */
}

static Tensor *tensor_alloc(int ndim, const int *shape, bool zero)
{
    return tensor_alloc_with(ndim, shape, uninitialised_floats, zero);
}

Tensor *tensor_zeros(int ndim, const int *shape)
{
    return tensor_alloc(ndim, shape, true);
}

Tensor *tensor_empty(int ndim, const int *shape)
{
    return tensor_alloc(ndim, shape, false);
}

Tensor *tensor_full(float value, int ndim, const int *shape)
{
    Tensor *x = tensor_alloc(ndim, shape, false);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = value;
    return x;
}

Tensor *tensor_ones(int ndim, const int *shape)
{
    return tensor_full(1.0f, ndim, shape);
}

Tensor *tensor_from(const float *values, int ndim, const int *shape)
{
    Tensor *x = tensor_alloc(ndim, shape, false);
    memcpy(x->data, values, x->size * sizeof(float));
    return x;
}

Tensor *tensor_uniform(Rng *rng, float low, float high, int ndim, const int *shape)
{
    Tensor *x = tensor_alloc(ndim, shape, false);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = low + (high - low) * rng_uniform(rng);
    return x;
}

Tensor *tensor_normal(Rng *rng, float mean, float std, int ndim, const int *shape)
{
    Tensor *x = tensor_alloc(ndim, shape, false);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = mean + std * rng_normal(rng);
    return x;
}

Tensor *tensor_arange(int ndim, const int *shape)
{
    Tensor *x = tensor_alloc(ndim, shape, false);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (float)i;
    return x;
}

Tensor *tensor_copy(const Tensor *x)
{
    return tensor_from(x->data, x->ndim, x->shape);
}

void tensor_free(Tensor *x)
{
    if (x == NULL)
        return;
    free(x->data);
    free(x);
}

void tensor_keep_or_free(Tensor *x, Tensor **out)
{
    if (out != NULL)
        *out = x;
    else
        tensor_free(x);
}

void tensor_free_all(Tensor *const *tensors, int count)
{
    for (int i = 0; i < count; i++)
        tensor_free(tensors[i]);
}

/* ---- pieces of a tensor ------------------------------------------------- */

/* Seen from dimension dim, a row-major tensor is (outer, shape[dim], inner):
 * outer counts the blocks before it, inner the floats after it. A slice
 * copies, from each of the outer blocks, one run of length * inner floats. */
Tensor *tensor_slice(const Tensor *x, int dim, int start, int length)
{
    char have[80];
    if (dim < 0 || dim >= x->ndim)
        die("dim %d is not a dimension of a tensor of shape %s", dim,
            shape_str(have, sizeof have, x->ndim, x->shape));
    if (start < 0 || length < 1 || start > x->shape[dim] - length)
        die("indices %d to %d are not inside dimension %d of shape %s",
            start, start + length - 1, dim, shape_str(have, sizeof have, x->ndim, x->shape));
    size_t outer = 1, inner = 1;
    for (int i = 0; i < dim; i++)
        outer *= (size_t)x->shape[i];
    for (int i = dim + 1; i < x->ndim; i++)
        inner *= (size_t)x->shape[i];

    int out_shape[TENSOR_MAX_DIMS];
    memcpy(out_shape, x->shape, sizeof out_shape);
    out_shape[dim] = length;
    Tensor *out = tensor_alloc(x->ndim, out_shape, false);
    const size_t run = (size_t)length * inner;
    for (size_t o = 0; o < outer; o++) {
        const float *from = x->data + (o * (size_t)x->shape[dim] + (size_t)start) * inner;
        memcpy(out->data + o * run, from, run * sizeof(float));
    }
    return out;
}

Tensor *tensor_select(const Tensor *x, int dim, int index)
{
    char have[80];
    if (x->ndim < 2)
        die("selecting from a tensor of shape %s would leave no dimension",
            shape_str(have, sizeof have, x->ndim, x->shape));
    if (dim < 0 || dim >= x->ndim || index < 0 || index >= x->shape[dim])
        die("index %d of dimension %d is not inside shape %s", index, dim,
            shape_str(have, sizeof have, x->ndim, x->shape));
    /* The slice of length 1, then the dimension of size 1 dropped. */
    Tensor *out = tensor_slice(x, dim, index, 1);
    int out_shape[TENSOR_MAX_DIMS];
    for (int i = 0, k = 0; i < x->ndim; i++)
        if (i != dim)
            out_shape[k++] = x->shape[i];
    return tensor_reshape(out, x->ndim - 1, out_shape);
}

Tensor *tensor_stack(const Tensor *const *tensors, int count)
{
    char want[80], have[80];
    if (count < 1 || tensors[0]->ndim >= TENSOR_MAX_DIMS)
        die("can stack 1 or more tensors of at most %d dimensions",
            TENSOR_MAX_DIMS - 1);
    const Tensor *first = tensors[0];
    int out_shape[TENSOR_MAX_DIMS] = {count};
    for (int i = 0; i < first->ndim; i++)
        out_shape[i + 1] = first->shape[i];
    Tensor *out = tensor_alloc(first->ndim + 1, out_shape, false);
    for (int i = 0; i < count; i++) {
        if (!tensor_has_shape(tensors[i], first->ndim, first->shape)) {
            shape_str(want, sizeof want, first->ndim, first->shape);
            shape_str(have, sizeof have, tensors[i]->ndim, tensors[i]->shape);
            tensor_free(out);
            die("tensor %d has shape %s, tensor 0 has %s", i, have, want);
        }
        memcpy(out->data + (size_t)i * first->size, tensors[i]->data,
               first->size * sizeof(float));
    }
    return out;
}

Tensor *tensor_reshape(Tensor *x, int ndim, const int *shape)
{
    char want[80], have[80];
    int resolved[TENSOR_MAX_DIMS];
    int inferred = -1;
    size_t known = 1;
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS)
        die("a tensor has 1 to %d dimensions, not %d", TENSOR_MAX_DIMS, ndim);
    for (int i = 0; i < ndim; i++) {
        resolved[i] = shape[i];
        if (shape[i] == -1 && inferred < 0) {
            inferred = i;
        } else if (shape[i] <= 0) {
            die("cannot view %s as %s: sizes must be positive (one may be -1)",
                shape_str(have, sizeof have, x->ndim, x->shape),
                shape_str(want, sizeof want, ndim, shape));
        } else {
            known *= (size_t)shape[i];
        }
    }
    if (inferred >= 0) {
        if (x->size % known != 0)
            die("cannot view %s as %s: %zu elements do not divide by %zu",
                shape_str(have, sizeof have, x->ndim, x->shape),
                shape_str(want, sizeof want, ndim, shape), x->size, known);
        resolved[inferred] = (int)(x->size / known);
        known *= (size_t)resolved[inferred];
    }
    if (known != x->size)
        die("cannot view %s (%zu elements) as %s (%zu elements)",
            shape_str(have, sizeof have, x->ndim, x->shape), x->size,
            shape_str(want, sizeof want, ndim, shape), known);
    x->ndim = ndim;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++)
        x->shape[i] = i < ndim ? resolved[i] : 1;
    return x;
}

Tensor *tensor_permute(const Tensor *x, const int *perm)
{
    int out_shape[TENSOR_MAX_DIMS] = {1, 1, 1, 1};
    size_t in_stride[TENSOR_MAX_DIMS] = {0, 0, 0, 0};
    size_t stride[TENSOR_MAX_DIMS];   /* input stride of each output dim */
    bool used[TENSOR_MAX_DIMS] = {false};
    int n = x->ndim;

    for (int i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || used[perm[i]])
            die("perm must list each of the %d dimensions once", n);
        used[perm[i]] = true;
    }
    /* Row-major strides of the input: the last dimension has stride 1. */
    in_stride[n - 1] = 1;
    for (int i = n - 2; i >= 0; i--)
        in_stride[i] = in_stride[i + 1] * (size_t)x->shape[i + 1];
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        out_shape[i] = i < n ? x->shape[perm[i]] : 1;
        stride[i] = i < n ? in_stride[perm[i]] : 0;
    }

    Tensor *out = tensor_zeros(n, out_shape);
    /* Walk the output in its own row-major order; each element is fetched
     * from the input with the permuted strides. Unused dims have size 1. */
    size_t o = 0;
    for (int a = 0; a < out_shape[0]; a++)
        for (int b = 0; b < out_shape[1]; b++)
            for (int c = 0; c < out_shape[2]; c++)
                for (int d = 0; d < out_shape[3]; d++)
                    out->data[o++] = x->data[a * stride[0] + b * stride[1]
                                             + c * stride[2] + d * stride[3]];
    return out;
}

bool tensor_has_shape(const Tensor *x, int ndim, const int *shape)
{
    if (x == NULL || x->ndim != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (shape[i] != -1 && shape[i] != x->shape[i])
            return false;
    return true;
}

void tensor_check_shape(const char *name, const Tensor *x, int ndim, const int *shape)
{
    char want[80], have[80];
    if (x == NULL)
        die("%s is missing; expected shape %s", name,
            shape_str(want, sizeof want, ndim, shape));
    if (!tensor_has_shape(x, ndim, shape))
        die("%s expected shape %s, got %s", name,
            shape_str(want, sizeof want, ndim, shape),
            shape_str(have, sizeof have, x->ndim, x->shape));
}

/* ---- printing ---------------------------------------------------------- */

/* PyTorch prints at most this many elements in full, then only the first
 * and last EDGE_ITEMS along each long dimension, with "..." between. */
enum { PRINT_THRESHOLD = 1000, EDGE_ITEMS = 3, LINE_WIDTH = 80 };

typedef struct {
    FILE *out;
    const Tensor *x;
    bool scientific;
    bool summarize;
    int width;
} Printer;

static int format_value(char *buf, size_t len, float v, bool scientific)
{
    if (isnan(v))
        return snprintf(buf, len, "nan");
    if (isinf(v))
        return snprintf(buf, len, v > 0 ? "inf" : "-inf");
    /* Print -0.0 as 0.0000 (PyTorch would print -0.0000), so that a weight
     * that is exactly zero always reads the same. */
    if (v == 0.0f)
        v = 0.0f;
    return snprintf(buf, len, scientific ? "%.4e" : "%.4f", (double)v);
}

/* Indices of dimension dim that are printed: all, or the edges. */
static bool skipped(const Printer *p, int dim, int i)
{
    int n = p->x->shape[dim];
    return p->summarize && n > 2 * EDGE_ITEMS && i >= EDGE_ITEMS && i < n - EDGE_ITEMS;
}

/* The last dimension, from offset: values on a line, wrapped to fit
 * LINE_WIDTH, between the brackets print_dim writes. */
static void print_row(const Printer *p, size_t offset, int indent)
{
    const int dim = p->x->ndim - 1, n = p->x->shape[dim];
    int per_line = (LINE_WIDTH - indent - 1) / (p->width + 2);
    if (per_line < 1)
        per_line = 1;
    int on_line = 0;
    for (int i = 0; i < n; i++) {
        char buf[48];
        if (skipped(p, dim, i)) {
            fprintf(p->out, "...,");
            i = n - EDGE_ITEMS - 1;
            on_line++;
            if (on_line < per_line)
                fputc(' ', p->out);
            continue;
        }
        if (on_line == per_line) {
            fprintf(p->out, "\n%*s", indent + 1, "");
            on_line = 0;
        }
        format_value(buf, sizeof buf, p->x->data[offset + (size_t)i], p->scientific);
        fprintf(p->out, "%*s", p->width, buf);
        on_line++;
        if (i < n - 1)
            fprintf(p->out, on_line < per_line ? ", " : ",");
    }
}

/* Dimension dim from offset, between brackets: the last one as a row of
 * values, any other as its slices, one print_dim each, with as many blank
 * lines between them as PyTorch leaves. */
static void print_dim(const Printer *p, int dim, size_t offset, int indent)
{
    const Tensor *x = p->x;
    int n = x->shape[dim];
    size_t stride = 1;
    for (int i = dim + 1; i < x->ndim; i++)
        stride *= (size_t)x->shape[i];

    fputc('[', p->out);
    if (dim == x->ndim - 1) {
        print_row(p, offset, indent);
    } else {
        int blank_lines = x->ndim - dim - 2;
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                fputc(',', p->out);
                for (int k = 0; k < 1 + blank_lines; k++)
                    fputc('\n', p->out);
                fprintf(p->out, "%*s", indent + 1, "");
            }
            if (skipped(p, dim, i)) {
                fprintf(p->out, "...");
                i = n - EDGE_ITEMS - 1;
                continue;
            }
            print_dim(p, dim + 1, offset + (size_t)i * stride, indent + 1);
        }
    }
    fputc(']', p->out);
}

void tensor_fprint(FILE *out, const Tensor *x)
{
    Printer p = {out, x, false, x->size > PRINT_THRESHOLD, 1};
    float max_abs = 0.0f;
    for (size_t i = 0; i < x->size; i++)
        if (isfinite(x->data[i]) && fabsf(x->data[i]) > max_abs)
            max_abs = fabsf(x->data[i]);
    /* Fixed point shows nothing useful for huge values: only then switch to
     * scientific notation (PyTorch switches sooner, see tensor.h). */
    p.scientific = max_abs >= 1e8f;
    for (size_t i = 0; i < x->size; i++) {
        char buf[48];
        int w = format_value(buf, sizeof buf, x->data[i], p.scientific);
        if (w > p.width)
            p.width = w;
    }
    fprintf(out, "tensor(");
    print_dim(&p, 0, 0, (int)strlen("tensor("));
    fprintf(out, ")");
}

void tensor_print(const Tensor *x)
{
    tensor_fprint(stdout, x);
    fputc('\n', stdout);
}

/* One dimension of a tensor of whole numbers, nested as tensor_fprint
 * nests, each number right-aligned in width characters. */
static void print_whole_dim(const Tensor *x, int dim, size_t offset, int indent, int width)
{
    size_t stride = 1;
    for (int i = dim + 1; i < x->ndim; i++)
        stride *= (size_t)x->shape[i];
    putchar('[');
    for (int i = 0; i < x->shape[dim]; i++) {
        if (dim == x->ndim - 1) {
            printf("%s%*ld", i ? ", " : "", width, lrintf(x->data[offset + (size_t)i]));
            continue;
        }
        if (i > 0) {
            putchar(',');
            for (int k = 0; k < x->ndim - dim - 1; k++)
                putchar('\n');
            printf("%*s", indent + 1, "");
        }
        print_whole_dim(x, dim + 1, offset + (size_t)i * stride, indent + 1, width);
    }
    putchar(']');
}

void tensor_print_whole_named(const char *name, const Tensor *x)
{
    char buf[24];
    int width = 1;
    for (size_t i = 0; i < x->size; i++) {
        int w = snprintf(buf, sizeof buf, "%ld", lrintf(x->data[i]));
        if (w > width)
            width = w;
    }
    printf("%s = tensor(", name);
    print_whole_dim(x, 0, 0, (int)strlen(name) + (int)strlen(" = tensor("), width);
    printf(")\n");
}

const char *residue_text(char *buf, size_t len, double value, double bound)
{
    if (fabs(value) < bound)
        snprintf(buf, len, "below %.0e", bound);
    else
        snprintf(buf, len, "%.1e", value);
    return buf;
}

void tensor_print_named(const char *name, const Tensor *x)
{
    /* One row fits after the name; a matrix starts on its own line so that
     * its rows stay aligned under "tensor(" as PyTorch prints them. */
    bool one_row = x->size == (size_t)x->shape[x->ndim - 1];
    printf(one_row ? "%s = " : "%s =\n", name);
    tensor_print(x);
}

/* ---- comparison -------------------------------------------------------- */

const char *tensor_index_str(char *buf, size_t len, size_t flat, int ndim, const int *shape)
{
    int index[TENSOR_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        index[i] = (int)(flat % (size_t)shape[i]);
        flat /= (size_t)shape[i];
    }
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", index[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

const char *non_finite_name(double v)
{
    return isnan(v) ? "NaN" : isinf(v) ? (v > 0 ? "inf" : "-inf") : "finite";
}

size_t tensor_first_non_finite(const Tensor *x)
{
    for (size_t i = 0; i < x->size; i++)
        if (!isfinite(x->data[i]))
            return i;
    return SIZE_MAX;
}

/* v for printf: a NaN of either sign as the positive one, "nan", never "-nan" */
static double shown(double v)
{
    return isnan(v) ? NAN : v;
}

static bool allclose_core(const float *actual, const float *expected, size_t n,
                          int ndim, const int *shape, float atol, float rtol, FILE *report)
{
    enum { SHOW = 5 };
    size_t bad = 0, worst = 0, first[SHOW];
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double a = actual[i], e = expected[i];
        double diff = fabs(a - e);
        double allowed = atol + rtol * fabs(e);
        bool ok = diff <= allowed || (a == e);   /* a == e lets inf match inf */
        if (isnan(a) || isnan(e))
            ok = false;
        if (ok)
            continue;
        if (bad < SHOW)
            first[bad] = i;
        bad++;
        double excess = isnan(diff) ? INFINITY : diff - allowed;
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
    }
    if (bad == 0 || report == NULL)
        return bad == 0;
    char where[80];
    fprintf(report, "allclose: %zu of %zu elements differ (atol %g, rtol %g)\n",
            bad, n, (double)atol, (double)rtol);
    tensor_index_str(where, sizeof where, worst, ndim, shape);
    fprintf(report, "  worst at %s: actual %.8g, expected %.8g, |diff| %.3g\n", where,
            shown(actual[worst]), shown(expected[worst]),
            shown(fabs((double)actual[worst] - (double)expected[worst])));
    for (size_t k = 0; k < bad && k < SHOW; k++) {
        tensor_index_str(where, sizeof where, first[k], ndim, shape);
        fprintf(report, "  at %s: actual %.8g, expected %.8g\n", where,
                shown(actual[first[k]]), shown(expected[first[k]]));
    }
    return false;
}

bool tensor_allclose(const Tensor *actual, const Tensor *expected,
                     float atol, float rtol, FILE *report)
{
    if (!tensor_has_shape(actual, expected->ndim, expected->shape)) {
        char a[80], e[80];
        if (report)
            fprintf(report, "allclose: shapes differ: actual %s, expected %s\n",
                    shape_str(a, sizeof a, actual->ndim, actual->shape),
                    shape_str(e, sizeof e, expected->ndim, expected->shape));
        return false;
    }
    return allclose_core(actual->data, expected->data, actual->size, actual->ndim,
                         actual->shape, atol, rtol, report);
}

bool floats_allclose(const float *actual, const float *expected, size_t n,
                     float atol, float rtol, FILE *report)
{
    int shape[1] = {(int)n};
    return allclose_core(actual, expected, n, 1, shape, atol, rtol, report);
}

float tensor_max_abs_diff(const Tensor *a, const Tensor *b)
{
    char sa[80], sb[80];
    if (!tensor_has_shape(a, b->ndim, b->shape))
        die("shapes differ: %s and %s",
            shape_str(sa, sizeof sa, a->ndim, a->shape),
            shape_str(sb, sizeof sb, b->ndim, b->shape));
    float worst = 0.0f;
    for (size_t i = 0; i < a->size; i++) {
        float d = fabsf(a->data[i] - b->data[i]);
        if (isnan(d))
            return NAN;   /* "not equal", whatever follows; +NaN prints "nan", not "-nan" */
        if (d > worst)
            worst = d;
    }
    return worst;
}

float tensor_max_abs(const Tensor *x)
{
    float m = 0.0f;
    for (size_t i = 0; i < x->size; i++) {
        if (isnan(x->data[i]))
            return NAN;   /* positive: printf shows "nan" for it, "-nan" for x86's default NaN */
        if (fabsf(x->data[i]) > m)
            m = fabsf(x->data[i]);
    }
    return m;
}
