/*
 * rope.c - rotary position embeddings (introduced in chapter 06's page
 * "Positions that keep a symmetry"). See rope.h.
 *
 * Legend: N = batch_size * num_heads, T = tokens, d = head size (even).
 */
#include "rope.h"

#include <math.h>
#include <string.h>

#include "ops.h"

double rope_theta(int pair, int head_size)
{
    return pow(10000.0, -2.0 * (double)pair / (double)head_size);
}

/* x (N, T, d) -> x, in place */
void rope_rotate(Tensor *x, int first_position, bool inverse)
{
    tensor_check_shape("x", x, SHAPE(-1, -1, -1));
    const int N = x->shape[0], T = x->shape[1], d = x->shape[2];
    if (d % 2 != 0)
        die("the head size must be even to cut it into pairs, got %d", d);
    if (first_position < 0 || (long long)first_position + T > ROPE_MAX_POSITION)
        die("positions %d ... %lld must be in [0, %d)", first_position,
            (long long)first_position + T - 1, ROPE_MAX_POSITION);
    const double sign = inverse ? -1.0 : 1.0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < d / 2; i++) {
            /* one angle per (position, pair), shared by every matrix */
            const double angle = sign * (double)(first_position + t) * rope_theta(i, d);
            const float c = (float)cos(angle), s = (float)sin(angle);
            for (int n = 0; n < N; n++) {
                float *pair = &AT3(x, n, t, 2 * i);
                const float even = pair[0], odd = pair[1];
                pair[0] = even * c - odd * s;
                pair[1] = even * s + odd * c;
            }
        }
}

/* x (N, T, d) -> rotated (N, T, d) */
Tensor *rope_forward(const Tensor *x, int first_position)
{
    Tensor *rotated = tensor_copy(x);
    rope_rotate(rotated, first_position, false);
    return rotated;
}

/* grad_rotated (N, T, d) -> grad_x (N, T, d) */
Tensor *rope_backward(const Tensor *grad_rotated, int first_position)
{
    /* y = R x with R orthogonal, so dL/dx = R^T dL/dy: the turn back */
    Tensor *grad_x = tensor_copy(grad_rotated);
    rope_rotate(grad_x, first_position, true);
    return grad_x;
}

/* q, k (1, 1, d) -> the check over P positions from 0 and from S */
RopeRelativeCheck rope_check_relative(const Tensor *q, const Tensor *k, int num_positions,
                                      int offset)
{
    const int d = q->shape[2], P = num_positions, S = offset;
    /* one query and one key, each turned for every position 0 ... P-1 and
     * S ... S+P-1: rows of (1, P, d) */
    Tensor *qs = tensor_zeros(SHAPE(2, P, d)), *ks = tensor_zeros(SHAPE(2, P, d));
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < P; m++) {
            memcpy(&AT3(qs, s, m, 0), q->data, (size_t)d * sizeof(float));
            memcpy(&AT3(ks, s, m, 0), k->data, (size_t)d * sizeof(float));
        }
    Tensor *q0 = tensor_slice(qs, 0, 0, 1), *q1 = tensor_slice(qs, 0, 1, 1);
    Tensor *k0 = tensor_slice(ks, 0, 0, 1), *k1 = tensor_slice(ks, 0, 1, 1);
    rope_rotate(q0, 0, false);
    rope_rotate(k0, 0, false);
    rope_rotate(q1, S, false);
    rope_rotate(k1, S, false);
    Tensor *scores0 = matmul_bt(q0, k0), *scores1 = matmul_bt(q1, k1);   /* (1, P, P) */

    /* every pair against the pair of the same distance that starts at 0 */
    RopeRelativeCheck c = {0.0, INFINITY, -INFINITY, 0.0};
    for (int s = 0; s < 2; s++) {
        const Tensor *scores = s == 0 ? scores0 : scores1;
        for (int m = 0; m < P; m++)
            for (int n = 0; n < P; n++) {
                const float score = AT3(scores, 0, m, n);
                const float reference = m >= n ? AT3(scores0, 0, m - n, 0)
                                               : AT3(scores0, 0, 0, n - m);
                c.worst = fmax(c.worst, fabs((double)score - reference));
                c.lowest = fmin(c.lowest, score);
                c.highest = fmax(c.highest, score);
                c.largest = fmax(c.largest, fabs(score));
            }
    }
    TENSOR_FREE(qs, ks, q0, q1, k0, k1, scores0, scores1);
    return c;
}
