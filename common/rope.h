/*
 * rope.h - rotary position embeddings, RoPE (introduced in chapter 06's
 * page "Positions that keep a symmetry"; Su et al., RoFormer, 2021).
 *
 * Legend: N = batch_size * num_heads, T = tokens, d = head size (even).
 *
 * After the head split, a query or key row at position p is cut into d/2
 * pairs and pair i, (x[2i], x[2i+1]), is turned by the angle p * theta_i:
 *
 *     theta_i = 10000^(-2i / d),  i = 0 ... d/2 - 1
 *     x'[2i]     = x[2i] cos(p theta_i) - x[2i+1] sin(p theta_i)
 *     x'[2i + 1] = x[2i] sin(p theta_i) + x[2i+1] cos(p theta_i)
 *
 * This is RoFormer's and llama2.c's pairing (interleaved pairs). GPT-NeoX
 * and Hugging Face pair x[i] with x[i + d/2] instead (the half split): the
 * same rotations on another pairing, so the two agree only after the
 * columns are reordered.
 *
 * Rotations compose, R(a)^T R(b) = R(b - a), so the dot product of a query
 * rotated for position m with a key rotated for position n depends on
 * m - n only: moving every position by the same offset changes no score.
 *
 * Every angle and its cosine and sine are computed in double and rounded
 * once to float. Positions go up to ROPE_MAX_POSITION - 1: float32 holds
 * every integer below 2^24 exactly, so a float32 implementation
 * (torch.arange(...).float()) names the same positions up to there and no
 * further.
 */
#ifndef ROPE_H
#define ROPE_H

#include <stdbool.h>

#include "tensor.h"

enum { ROPE_MAX_POSITION = 1 << 24 };

/* theta_i = 10000^(-2i / d), for pair i of a head of size d. */
double rope_theta(int pair, int head_size);

/* x (N, T, d) -> x rotated in place: row t of every (T, d) matrix sits at
 * position first_position + t. inverse turns by minus the angle (R^T), which
 * undoes the rotation and is its backward. d odd, a negative first_position
 * or a position at or past ROPE_MAX_POSITION is a programming error. */
void rope_rotate(Tensor *x, int first_position, bool inverse);

/* x (N, T, d) -> rotated (N, T, d), new. */
Tensor *rope_forward(const Tensor *x, int first_position);
/* grad_rotated (N, T, d) -> grad_x (N, T, d), new: R^T grad, since the
 * rotation is linear and orthogonal. */
Tensor *rope_backward(const Tensor *grad_rotated, int first_position);

/* The claim above, checked over all pairs: q, k (1, 1, d) turned for every
 * position m, n in 0 ... P-1 and again in S ... S+P-1; each score
 * q_m . k_n against the one at the same distance that starts at 0
 * (q_{m-n} . k_0 or q_0 . k_{n-m}). */
typedef struct {
    double worst;             /* the largest |score - reference| */
    double lowest, highest;   /* the range of the scores */
    double largest;           /* the largest |score| */
} RopeRelativeCheck;
RopeRelativeCheck rope_check_relative(const Tensor *q, const Tensor *k, int num_positions,
                                      int offset);

#endif
