/*
 * fast_internal.h - fast-path functions that only the tests call, kept out
 * of the public headers: a program multiplies tensors (fast_matmul.h) and
 * takes exponentials inside a softmax (fast_exp.h), never on raw arrays.
 */
#ifndef FAST_INTERNAL_H
#define FAST_INTERNAL_H

#include <stddef.h>

/* A (m, k) @ B (k, n) -> C (m, n), like matmul_raw; num_threads >= 1. */
void fast_matmul_raw(const float *a, const float *b, float *c, int m, int k, int n,
                     int num_threads);
/* A (m, k) @ B^T, B (n, k) -> C (m, n), like matmul_bt_raw. */
void fast_matmul_bt_raw(const float *a, const float *b, float *c, int m, int k, int n,
                        int num_threads);

/* y[i] = exp(x[i]) for i < n. y may be x (in place). */
void fast_exp_array(const float *x, float *y, size_t n);

#endif
