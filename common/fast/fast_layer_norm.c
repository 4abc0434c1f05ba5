/*
 * fast_layer_norm.c - layer normalisation, FAST_VEC rows at a time in
 * vector lanes. See fast_layer_norm.h.
 *
 * Legend: R = rows, D = num_hiddens, g = a row of the group (a lane),
 * j = a column.
 */
#include "fast/fast_layer_norm.h"

#include <math.h>
#include <stddef.h>

#include "fast/fast_vector.h"

/* ---- a square of rows turned into columns ------------------------------------------ */

/* r[i] = row i of a square (FAST_VEC rows of FAST_VEC floats) -> r[k] =
 * column k: lane i of r[k] is row i's float k. Each round pairs vectors
 * and interleaves them, first float by float, then two at a time, four,
 * eight: after the last, every vector holds one column. */
#if defined(__AVX512F__)   /* FAST_VEC 16: fast_matmul.h */
static inline void transpose_square(vf r[16])
{
    vf t[16], u[16], v[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {   /* rows i and i + 1, float by float */
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25,
                                       12, 28, 13, 29);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26,
                                           11, 27, 14, 30, 15, 31);
    }
    /* u[4b + e], 4 floats q: column 4q + e of rows 4b .. 4b + 3 */
#pragma GCC unroll 4
    for (int b = 0; b < 16; b += 4)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            u[b + 2 * h] = __builtin_shufflevector(t[b + h], t[b + 2 + h], 0, 1, 16, 17, 4, 5,
                                                   20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            u[b + 2 * h + 1] = __builtin_shufflevector(t[b + h], t[b + 2 + h], 2, 3, 18, 19, 6,
                                                       7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
        }
    /* v[8B + 2e + s], 8 floats each half: columns e + 4s and 8 + e + 4s
     * of rows 8B .. 8B + 7 */
#pragma GCC unroll 2
    for (int B = 0; B < 2; B++)
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++) {
            const vf a = u[8 * B + e], c = u[8 * B + 4 + e];
            v[8 * B + 2 * e] = __builtin_shufflevector(a, c, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9,
                                                       10, 11, 24, 25, 26, 27);
            v[8 * B + 2 * e + 1] = __builtin_shufflevector(a, c, 4, 5, 6, 7, 20, 21, 22, 23, 12,
                                                           13, 14, 15, 28, 29, 30, 31);
        }
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++)
#pragma GCC unroll 2
        for (int s = 0; s < 2; s++) {
            const vf a = v[2 * e + s], c = v[8 + 2 * e + s];
            r[e + 4 * s] = __builtin_shufflevector(a, c, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19,
                                                   20, 21, 22, 23);
            r[8 + e + 4 * s] = __builtin_shufflevector(a, c, 8, 9, 10, 11, 12, 13, 14, 15, 24,
                                                       25, 26, 27, 28, 29, 30, 31);
        }
}
#else   /* FAST_VEC 8 */
static inline void transpose_square(vf r[8])
{
    transpose_8x8(r);
}
#endif

/* A square that sticks out of the rows (count < FAST_VEC real rows, or
 * width < FAST_VEC columns left): copied into a square of zeros first, so
 * that no float past a row's end, or past the last row, is read. */
static void load_partial_square(const float *rows, int D, int count, int j0, int width,
                                vf c[FAST_VEC])
{
    float square[FAST_VEC][FAST_VEC] = {{0}};
    for (int g = 0; g < count; g++)
        memcpy(square[g], rows + (size_t)g * D + j0, (size_t)width * sizeof(float));
    for (int g = 0; g < FAST_VEC; g++)
        c[g] = load_vec(square[g]);
}

/* c[k] = column j0 + k of the group's rows (rows at stride D, count of
 * them real: the lanes past count are 0), for k < width <= FAST_VEC */
static inline void columns(const float *rows, int D, int count, int j0, int width, vf c[FAST_VEC])
{
    if (count == FAST_VEC && width == FAST_VEC) {
#pragma GCC unroll 16
        for (int g = 0; g < FAST_VEC; g++)
            c[g] = load_vec(rows + (size_t)g * D + j0);
    } else {
        load_partial_square(rows, D, count, j0, width, c);
    }
    transpose_square(c);
}

/* ---- forward ------------------------------------------------------------------------ */

/* lane g: the sum over j of row g's x[j] (sum) or (x[j] - m[g])^2
 * (centred), in the order of j */
static vf row_sums(const float *x, int D, int count, vf m, bool centred)
{
    vf sum = (vf){0}, c[FAST_VEC];
    for (int j0 = 0; j0 < D; j0 += FAST_VEC) {
        const int width = D - j0 < FAST_VEC ? D - j0 : FAST_VEC;
        columns(x, D, count, j0, width, c);
        for (int k = 0; k < width; k++) {
            if (centred) {
                const vf d = c[k] - m;
                sum += d * d;
            } else {
                sum += c[k];
            }
        }
    }
    return sum;
}

/* row x (D,) -> y (D,) = (x - m) * s * weight + bias */
static void normalise_row(const float *x, float m, float s, const float *weight,
                          const float *bias, float *y, int D)
{
    int j = 0;
    for (; j + FAST_VEC <= D; j += FAST_VEC)
        store_vec(y + j, (load_vec(x + j) - m) * s * load_vec(weight + j) + load_vec(bias + j));
    for (; j < D; j++)
        y[j] = (x[j] - m) * s * weight[j] + bias[j];
}

void fast_layer_norm_forward(const float *x, const float *weight, const float *bias, float eps,
                             float *y, float *mean, float *rstd, int rows, int D)
{
    for (int r0 = 0; r0 < rows; r0 += FAST_VEC) {
        const int count = rows - r0 < FAST_VEC ? rows - r0 : FAST_VEC;
        const float *xs = x + (size_t)r0 * D;
        const vf m = row_sums(xs, D, count, (vf){0}, false) / (float)D;
        const vf square_sum = row_sums(xs, D, count, m, true);
        vf s;
        for (int g = 0; g < FAST_VEC; g++)
            s[g] = 1.0f / sqrtf(square_sum[g] / (float)D + eps);
        for (int g = 0; g < count; g++) {
            normalise_row(xs + (size_t)g * D, m[g], s[g], weight, bias, y + (size_t)(r0 + g) * D,
                          D);
            mean[r0 + g] = m[g];
            rstd[r0 + g] = s[g];
        }
    }
}

/* ---- backward ----------------------------------------------------------------------- */

/* lane g: the sums over j of row g's dy[j] weight[j] (*g_sum) and of
 * that times xhat[j] (*g_xhat_sum), in the order of j */
static void gradient_sums(const float *dys, const float *xs, const float *weight, int D,
                          int count, vf m, vf s, vf *g_sum, vf *g_xhat_sum)
{
    vf sum = (vf){0}, xhat_sum = (vf){0}, dy[FAST_VEC], xc[FAST_VEC];
    for (int j0 = 0; j0 < D; j0 += FAST_VEC) {
        const int width = D - j0 < FAST_VEC ? D - j0 : FAST_VEC;
        columns(dys, D, count, j0, width, dy);
        columns(xs, D, count, j0, width, xc);
        for (int k = 0; k < width; k++) {
            const vf xhat = (xc[k] - m) * s;
            const vf g = dy[k] * weight[j0 + k];
            sum += g;
            xhat_sum += g * xhat;
        }
    }
    *g_sum = sum;
    *g_xhat_sum = xhat_sum;
}

/* one row: grad_weight += dy xhat, grad_bias += dy, and grad_x += its
 * part (layer_norm_backward's second loop), gm and gxm its two means */
static void backward_row(const float *dy, const float *x, const float *weight, float m, float s,
                         float gm, float gxm, float *dx, float *grad_weight, float *grad_bias,
                         int D)
{
    int j = 0;
    for (; j + FAST_VEC <= D; j += FAST_VEC) {
        const vf dyj = load_vec(dy + j), xhat = (load_vec(x + j) - m) * s;
        store_vec(grad_weight + j, load_vec(grad_weight + j) + dyj * xhat);
        store_vec(grad_bias + j, load_vec(grad_bias + j) + dyj);
        store_vec(dx + j, load_vec(dx + j) + s * (dyj * load_vec(weight + j) - gm - xhat * gxm));
    }
    for (; j < D; j++) {
        const float xhat = (x[j] - m) * s;
        grad_weight[j] += dy[j] * xhat;
        grad_bias[j] += dy[j];
        dx[j] += s * (dy[j] * weight[j] - gm - xhat * gxm);
    }
}

void fast_layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                              const float *mean, const float *rstd, float *grad_x,
                              float *grad_weight, float *grad_bias, int rows, int D)
{
    for (int r0 = 0; r0 < rows; r0 += FAST_VEC) {
        const int count = rows - r0 < FAST_VEC ? rows - r0 : FAST_VEC;
        const size_t at = (size_t)r0 * D;
        vf m = (vf){0}, s = (vf){0}, g_sum, g_xhat_sum;
        for (int g = 0; g < count; g++) {
            m[g] = mean[r0 + g];
            s[g] = rstd[r0 + g];
        }
        gradient_sums(grad_y + at, x + at, weight, D, count, m, s, &g_sum, &g_xhat_sum);
        const vf gm = g_sum / (float)D, gxm = g_xhat_sum / (float)D;
        for (int g = 0; g < count; g++)   /* the rows in order: the parameters' sums */
            backward_row(grad_y + at + (size_t)g * D, x + at + (size_t)g * D, weight, m[g], s[g],
                         gm[g], gxm[g], grad_x + at + (size_t)g * D, grad_weight, grad_bias, D);
    }
}
