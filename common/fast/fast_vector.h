/*
 * fast_vector.h - the vector type of the fast files and its few helpers
 * (chapter 05's optional speed sections).
 *
 * vf is FAST_VEC floats (16 with AVX-512, else 8, as wide as the
 * register-tile kernel's vectors, fast_matmul.h) written with GCC/Clang
 * vector extensions: + - * and comparisons act lane by lane, and a scalar
 * operand stands for FAST_VEC copies of itself. vi is the same width of
 * int32 lanes, what a comparison of two vf returns (all ones or all zeros
 * per lane). With AVX2, AVX-512 or NEON each operation is one instruction;
 * without them the compiler splits it into smaller pieces, still correct.
 * transpose_8x8 turns eight rows of eight floats into columns, in
 * registers (fast_matmul.c's packing, fast_layer_norm.c's squares).
 */
#ifndef FAST_VECTOR_H
#define FAST_VECTOR_H

#include <stdint.h>
#include <string.h>

#include "fast/fast_matmul.h"

typedef float vf __attribute__((vector_size(FAST_VEC * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(FAST_VEC * sizeof(int32_t))));

/* Loads and stores through memcpy: any alignment, no aliasing questions;
 * the compiler turns each into one unaligned vector move. */
static inline vf load_vec(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_vec(float *p, vf v)
{
    memcpy(p, &v, sizeof v);
}

/* Eight rows of eight floats, transposed in registers: out[i][j] = in[j][i].
 * Three rounds of shuffles, each mixing pairs of vectors: after the first,
 * pairs of rows are interleaved float by float; after the second, groups
 * of four rows two floats at a time; after the third, each vector holds
 * one column. 24 shuffles instead of 64 single loads and stores. */
typedef float v8f __attribute__((vector_size(8 * sizeof(float))));

static inline void transpose_8x8(v8f r[8])
{
    v8f t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            u[i + h * 2] = __builtin_shufflevector(t[i + h], t[i + h + 2],
                                                   0, 1, 8, 9, 4, 5, 12, 13);
            u[i + h * 2 + 1] = __builtin_shufflevector(t[i + h], t[i + h + 2],
                                                       2, 3, 10, 11, 6, 7, 14, 15);
        }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* The sum of the lanes of x, lane 0 first. */
static inline float lanes_sum(vf x)
{
    float sum = 0.0f;
    for (int i = 0; i < FAST_VEC; i++)
        sum += x[i];
    return sum;
}

#endif
