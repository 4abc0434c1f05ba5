/*
 * valid_lens.c - d2l's valid_lens, the lengths that say which keys a query
 * may see (introduced in chapter 02). See valid_lens.h.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys.
 */
#include "valid_lens.h"

#include "internal.h"
#include "tensor.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ValidLens *valid_lens_alloc(int ndim, int batch, int num_queries)
{
    if (batch < 1 || num_queries < 1)
        die("valid_lens needs positive sizes, got batch %d and num_queries %d",
            batch, num_queries);
    ValidLens *valid_lens = checked_malloc(1, sizeof *valid_lens);
    valid_lens->ndim = ndim;
    valid_lens->shape[0] = batch;
    valid_lens->shape[1] = ndim == 2 ? num_queries : 1;
    valid_lens->data = checked_malloc((size_t)batch * (size_t)valid_lens->shape[1],
                                      sizeof(int));
    return valid_lens;
}

static size_t valid_lens_count(const ValidLens *valid_lens)
{
    return (size_t)valid_lens->shape[0] * (size_t)(valid_lens->ndim == 2 ? valid_lens->shape[1] : 1);
}

/* lens (B,) -> valid_lens (B,) */
ValidLens *valid_lens_1d(const int *lens, int batch)
{
    ValidLens *valid_lens = valid_lens_alloc(1, batch, 1);
    memcpy(valid_lens->data, lens, (size_t)batch * sizeof(int));
    return valid_lens;
}

/* lens (B * T,) row-major -> valid_lens (B, T) */
ValidLens *valid_lens_2d(const int *lens, int batch, int num_queries)
{
    ValidLens *valid_lens = valid_lens_alloc(2, batch, num_queries);
    memcpy(valid_lens->data, lens, (size_t)batch * (size_t)num_queries * sizeof(int));
    return valid_lens;
}

ValidLens *valid_lens_causal(int batch, int num_queries)
{
    ValidLens *causal = valid_lens_alloc(2, batch, num_queries);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < num_queries; i++)
            causal->data[(size_t)b * num_queries + i] = i + 1;
    return causal;
}

ValidLens *valid_lens_copy(const ValidLens *valid_lens)
{
    if (valid_lens->ndim == 2)
        return valid_lens_2d(valid_lens->data, valid_lens->shape[0], valid_lens->shape[1]);
    return valid_lens_1d(valid_lens->data, valid_lens->shape[0]);
}

void valid_lens_free(ValidLens *valid_lens)
{
    if (valid_lens == NULL)
        return;
    free(valid_lens->data);
    free(valid_lens);
}

int valid_len_at(const ValidLens *valid_lens, int b, int q)
{
    /* 1-D: one length per sequence, shared by all of its queries (what d2l
     * does with repeat_interleave). 2-D: one length per query. */
    if (valid_lens->ndim == 1)
        return valid_lens->data[b];
    return valid_lens->data[(size_t)b * valid_lens->shape[1] + (size_t)q];
}

void valid_lens_check(const ValidLens *valid_lens, int batch, int num_queries, int num_keys)
{
    char have[80], scores[80];
    if (valid_lens == NULL)
        return;
    shape_str(scores, sizeof scores, SHAPE(batch, num_queries, num_keys));
    shape_str(have, sizeof have, valid_lens->ndim, valid_lens->shape);
    bool fits = (valid_lens->ndim == 1 && valid_lens->shape[0] == batch) ||
                (valid_lens->ndim == 2 && valid_lens->shape[0] == batch &&
                 valid_lens->shape[1] == num_queries);
    if (!fits)
        die("valid_lens has shape %s; scores of shape %s need (%d,) or (%d, %d)",
            have, scores, batch, batch, num_queries);
    for (int b = 0; b < batch; b++) {
        for (int q = 0; q < (valid_lens->ndim == 2 ? num_queries : 1); q++) {
            int len = valid_len_at(valid_lens, b, q);
            if (len >= 0 && len <= num_keys)
                continue;
            char where[32];
            if (valid_lens->ndim == 2)
                snprintf(where, sizeof where, "[%d, %d]", b, q);
            else
                snprintf(where, sizeof where, "[%d]", b);
            die("valid_lens%s = %d is outside 0..%d: a length counts keys, and "
                "there are %d", where, len, num_keys, num_keys);
        }
    }
}

void valid_lens_print_named(const char *name, const ValidLens *valid_lens)
{
    /* PyTorch right-aligns integers to the widest one. */
    char buf[16];
    int width = 1;
    size_t count = valid_lens_count(valid_lens);
    for (size_t i = 0; i < count; i++) {
        int w = snprintf(buf, sizeof buf, "%d", valid_lens->data[i]);
        if (w > width)
            width = w;
    }
    printf("%s = tensor(", name);
    int rows = valid_lens->ndim == 2 ? valid_lens->shape[0] : 1;
    int cols = valid_lens->ndim == 2 ? valid_lens->shape[1] : valid_lens->shape[0];
    int indent = (int)strlen(name) + (int)strlen(" = tensor(") + 1;
    if (valid_lens->ndim == 2)
        printf("[");
    for (int r = 0; r < rows; r++) {
        if (r > 0)
            printf(",\n%*s", indent, "");
        printf("[");
        for (int c = 0; c < cols; c++)
            printf("%s%*d", c ? ", " : "", width, valid_lens->data[(size_t)r * cols + c]);
        printf("]");
    }
    if (valid_lens->ndim == 2)
        printf("]");
    printf(")\n");
}
