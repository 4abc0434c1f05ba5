/*
 * valid_lens.h - d2l's valid_lens (introduced in chapter 02).
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys.
 *
 * For a query, key j takes part when j < valid_len. valid_lens is either
 * 1-D (B,), one length for every query of a sequence, or 2-D (B, T), one
 * length per query. A length is from 0 to n_k; 0 means the query sees no key.
 * NULL stands for "no mask": every query sees every key.
 */
#ifndef VALID_LENS_H
#define VALID_LENS_H

#include "error.h"

/* d2l's valid_lens tensor: integers, 1-D (B,) or 2-D (B, T). */
typedef struct ValidLens {
    int ndim;        /* 1 or 2 */
    int shape[2];    /* (B,) uses shape[0] only */
    int *data;       /* shape[0] * (ndim == 2 ? shape[1] : 1) lengths */
} ValidLens;

ValidLens *valid_lens_1d(const int *lens, int batch);                    /* (B,)   */
ValidLens *valid_lens_2d(const int *lens, int batch, int num_queries);  /* (B, T) */
/* The causal mask (chapter 02's exercise) as a 2-D (B, T): query i sees
 * keys 0 .. i, valid_len = i + 1, in every sequence. */
ValidLens *valid_lens_causal(int batch, int num_queries);
void valid_lens_free(ValidLens *valid_lens);   /* NULL is fine */
/* The length that applies to query q of sequence b. */
int valid_len_at(const ValidLens *valid_lens, int b, int q);
/* Stop (die) with a message unless valid_lens fits scores of shape
 * (B, T, n_k): 1-D of size B or 2-D of (B, T), every length in [0, n_k].
 * NULL (no mask) always fits. */
void valid_lens_check(const ValidLens *valid_lens, int batch, int num_queries, int num_keys);
/* Print like PyTorch: tensor([2, 3]) */
void valid_lens_print_named(const char *name, const ValidLens *valid_lens);

#endif
