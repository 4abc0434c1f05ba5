/* heads_common.h - what the graders of chapter 04 share: the shapes of a
 * case, drawn with the edges first, and a message that says where an
 * element went. */
#ifndef HEADS_COMMON_H
#define HEADS_COMMON_H

#include "grader.h"

#include <stdio.h>

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

/* "x[1, 0, 5]" for the flat index of an element of x (n0, n1, n2). */
static inline const char *element_name(char *buf, size_t len, const char *name, size_t flat,
                                       int n1, int n2)
{
    snprintf(buf, len, "%s[%d, %d, %d]", name, (int)(flat / ((size_t)n1 * n2)),
             (int)(flat / (size_t)n2 % (size_t)n1), (int)(flat % (size_t)n2));
    return buf;
}

#endif
