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

/* The sum of the lanes of x, lane 0 first. */
static inline float lanes_sum(vf x)
{
    float sum = 0.0f;
    for (int i = 0; i < FAST_VEC; i++)
        sum += x[i];
    return sum;
}

#endif
