/* heads_common.h - what the graders of chapter 04 share: the shapes of a
 * case, drawn with the edges first, its values, a message that says where
 * an element went, and the property that a split only moves numbers. */
#ifndef HEADS_COMMON_H
#define HEADS_COMMON_H

#include "grader.h"

#include <stdio.h>
#include <string.h>

/* B, T, H and d for case `index`: H = 1, d = 1, T = 1 and B = 1 first,
 * then sizes that differ from each other, d odd half the time. */
static inline void draw_head_shape(Rng *rng, int index, int count, int *B, int *T, int *H,
                                   int *d)
{
    *B = index == 3 ? 1 : draw_size(rng, index, count, 1, 3);
    *T = index == 2 ? 1 : draw_size(rng, index, count, 1, 4);
    *H = index == 0 ? 1 : draw_size(rng, index, count, 2, 4);
    *d = index == 1 ? 1 : draw_size(rng, index, count, 1, 5);
}

/* The values of case `index`: x[i] = i, the element's own flat index, in
 * the first cases and every other one after; in the rest x[i] = i + k/100
 * with k from 1 to 99, still readable as an address but no whole number,
 * so that only an exact move passes (a copy through an int does not). */
static inline Tensor *draw_head_values(Rng *rng, int index, int ndim, const int *shape)
{
    Tensor *x = tensor_arange(ndim, shape);
    if (index >= 4 && index % 2 == 1)
        for (size_t i = 0; i < x->size; i++)
            x->data[i] += (float)draw_int(rng, 1, 99) / 100.0f;
    return x;
}

/* What draw_head_values drew, for case_describe. */
static inline const char *head_values_name(const Tensor *x)
{
    return x->data[x->size - 1] == (float)(x->size - 1) ? "x[i] = i, its flat index"
                                                        : "x[i] = i + a fraction";
}

/* "x[1, 0, 5]" for the flat index of an element of x (n0, n1, n2). */
static inline const char *element_name(char *buf, size_t len, const char *name, size_t flat,
                                       int n1, int n2)
{
    snprintf(buf, len, "%s[%d, %d, %d]", name, (int)(flat / ((size_t)n1 * n2)),
             (int)(flat / (size_t)n2 % (size_t)n1), (int)(flat % (size_t)n2));
    return buf;
}

/* How many elements of t have exactly the bits of v. */
static inline size_t count_bits(const Tensor *t, float v)
{
    size_t n = 0;
    for (size_t i = 0; i < t->size; i++)
        n += memcmp(&t->data[i], &v, sizeof v) == 0;
    return n;
}

/* The element of x (n0, n1, n2) that holds exactly v, by name, or the
 * value itself when none does. */
static inline const char *source_name(char *buf, size_t len, const Tensor *x, float v, int n1,
                                      int n2)
{
    for (size_t k = 0; k < x->size; k++)
        if (memcmp(&x->data[k], &v, sizeof v) == 0)
            return element_name(buf, len, "x", k, n1, n2);
    snprintf(buf, len, "%.9g, no element of x", (double)v);
    return buf;
}

/* The property of the chapter: a split or a merge only moves numbers, so
 * out holds every element of x exactly once, bit for bit. x is
 * (x0, x1, x2), out (o0, o1, o2). */
static inline void expect_moved_once(const Tensor *x, int x1, int x2, const Tensor *out, int o1,
                                     int o2, int hint)
{
    char here[128], what[128];
    for (size_t i = 0; i < out->size; i++)
        expect_that(count_bits(x, out->data[i]) > 0, hint,
                    "%s holds %.9g, which is no element of x: the heads only move the "
                    "numbers of x, they compute none",
                    element_name(here, sizeof here, "out", i, o1, o2), (double)out->data[i]);
    for (size_t k = 0; k < x->size; k++) {
        size_t in_x = count_bits(x, x->data[k]), in_out = count_bits(out, x->data[k]);
        if (in_out == in_x)
            continue;
        element_name(what, sizeof what, "x", k, x1, x2);
        if (in_out < in_x)
            expect_that(false, hint, "%s (%.9g) is nowhere in out: every element of x must "
                        "land in exactly one place", what, (double)x->data[k]);
        expect_that(false, hint, "%s (%.9g) is in out %zu times: every element of x must "
                    "land in exactly one place, so another one is lost", what,
                    (double)x->data[k], in_out / in_x);
    }
}

#endif
