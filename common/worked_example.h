/*
 * worked_example.h - the three tokens of a worked PyTorch example of
 * self-attention, and what that example printed (introduced in chapter 03,
 * used again by its backward and by chapter 06).
 *
 * The example drew X = torch.randn(3, 3), printed it to 4 decimals, and
 * printed softmax(X X^T) X: attention without the 1 / sqrt(d) of
 * common/attention.c. The numbers here are those printed ones, so a
 * program can hold its own result next to the example's.
 */
#ifndef WORKED_EXAMPLE_H
#define WORKED_EXAMPLE_H

#include "tensor.h"

/* X (3, 3): one token per row, as the example printed them */
extern const float EXAMPLE_TOKENS[3 * 3];
/* softmax(X X^T) X (3, 3), as the example printed it */
extern const float EXAMPLE_PRINTED_OUTPUT[3 * 3];

/* The example's formula: softmax(queries keys^T) values, the scores not
 * divided by sqrt(d). queries (T, d), keys (n_k, d), values (n_k, v), or the
 * same with a batch dimension in front -> (T, v) or (B, T, v), new. When
 * weights is not NULL it receives the softmax (T, n_k) or (B, T, n_k), new. */
Tensor *unscaled_attention(const Tensor *queries, const Tensor *keys, const Tensor *values,
                           Tensor **weights);

#endif
