/*
 * positional.h - d2l's sinusoidal positional encoding (introduced in
 * chapter 06).
 *
 * Legend: B = batch_size, T = number of tokens, D = num_hiddens.
 *
 * Self-attention does not know where a token sits: permuting the tokens only
 * permutes the outputs (chapter 06). To make order matter, the Transformer
 * adds to token i a fixed vector that depends on i alone:
 *
 *     PE[i, 2j]     = sin(i / 10000^(2j / D))
 *     PE[i, 2j + 1] = cos(i / 10000^(2j / D))
 *
 * Column pair (2j, 2j+1) is a point going round the unit circle at its own
 * frequency, from one turn per 2*pi tokens (j = 0) down to very slow ones, so
 * every position gets a different pattern, like the digits of a counter.
 * When D is odd the last column is a sine without its cosine partner (d2l
 * itself asks for an even D).
 */
#ifndef POSITIONAL_H
#define POSITIONAL_H

#include "tensor.h"

/* -> PE (max_len, D), the table above. Each angle and its sine or cosine are
 * computed in double and rounded once to float, so every entry is the float
 * nearest the exact value (d2l computes in float32, which can differ by a
 * few 1e-5 at positions in the hundreds). */
Tensor *positional_encoding(int max_len, int num_hiddens);

/* x (B, T, D) -> x + PE[:T] (B, T, D), a new tensor: d2l's
 * PositionalEncoding.forward in evaluation mode (no dropout). */
Tensor *add_positional_encoding(const Tensor *x);

#endif
