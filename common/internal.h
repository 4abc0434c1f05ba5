/*
 * internal.h - functions of the clear path that only the tests call: they
 * are compiled with the library, and kept out of its public headers so
 * that a chapter's reader meets only what the programs use.
 */
#ifndef INTERNAL_H
#define INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The two types by name only, so that this header stands below the files
 * that define its functions (valid_lens.h and multihead.h define them). */
typedef struct ValidLens ValidLens;
typedef struct MultiHeadGrads MultiHeadGrads;

/* tensor_allclose on raw arrays of n floats; the report gives flat
 * indices (tensor.c). */
bool floats_allclose(const float *actual, const float *expected, size_t n,
                     float atol, float rtol, FILE *report);

/* A copy of valid_lens, new (valid_lens.c). */
ValidLens *valid_lens_copy(const ValidLens *valid_lens);

/* Every gradient of grads set to 0 (multihead.c). */
void multihead_grads_zero(MultiHeadGrads *grads);

#endif
