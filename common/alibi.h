/*
 * alibi.h - ALiBi, attention with linear biases (introduced in chapter 06's
 * page "Positions that keep a symmetry"; Press, Smith and Lewis, Train
 * Short, Test Long, 2022).
 *
 * Legend: B = batch_size, H = num_heads, T = num_queries, n_k = num_keys.
 *
 * No vector is added to the tokens. Instead head h (1 ... H) subtracts a
 * penalty from every scaled score, growing with the distance:
 *
 *     scores[b, h, i, j] += -m_h |i - j|
 *
 * with slopes m_h = 2^(-8h / H) when H is a power of two (H = 8: 1/2,
 * 1/4, ..., 1/256). For other H the paper takes the slopes of n, the
 * largest power of two below H, then every other slope of the 2n rule
 * (its 1st, 3rd, ...) until there are H. A steep head looks near, a
 * shallow one far. |i - j| does not change when every position moves by
 * the same offset, so neither does any score.
 */
#ifndef ALIBI_H
#define ALIBI_H

#include <stddef.h>

#include "tensor.h"

/* -> slopes (H,), in double, m_1 the steepest. */
void alibi_slopes(int num_heads, double *slopes);
/* A slope as text: "1/256" for 2^-8 (a whole inverse), else "0.0884". */
void alibi_slope_text(char *buf, size_t len, double slope);

/* scores (B*H, T, n_k) += -m_h |i - j| in place, matrix b*H + h being head h
 * of sequence b (heads.h); queries and keys both start at position 0, or
 * at the same offset, which is the same thing here. */
void alibi_add_bias(Tensor *scores, int num_heads);

/* -> bias (H, T, n_k), new: -m_h |i - j|, what alibi_add_bias adds. */
Tensor *alibi_bias(int num_heads, int num_queries, int num_keys);

#endif
