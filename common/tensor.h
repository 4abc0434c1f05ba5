/*
 * tensor.h - the Tensor every chapter builds on (introduced in chapter 01).
 *
 * Conventions, stated once here and tested in tests/test_tensor.c:
 *   - float32, contiguous, row-major: the last index runs fastest, exactly
 *     as in a PyTorch tensor that is_contiguous().
 *   - at most 4 dimensions, written in PyTorch's order and PyTorch's words:
 *     (batch_size, num_queries, num_hiddens).
 *   - whoever creates a tensor frees it with tensor_free().
 *   - a programming error (shapes that do not fit) or an allocation that
 *     cannot succeed prints one line naming the function and both shapes,
 *     then exits with status 1. Programs check user input before calling in.
 *
 * Shapes are passed with the SHAPE() macro, so a call reads like PyTorch:
 *     Tensor *x = tensor_zeros(SHAPE(2, 3, 4));     // torch.zeros(2, 3, 4)
 *     AT3(x, b, t, d) = 1.0f;                        // x[b][t][d] = 1
 */
#ifndef TENSOR_H
#define TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "memory.h"
#include "random.h"

#define TENSOR_MAX_DIMS 4

typedef struct {
    int ndim;                     /* 1 to TENSOR_MAX_DIMS */
    int shape[TENSOR_MAX_DIMS];   /* shape[ndim - 1] is the fastest index */
    size_t size;                  /* product of the shape */
    float *data;                  /* size floats, row-major */
} Tensor;

/* SHAPE(2, 3, 4) expands to "3, (const int[]){2, 3, 4}": a count and a list. */
#define SHAPE(...) \
    (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)), (const int[]){__VA_ARGS__}

/* Element access that reads like x[i][j], x[b][t][d], x[b][h][t][d].
 * Each is an lvalue: AT2(w, i, j) = 0.5f; works. No bounds check. */
#define AT2(x, i, j) \
    ((x)->data[(size_t)(i) * (x)->shape[1] + (size_t)(j)])
#define AT3(x, i, j, k) \
    ((x)->data[((size_t)(i) * (x)->shape[1] + (size_t)(j)) * (x)->shape[2] + (size_t)(k)])
#define AT4(x, i, j, k, l) \
    ((x)->data[(((size_t)(i) * (x)->shape[1] + (size_t)(j)) * (x)->shape[2] + (size_t)(k)) \
               * (x)->shape[3] + (size_t)(l)])

/* ---- creation and destruction ---------------------------------------- */
Tensor *tensor_zeros(int ndim, const int *shape);
/* torch.empty: the data is not set, for an output every element of which
 * is written before any is read (zeroing it first would be wasted work) */
Tensor *tensor_empty(int ndim, const int *shape);
/* A tensor whose data comes from allocate(size), for code with an
 * allocator of its own (the fast path wants 64-byte alignment); the data
 * must be freeable with free(), and is set to zeros when zero is true.
 * Shapes are checked and a NULL from allocate stops as tensor_zeros does. */
Tensor *tensor_alloc_with(int ndim, const int *shape, float *(*allocate)(size_t count),
                          bool zero);
Tensor *tensor_ones(int ndim, const int *shape);
Tensor *tensor_full(float value, int ndim, const int *shape);
/* values holds product(shape) floats, copied in row-major order. */
Tensor *tensor_from(const float *values, int ndim, const int *shape);
/* Uniform in [low, high) and normal(mean, std) from the seeded generator. */
Tensor *tensor_uniform(Rng *rng, float low, float high, int ndim, const int *shape);
Tensor *tensor_normal(Rng *rng, float mean, float std, int ndim, const int *shape);
/* 0, 1, ..., n-1 as floats, like torch.arange(n), then reshaped. */
Tensor *tensor_arange(int ndim, const int *shape);
Tensor *tensor_copy(const Tensor *x);
void tensor_free(Tensor *x);   /* NULL is fine, as with free() */
/* x handed to the caller through *out, or freed when out is NULL (a
 * backward's "may be NULL: not computed" results). */
void tensor_keep_or_free(Tensor *x, Tensor **out);

/* Free several tensors at once, at the end of a part:
 *     TENSOR_FREE(scores, weights, out);
 * frees the three (NULL entries are fine). The list is counted for you. */
void tensor_free_all(Tensor *const *tensors, int count);
#define TENSOR_FREE(...)                                  \
    tensor_free_all((Tensor *const[]){__VA_ARGS__},       \
                    (int)(sizeof((Tensor *const[]){__VA_ARGS__}) / sizeof(Tensor *)))

/* ---- shape ------------------------------------------------------------- */
/* Product of a shape, or 0 with *overflow set when it does not fit size_t
 * (or a dimension is not positive). */
size_t shape_size(int ndim, const int *shape, bool *overflow);

/* Reshape in place (the data does not move, like PyTorch's view on a
 * contiguous tensor). One dimension may be -1: it is inferred. */
Tensor *tensor_reshape(Tensor *x, int ndim, const int *shape);

/* New tensor with the dimensions reordered: out.shape[i] = x.shape[perm[i]],
 * like x.permute(*perm).contiguous(). The data is copied. */
Tensor *tensor_permute(const Tensor *x, const int *perm);

/* ---- pieces of a tensor (always copies) ------------------------------- */
/* Indices start .. start + length - 1 along dimension dim, every other
 * dimension whole: x.narrow(dim, start, length).contiguous() in PyTorch,
 * x[:, :, start:start + length] for dim 2. The shape keeps its dimensions. */
Tensor *tensor_slice(const Tensor *x, int dim, int start, int length);

/* Index `index` of dimension dim, which disappears: x.select(dim, index),
 * x[index] for dim 0. weights (B, T, n_k) -> tensor_select(weights, 0, b) (T, n_k).
 * x needs at least 2 dimensions. */
Tensor *tensor_select(const Tensor *x, int dim, int index);

/* count tensors of one shape stacked along a new first dimension:
 * torch.stack([a, b, c]). (T, n_k) matrices -> (count, T, n_k).
 *     Tensor *panels = TENSOR_STACK(weights, weights_PX, moved);   */
Tensor *tensor_stack(const Tensor *const *tensors, int count);
#define TENSOR_STACK(...)                                      \
    tensor_stack((const Tensor *const[]){__VA_ARGS__},         \
                 (int)(sizeof((const Tensor *const[]){__VA_ARGS__}) / sizeof(Tensor *)))

/* true when x has this shape; -1 in shape matches any size. */
bool tensor_has_shape(const Tensor *x, int ndim, const int *shape);

/* Stop (die) with "tensor_check_shape: NAME expected shape (2, *, 4), got
 * (2, 3, 5)" unless x has the shape; -1 in shape matches any size and
 * prints as '*'. A bug's line: the stack under a debugger names the caller. */
void tensor_check_shape(const char *name, const Tensor *x, int ndim, const int *shape);

/* "(2, 3, 4)" into buf (at least 64 bytes); returns buf. */
char *shape_str(char *buf, size_t len, int ndim, const int *shape);

/* ---- printing ---------------------------------------------------------- */
/* PyTorch-like: tensor([[0.4324, 0.5676, 0.0000]]), 4 decimals, nested
 * brackets, columns aligned, a blank line between 2-D blocks, at most 80
 * columns, and "..." past 1000 elements. This is what PyTorch prints after
 * torch.set_printoptions(precision=4, sci_mode=False), with three
 * differences: whole numbers keep their decimals (1.0000, where PyTorch
 * prints 1.), -0.0 prints as 0.0000, and values of 1e8 and more switch the
 * whole tensor to scientific notation. Set those print options in your
 * notebook to hold its output next to ours. */
void tensor_fprint(FILE *out, const Tensor *x);
void tensor_print(const Tensor *x);   /* to stdout, with a newline */
/* "name = tensor(...)" on stdout; a tensor of several rows starts on the
 * next line so its rows stay aligned. */
void tensor_print_named(const char *name, const Tensor *x);
/* "name = tensor([[   0,    1], ...])": a tensor that holds whole numbers
 * (index codes, counts) printed as PyTorch prints an integer tensor, every
 * element rounded to the nearest integer, columns aligned. */
void tensor_print_whole_named(const char *name, const Tensor *x);
/* A rounding residue as text: "below 1e-06" when |value| < bound, else
 * value in %.1e. A residue's digits depend on the machine (its libm, its
 * vectors, its compiler), so a page quotes the bound, which holds on all. */
const char *residue_text(char *buf, size_t len, double value, double bound);

/* ---- comparison -------------------------------------------------------- */
/* true when |actual - expected| <= atol + rtol * |expected| everywhere
 * (shapes must match; NaN never matches). On failure, when report is not
 * NULL, print the worst index and the first few mismatches to it. */
bool tensor_allclose(const Tensor *actual, const Tensor *expected,
                     float atol, float rtol, FILE *report);
/* Largest |a - b| over all elements (shapes must match); NaN when any
 * difference is NaN. A NaN returned here and by tensor_max_abs is always
 * the positive one, which printf writes as "nan": the NaN that x86's
 * arithmetic makes has its sign bit set, and prints as "-nan". */
float tensor_max_abs_diff(const Tensor *a, const Tensor *b);
/* Largest |x|; NaN when x holds a NaN. */
float tensor_max_abs(const Tensor *x);
/* The flat index of x's first NaN or infinity, or SIZE_MAX when every
 * element is finite. */
size_t tensor_first_non_finite(const Tensor *x);
/* A non-finite value's name in a message: "NaN", "inf" or "-inf" (printf
 * would write x86's NaN as "-nan"); for a finite v, "finite". */
const char *non_finite_name(double v);
/* A flat index as the index of each dimension: 11 in shape (2, 3, 2) is
 * "[1, 2, 1]". Returns buf. */
const char *tensor_index_str(char *buf, size_t len, size_t flat, int ndim, const int *shape);

#endif
