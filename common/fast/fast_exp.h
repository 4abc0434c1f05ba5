/*
 * fast_exp.h - an exponential the compiler can vectorise (the fast path of
 * chapter 03's softmax; explained in 03_self_attention/README.md).
 *
 * Softmax spends most of its time in exp: attention over n keys calls it
 * n * n times per head. libm's expf is accurate but it is a scalar call with
 * branches inside, so a loop of expf cannot become vector instructions.
 * This exp is written as plain arithmetic on 8 or 16 floats at a time:
 *
 *   exp(x) = 2^n * exp(r),   n = round(x / ln 2),   r = x - n ln 2
 *
 * so |r| <= ln(2) / 2, where a polynomial of degree 7 is accurate to far
 * below one float ulp, and 2^n is built directly in the exponent bits.
 *
 * Accuracy: at most 1 ulp from libm's expf, normal and subnormal results
 * alike (measured on all 2^32 floats; tests/test_fast.c checks a sample of
 * the whole range and every float near underflow and overflow).
 * Special values are exact:
 *   exp(-inf) = 0 and exp(x) = 0 exactly when the true result is below half
 *     the smallest subnormal float (x < -103.972...), so masked scores
 *     (-inf) get a weight of exactly 0;
 *   exp(+inf) = +inf, and +inf when the result overflows (x > 88.7228...);
 *   exp(NaN) = NaN;  exp(0) = 1.
 */
#ifndef FAST_EXP_H
#define FAST_EXP_H

#include <stddef.h>

/* One value (the same arithmetic as the array version, lane by lane). */
float fast_expf(float x);

/* The softmax's first step: the largest of row[0..n), n >= 1 (NaN
 * entries are passed over). */
float fast_row_max(const float *row, size_t n);
/* The same, for a row whose memory runs on to a whole number of vectors
 * (n rounded up to a multiple of FAST_VEC floats): the last vector is
 * read whole and its lanes past n set aside, not copied out first. */
float fast_row_max_padded(const float *row, size_t n);

/* The two softmax steps below take the exp of weights, exp(s - shift)
 * with shift at least the row's largest score, so every argument is at
 * most 0 (up to rounding), and they skip what such arguments never need:
 * there is no overflow check (an argument above 88.72, +inf included,
 * gives a meaningless number), and a weight below 2^-125 (an argument
 * below -87), nothing beside the row's largest weight of 1, is 0. In
 * between they are fast_expf's arithmetic; -inf gives exactly 0, NaN NaN. */

/* The softmax step: row[i] = exp(row[i] - shift) in place, and return the
 * sum of the new row; -inf entries (masked scores) become exactly 0. */
float fast_exp_shift_sum(float *row, size_t n, float shift);
/* The same, for a row that runs on to a whole number of vectors: the
 * floats past n in the last vector are set to 0. */
float fast_exp_shift_sum_padded(float *row, size_t n, float shift);

/* The backward's step: y[i] = exp(x[i] - shift[i]) for i < n, one shift
 * per element (y may be x). With shift = a row's logsumexp, this is the
 * softmax weight itself, recomputed from its score. */
void fast_exp_sub(const float *x, const float *shift, float *y, size_t n);

/* GELU and its backward (learn/mlp.h, chapter 06's language model) on
 * this exp, with 1 + tanh(z) written as 2 / (1 + exp(-2 z)): within 1e-6
 * (value) and 4e-6 (slope) of gelu_forward and gelu_backward's tanhf,
 * many times faster (GELU runs on every hidden unit of every MLP, twice
 * per training step). grad_f may be grad_g, g may be f. */
void fast_gelu_forward(const float *f, float *g, size_t n);
void fast_gelu_backward(const float *f, const float *grad_g, float *grad_f, size_t n);

/* Both at once for a training step: g = GELU(f), and f replaced by
 * GELU's slope at f, all the backward needs of it. The gate is computed
 * once for both, and the backward is then one product,
 * grad_f[i] = grad_g[i] * slope[i]: the same bits as
 * fast_gelu_backward(f, grad_g, grad_f, n) on the f before. */
void fast_gelu_forward_slope(float *f, float *g, size_t n);

#endif
