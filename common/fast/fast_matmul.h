/*
 * fast_matmul.h - the fast matrix product beside the clear one in ops.h
 * (the speed section of chapter 05; its attention kernel is explained in
 * 03_self_attention/README.md).
 *
 * Legend: m, k, n are matrix sizes, A (m, k), B (k, n), C (m, n).
 *
 * The clear matmul_raw streams the whole of B through the cache for every
 * row of A and keeps nothing in registers. This one computes C in tiles of
 * FAST_MR x FAST_NR that stay in vector registers while a whole run of k
 * products is added into them, so each value loaded from memory is used
 * FAST_MR or FAST_NR times:
 *
 *   - B is copied into "panels" of FAST_NR columns, stored row after row
 *     (FAST_NR consecutive floats = two vectors per row of a panel), a
 *     chunk at a time by each thread that needs it;
 *   - the k dimension is cut into chunks of FAST_KC, so the part of a panel
 *     in use stays in the fast caches while many tiles of A sweep over it;
 *   - the rows of C are shared out between threads (fast_threads.h), each
 *     working on its own rows, so no two threads ever write the same float
 *     (blocks of rows taken in turn when each thread holds all of B packed,
 *     fixed bands otherwise).
 *
 * The tile follows the vector registers the fast files are compiled for
 * (the Makefile picks the widest the machine has):
 *   AVX2:    16 registers of  8 floats, tile  6 x 16 in 12 of them;
 *   AVX-512: 32 registers of 16 floats, tile 12 x 32 in 24 of them;
 *   aarch64: 32 NEON registers of 4 floats. The same code as for AVX2: a
 *            vector of 8 floats is a pair of NEON registers (GCC and
 *            Clang split it, c += a * b becomes two fmla), so the 6 x 16
 *            tile takes 24 of them, its B row 4 and the broadcast 1.
 *            Checked equal to the clear code under qemu-aarch64 (make
 *            portability); its speed was never measured here.
 * Only the fast files, all built with the same flags, use these constants;
 * other code asks fast_panels_size() and fast_vector_width().
 *
 * Results equal the clear version up to rounding: the sums are taken in a
 * different order and with fused multiply-add, so expect differences of a
 * few ulp times sqrt(k), not bit-equality (tests/test_fast.c checks this).
 */
#ifndef FAST_MATMUL_H
#define FAST_MATMUL_H

#include <stdbool.h>
#include <stddef.h>

#include "fast/fast_threads.h"
#include "tensor.h"

#if defined(__AVX512F__)
enum { FAST_VEC = 16, FAST_MR = 12 };   /* floats per vector, rows of a tile */
#else
enum { FAST_VEC = 8, FAST_MR = 6 };     /* AVX2, aarch64's NEON, or scalar code */
#endif
enum {
    FAST_NR = 2 * FAST_VEC,   /* columns of a tile = width of a B panel */
    FAST_KC = 512,            /* k products added into a tile before it is stored */
};

/* ---- whole products --------------------------------------------------- */
/* The general form: every matrix is a view with its own row stride (lda,
 * ldb, ldc, in floats), so a head's columns inside a wider matrix can be
 * used in place. a_transposed: A is given as (k, m) rows, and the tile
 * kernel reads them as its columns without a copy of A^T (fast_block_at):
 * the weight gradient of a linear layer, dW (out, in) += dY^T X, whose
 * rows of dY (rows, out) and X (rows, in) are the summed dimension.
 * b_transposed: B is given as (n, k) rows (a weight in PyTorch's (out, in)
 * layout). accumulate: C += A @ B instead of C = A @ B. */
void fast_gemm(int m, int n, int k, const float *a, size_t lda, bool a_transposed,
               const float *b, size_t ldb, bool b_transposed,
               float *c, size_t ldc, bool accumulate, int num_threads);

/* Tensor forms with the same shapes and checks as matmul, matmul_bt and
 * linear in ops.h, computed with num_threads threads. */
Tensor *fast_matmul(const Tensor *a, const Tensor *b, int num_threads);
Tensor *fast_matmul_bt(const Tensor *a, const Tensor *b, int num_threads);
Tensor *fast_linear(const Tensor *x, const Tensor *weight, const Tensor *bias,
                    int num_threads);
/* fast_linear into y, a tensor of the output's shape whose every element
 * is overwritten: for memory that is already the caller's. */
void fast_linear_into(const Tensor *x, const Tensor *weight, const Tensor *bias, Tensor *y,
                      int num_threads);
/* linear_backward of ops.h, fast: grad_x (..., in) returned (new);
 * grad_weight (out, in) += grad_y^T x and grad_bias (out,) += the sum of
 * grad_y's rows, each skipped when NULL. */
Tensor *fast_linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                             Tensor *grad_weight, Tensor *grad_bias, int num_threads);
/* The same on raw rows: x (rows, in), weight (out, in), grad_y (rows, out)
 * -> grad_x (rows, in) written, grad_weight and grad_bias added into; any
 * of the three may be NULL (not wanted). */
void fast_linear_backward_raw(int rows, int in, int out, const float *x, const float *weight,
                              const float *grad_y, float *grad_x, float *grad_weight,
                              float *grad_bias, int num_threads);

/* ---- products run again and again on one thread -------------------------
 * fast_gemm makes its copies of B (and of A, when A is given transposed)
 * at every call. A caller that runs many products on one thread (a share
 * of a training step, 06_permutation_invariance/language_step.h) makes
 * that memory once and hands it to the two below, which then allocate
 * nothing. The same tiles in the same order as fast_linear_into and
 * fast_linear_backward_raw on one thread: the same bits. */
typedef struct {
    float *b_copy;   /* one chunk of B as panels, (FAST_KC, FAST_NC) */
    float *a_copy;   /* A^T's strips, (FAST_MC, FAST_KC) */
} FastGemmScratch;
void fast_gemm_scratch_alloc(FastGemmScratch *scratch);
void fast_gemm_scratch_free(FastGemmScratch *scratch);
/* y (rows, out) = x (rows, in) W^T + bias (NULL: none), W (out, in) */
void fast_linear_scratch(int rows, int in, int out, const float *x, const float *weight,
                         const float *bias, float *y, FastGemmScratch *scratch);
/* fast_linear_backward_raw's three, on one thread with scratch */
void fast_linear_backward_scratch(int rows, int in, int out, const float *x,
                                  const float *weight, const float *grad_y, float *grad_x,
                                  float *grad_weight, float *grad_bias, FastGemmScratch *scratch);
/* Its weight gradient alone, grad_weight (out, in) += grad_y^T x, with x
 * (rows, in) given as panels (fast_pack_panels(x, in, false, rows, in,
 * x_panels)): for an input that several layers read (Q, K and V read the
 * same ln_1(x)), packed once. The same bits. */
void fast_weight_grad_packed(int rows, int in, int out, const float *x_panels,
                             const float *grad_y, float *grad_weight, FastGemmScratch *scratch);

/* ---- the pieces, for kernels that build their own loops ---------------- */
/* Floats per vector in the fast files: 16 with AVX-512, else 8. */
int fast_vector_width(void);
/* Floats needed for B (k, n) as panels: ceil(n / FAST_NR) * k * FAST_NR. */
size_t fast_panels_size(int k, int n);
/* count floats aligned to 64 bytes (one cache line), for panels and other
 * scratch that vector code reads; free with fast_free_panels (NULL is
 * fine). Stops (die) when
 * memory runs out. From 4 MB up, the memory is aligned to
 * 2 MB and asks the system for 2 MB pages (platform_advise_huge_pages), which turns 512 page
 * faults into one (fast_matmul.c says why that matters). */
float *fast_alloc_panels(size_t count);
void fast_free_panels(float *panels);
/* tensor_zeros with the memory of fast_alloc_panels, for the large
 * tensors the fast path makes; tensor_free frees it as any other. */
Tensor *fast_tensor_zeros(int ndim, const int *shape);
/* The same memory left as it comes (torch.empty): for a tensor whose every
 * element is written next, where zeroing would only cost time. */
Tensor *fast_tensor_empty(int ndim, const int *shape);
/* Copy B (k, n) - or, with transposed, B given as (n, k) rows - into
 * panels: panel j holds columns j*NR .. j*NR + NR-1 (NR = FAST_NR), row p
 * of it at panels + (j * k + p) * NR; columns past n are zero. */
void fast_pack_panels(const float *b, size_t ldb, bool transposed, int k, int n,
                      float *panels);
/* fast_gemm with B already packed by fast_pack_panels (k rows, n columns):
 * for a B used many times, such as a weight. bias (n,) or NULL: when given,
 * every row of C starts from it, C = bias + A @ B, and C's own values are
 * not read (accumulate or not); the tile adds it before its first store. */
void fast_gemm_packed(int m, int n, int k, const float *a, size_t lda, const float *panels,
                      const float *bias, float *c, size_t ldc, bool accumulate,
                      int num_threads);
/* C (rows, cols) = or += A (rows, kc) @ B (kc, cols), where A's rows are at
 * stride lda and B is given as panels: panel j starts at
 * b_panels + j * panel_stride and holds FAST_NR floats per row of B. This
 * is the register-tile loop itself, single-threaded. */
void fast_block(int rows, int cols, int kc, const float *a, size_t lda,
                const float *b_panels, size_t panel_stride,
                float *c, size_t ldc, bool accumulate);

/* fast_block with A given transposed: A^T (kc, rows) at row stride lda_t,
 * for products such as dQ = dS K where dS^T is what is at hand. */
void fast_block_at(int rows, int cols, int kc, const float *a_t, size_t lda_t,
                   const float *b_panels, size_t panel_stride,
                   float *c, size_t ldc, bool accumulate);

/* ---- the machine's limit ------------------------------------------------ */
/* Run independent fused multiply-adds on vectors of fast_vector_width()
 * floats, on num_threads threads, for about `seconds` and return the
 * GFLOP/s reached (2 FLOPs per lane per multiply-add): the fp32 peak of the
 * instructions the kernels use, which the benchmark compares against. */
double fast_peak_gflops(int num_threads, double seconds);

#endif
