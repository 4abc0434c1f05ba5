/*
 * fast_matmul.c - the cache-blocked matrix product with register tiles.
 * See fast_matmul.h for the layout of the panels.
 *
 * Legend: m, k, n are matrix sizes, A (m, k), B (k, n), C (m, n);
 * MR x NR = FAST_MR x FAST_NR is one register tile of C, VEC = FAST_VEC
 * floats one vector.
 *
 * Why these tiles: with AVX2 a core has 16 vector registers of 8 floats. A
 * 6 x 16 tile of C is 12 of them; two more hold the current row of the B
 * panel (16 floats) and one holds a broadcast value of A. Each step p then
 * does 12 fused multiply-adds for 2 loads of B and 6 broadcasts of A,
 * enough work per load to keep both of the core's FMA units busy. AVX-512
 * doubles the width and the number of registers: a 12 x 32 tile in 24 of
 * the 32, 24 multiply-adds of 16 floats per step.
 *
 * The code uses GCC/Clang vector extensions (a type "VEC floats" with + and
 * * acting lane by lane, a scalar operand standing for VEC copies of
 * itself), and compiles with -ffp-contract=fast (see the Makefile) so that
 * c += a * b becomes one fused multiply-add instruction.
 */
#define _POSIX_C_SOURCE 200809L
#include "fast/fast_matmul.h"
#include "fast/fast_internal.h"
#include "platform.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fast/fast_vector.h"
#include "ops.h"

int fast_vector_width(void)
{
    return FAST_VEC;
}

/* ---- packing B into panels ---------------------------------------------- */

size_t fast_panels_size(int k, int n)
{
    size_t num_panels = ((size_t)n + FAST_NR - 1) / FAST_NR;
    return num_panels * (size_t)k * FAST_NR;
}

/* Memory for count floats, aligned to 64 bytes (one cache line), or to
 * 2 MB with a request for 2 MB pages when it is large; NULL when there is
 * none. Why large pages: the first write to each page of fresh memory
 * costs a trip into the kernel (a page fault), and with 4 KB pages an
 * 8 MB tensor takes 2048 of them, which on some machines (virtual ones
 * above all) costs as much as the arithmetic done on it. With 2 MB pages
 * it takes 4. */
static float *aligned_floats(size_t count)
{
    memory_counted();
    enum { HUGE_PAGE = 2 << 20, LARGE = 4 << 20 };
    size_t bytes = (count ? count : 1) * sizeof(float);
    if (bytes / sizeof(float) != (count ? count : 1))
        return NULL;
    /* aligned_alloc wants a size that is a multiple of the alignment */
    size_t align = bytes >= LARGE ? HUGE_PAGE : 64;
    if (bytes > SIZE_MAX - align)
        return NULL;
    bytes = (bytes + align - 1) / align * align;
    float *p = aligned_alloc(align, bytes);
    if (p != NULL && align == HUGE_PAGE)
        platform_advise_huge_pages(p, bytes);
    return p;
}

float *fast_alloc_panels(size_t count)
{
    /* 64-byte alignment: a row of a panel (16 or 32 floats) then starts a
     * cache line, and no vector load straddles two lines (a straddling load
     * costs two). */
    float *panels = aligned_floats(count);
    if (panels == NULL)
        die("out of memory allocating %zu floats (%.1f MB)", count,
            (double)count * sizeof(float) / 1e6);
    return panels;
}

void fast_free_panels(float *panels)
{
    free(panels);
}

Tensor *fast_tensor_zeros(int ndim, const int *shape)
{
    /* freed by tensor_free's free() like any other */
    return tensor_alloc_with(ndim, shape, aligned_floats, true);
}

Tensor *fast_tensor_empty(int ndim, const int *shape)
{
    return tensor_alloc_with(ndim, shape, aligned_floats, false);
}

/* B (k, n) -> panels [j][p][16]: rows of B are contiguous, so each is
 * read whole (one stream for the hardware prefetcher) and cut into NR
 * floats per panel */
static void pack_rows(const float *b, size_t ldb, int k, int n, float *panels)
{
    const int num_panels = (n + FAST_NR - 1) / FAST_NR;
    for (int p = 0; p < k; p++)
        for (int j = 0; j < num_panels; j++) {
            float *dst = panels + ((size_t)j * k + p) * FAST_NR;
            const float *src = b + (size_t)p * ldb + j * FAST_NR;
            const int width = n - j * FAST_NR < FAST_NR ? n - j * FAST_NR : FAST_NR;
            if (width == FAST_NR) {
                /* a copy of known size: vector moves, not a call */
                memcpy(dst, src, FAST_NR * sizeof(float));
                continue;
            }
            memcpy(dst, src, (size_t)width * sizeof(float));
            for (int c = width; c < FAST_NR; c++)
                dst[c] = 0.0f;   /* the padding columns give 0, never garbage */
        }
}

/* B (k, n), or B given as (n, k) rows when transposed -> panels [j][p][16] */
void fast_pack_panels(const float *b, size_t ldb, bool transposed, int k, int n,
                      float *panels)
{
    if (!transposed) {
        pack_rows(b, ldb, k, n, panels);
        return;
    }
    const int num_panels = (n + FAST_NR - 1) / FAST_NR;
    for (int j = 0; j < num_panels; j++) {
        float *panel = panels + (size_t)j * k * FAST_NR;
        int col0 = j * FAST_NR;
        int width = n - col0 < FAST_NR ? n - col0 : FAST_NR;
        /* B^T given: column c of the panel is row col0 + c of the input,
         * copied in squares of 8 x 8 transposed in registers; the squares
         * that stick out (the last few rows, or k not a multiple of 8) go
         * one float at a time, and squares wholly past n are zeros */
        for (int c0 = 0; c0 < FAST_NR; c0 += 8)
            for (int p0 = 0; p0 < k; p0 += 8) {
                float *dst = panel + (size_t)p0 * FAST_NR + c0;
                if (c0 >= width) {
                    for (int p = p0; p < p0 + 8 && p < k; p++)
                        memset(dst + (size_t)(p - p0) * FAST_NR, 0, 8 * sizeof(float));
                    continue;
                }
                if (c0 + 8 <= width && p0 + 8 <= k) {
                    const float *src = b + (size_t)(col0 + c0) * ldb + p0;
                    v8f r[8];
#pragma GCC unroll 8
                    for (int i = 0; i < 8; i++)
                        memcpy(&r[i], src + (size_t)i * ldb, sizeof r[i]);
                    transpose_8x8(r);
#pragma GCC unroll 8
                    for (int i = 0; i < 8; i++)
                        memcpy(dst + (size_t)i * FAST_NR, &r[i], sizeof r[i]);
                    continue;
                }
                const int valid = width - c0 < 8 ? width - c0 : 8;
                for (int p = p0; p < p0 + 8 && p < k; p++) {
                    float *row = dst + (size_t)(p - p0) * FAST_NR;
                    memset(row, 0, 8 * sizeof(float));
                    for (int c = 0; c < valid; c++)
                        row[c] = b[(size_t)(col0 + c0 + c) * ldb + p];
                }
            }
    }
}

/* ---- the register tile ----------------------------------------------------- */

/* Ask for the tile of C (MR rows of NR floats at stride ldc) to be brought
 * into the cache, for writing, while the k loop runs: C is touched once per
 * tile, after kc steps, and without this the stores (and the loads when
 * accumulating) wait on a cache miss at the end of every tile. */
static inline void prefetch_tile(const float *c, size_t ldc)
{
#pragma GCC unroll 16
    for (int r = 0; r < FAST_MR; r++) {
        __builtin_prefetch(c + (size_t)r * ldc, 1);
        __builtin_prefetch(c + (size_t)r * ldc + FAST_NR - 1, 1);
    }
}

/* tile (MR, NR) = A (MR, kc) at row stride lda @ panel (kc, NR), added to
 * C's own values (accumulate) or to bias (NR,) in every row (bias not
 * NULL), or to nothing. The accumulators are small arrays indexed only by
 * constants once the loops over r are unrolled (the pragmas), so the
 * compiler keeps every one of them in a register.
 * Row r is read as rows[r / 4][(r % 4) * lda + p]: from a pointer to every
 * fourth row, at offsets 0, 1, 2 or 3 times lda, which an x86 address
 * holds as (pointer + index * 4, 8 or 12 bytes). That takes three pointers
 * and three offsets, where a pointer for each of the 12 rows did not fit
 * in the 16 general registers: the compiler moved one in and out of a
 * vector register at every step, and the tile ran about 5% slower. */
static inline void kernel_tile(int kc, const float *a, size_t lda, const float *panel,
                               float *c, size_t ldc, bool accumulate, const float *bias)
{
    enum { GROUPS = (FAST_MR + 3) / 4 };
    const float *rows[GROUPS];
#pragma GCC unroll 4
    for (int g = 0; g < GROUPS; g++)
        rows[g] = a + (size_t)(4 * g) * lda;
    vf lo[FAST_MR], hi[FAST_MR];   /* columns 0 .. VEC-1 and VEC .. NR-1 */
    prefetch_tile(c, ldc);
#pragma GCC unroll 16
    for (int r = 0; r < FAST_MR; r++)
        lo[r] = hi[r] = (vf){0};
    for (int p = 0; p < kc; p++) {
        const vf b_lo = load_vec(panel + (size_t)p * FAST_NR);
        const vf b_hi = load_vec(panel + (size_t)p * FAST_NR + FAST_VEC);
#pragma GCC unroll 16
        for (int r = 0; r < FAST_MR; r++) {
            /* a scalar times a vector: the scalar is broadcast to all lanes */
            const float x = rows[r / 4][(size_t)(r % 4) * lda + p];
            lo[r] += x * b_lo;
            hi[r] += x * b_hi;
        }
    }
    /* the bias added here, not copied into C first: the same sum (one
     * addition, bias + tile), and C is written once instead of three times */
    const vf bias_lo = bias != NULL ? load_vec(bias) : (vf){0};
    const vf bias_hi = bias != NULL ? load_vec(bias + FAST_VEC) : (vf){0};
#pragma GCC unroll 16
    for (int r = 0; r < FAST_MR; r++) {
        float *c_row = c + (size_t)r * ldc;
        if (bias != NULL) {
            lo[r] += bias_lo;
            hi[r] += bias_hi;
        } else if (accumulate) {
            lo[r] += load_vec(c_row);
            hi[r] += load_vec(c_row + FAST_VEC);
        }
        store_vec(c_row, lo[r]);
        store_vec(c_row + FAST_VEC, hi[r]);
    }
}

/* The part of a scratch tile (MR, NR) that lies inside C, (tile_rows,
 * tile_cols), stored into C at row stride ldc, added to C's own values
 * (accumulate) or to bias (tile_cols,) in every row. */
static void store_edge_tile(const float *tile, int tile_rows, int tile_cols, float *c,
                            size_t ldc, bool accumulate, const float *bias)
{
    for (int r = 0; r < tile_rows; r++) {
        float *dst = c + (size_t)r * ldc;
        const float *src = tile + r * FAST_NR;
        if (bias != NULL)
            for (int col = 0; col < tile_cols; col++)
                dst[col] = bias[col] + src[col];
        else if (accumulate)
            for (int col = 0; col < tile_cols; col++)
                dst[col] += src[col];
        else
            memcpy(dst, src, (size_t)tile_cols * sizeof(float));
    }
}

/* A short group of rows (rows < MR) copied into MR rows of kc floats, the
 * missing ones 0: the kernel always computes MR rows, and reading past the
 * last row could leave the matrix. The extra rows are never stored. */
static void pad_rows(const float *a, size_t lda, int rows, int kc, float *padded)
{
    for (int r = 0; r < FAST_MR; r++) {
        float *dst = padded + (size_t)r * kc;
        if (r < rows)
            memcpy(dst, a + (size_t)r * lda, (size_t)kc * sizeof(float));
        else
            memset(dst, 0, (size_t)kc * sizeof(float));
    }
}

/* fast_block, each tile also added to bias (cols,) in every row when bias
 * is not NULL (then C's own values are not read) */
static void block_rows(int rows, int cols, int kc, const float *a, size_t lda,
                       const float *b_panels, size_t panel_stride, float *c, size_t ldc,
                       bool accumulate, const float *bias)
{
    float pad[FAST_MR * FAST_KC];   /* a short last group, when kc fits */
    float *padded = NULL;
    for (int i0 = 0; i0 < rows; i0 += FAST_MR) {
        const int tile_rows = rows - i0 < FAST_MR ? rows - i0 : FAST_MR;
        const float *a_tile = a + (size_t)i0 * lda;
        size_t a_stride = lda;
        if (tile_rows < FAST_MR) {
            padded = kc <= FAST_KC ? pad : fast_alloc_panels((size_t)FAST_MR * kc);
            pad_rows(a_tile, lda, tile_rows, kc, padded);
            a_tile = padded;
            a_stride = (size_t)kc;
        }
        for (int j0 = 0; j0 < cols; j0 += FAST_NR) {
            const float *panel = b_panels + (size_t)(j0 / FAST_NR) * panel_stride;
            float *c_tile = c + (size_t)i0 * ldc + j0;
            int tile_cols = cols - j0 < FAST_NR ? cols - j0 : FAST_NR;
            const float *tile_bias = bias != NULL ? bias + j0 : NULL;
            if (tile_rows == FAST_MR && tile_cols == FAST_NR) {
                kernel_tile(kc, a_tile, a_stride, panel, c_tile, ldc, accumulate, tile_bias);
            } else {
                /* an edge tile: compute all of it into a scratch tile and
                 * copy out only the part that lies inside C */
                float tile[FAST_MR * FAST_NR];
                kernel_tile(kc, a_tile, a_stride, panel, tile, FAST_NR, false, NULL);
                store_edge_tile(tile, tile_rows, tile_cols, c_tile, ldc, accumulate, tile_bias);
            }
        }
    }
    if (padded != pad)
        fast_free_panels(padded);
}

void fast_block(int rows, int cols, int kc, const float *a, size_t lda,
                const float *b_panels, size_t panel_stride,
                float *c, size_t ldc, bool accumulate)
{
    block_rows(rows, cols, kc, a, lda, b_panels, panel_stride, c, ldc, accumulate, NULL);
}

/* The same tile with A given transposed: A^T (kc, MR) rows at stride
 * lda_t, so the MR values that step p broadcasts are contiguous,
 * a_t[p * lda_t + r]. No copy of A^T into rows is needed. */
static inline void kernel_tile_at(int kc, const float *a_t, size_t lda_t, const float *panel,
                                  float *c, size_t ldc, bool accumulate)
{
    vf lo[FAST_MR], hi[FAST_MR];
    prefetch_tile(c, ldc);
#pragma GCC unroll 16
    for (int r = 0; r < FAST_MR; r++)
        lo[r] = hi[r] = (vf){0};
    for (int p = 0; p < kc; p++) {
        const vf b_lo = load_vec(panel + (size_t)p * FAST_NR);
        const vf b_hi = load_vec(panel + (size_t)p * FAST_NR + FAST_VEC);
        const float *a_p = a_t + (size_t)p * lda_t;
#pragma GCC unroll 16
        for (int r = 0; r < FAST_MR; r++) {
            lo[r] += a_p[r] * b_lo;
            hi[r] += a_p[r] * b_hi;
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < FAST_MR; r++) {
        float *c_row = c + (size_t)r * ldc;
        if (accumulate) {
            lo[r] += load_vec(c_row);
            hi[r] += load_vec(c_row + FAST_VEC);
        }
        store_vec(c_row, lo[r]);
        store_vec(c_row + FAST_VEC, hi[r]);
    }
}

/* A^T (kc, rows) at stride lda_t -> strips: strip s holds columns
 * s*MR .. s*MR + MR-1 of A^T (rows of A), step p of it at
 * strips + (s * kc + p) * MR, zero past the last row. Read row after row
 * of A^T, whole, so the hardware prefetcher sees one stream. */
static void pack_strips(const float *a_t, size_t lda_t, int rows, int kc, float *strips)
{
    for (int p = 0; p < kc; p++) {
        const float *src = a_t + (size_t)p * lda_t;
        for (int i0 = 0; i0 < rows; i0 += FAST_MR) {
            float *dst = strips + ((size_t)i0 * kc + (size_t)p * FAST_MR);
            const int width = rows - i0 < FAST_MR ? rows - i0 : FAST_MR;
            if (width == FAST_MR) {
                memcpy(dst, src + i0, FAST_MR * sizeof(float));
                continue;
            }
            memcpy(dst, src + i0, (size_t)width * sizeof(float));
            for (int r = width; r < FAST_MR; r++)
                dst[r] = 0.0f;
        }
    }
}

/* One tile of C (tile_rows <= MR, tile_cols <= NR) from A^T (kc, MR) at
 * stride lda_t and a panel (kc, NR); the kernel computes a whole tile,
 * and an edge tile goes through scratch. */
static inline void tile_at(int kc, const float *a_t, size_t lda_t, const float *panel,
                           int tile_rows, int tile_cols, float *c, size_t ldc, bool accumulate)
{
    if (tile_rows == FAST_MR && tile_cols == FAST_NR) {
        kernel_tile_at(kc, a_t, lda_t, panel, c, ldc, accumulate);
        return;
    }
    float tile[FAST_MR * FAST_NR];
    kernel_tile_at(kc, a_t, lda_t, panel, tile, FAST_NR, false);
    store_edge_tile(tile, tile_rows, tile_cols, c, ldc, accumulate, NULL);
}

void fast_block_at(int rows, int cols, int kc, const float *a_t, size_t lda_t,
                   const float *b_panels, size_t panel_stride,
                   float *c, size_t ldc, bool accumulate)
{
    for (int i0 = 0; i0 < rows; i0 += FAST_MR) {
        const int tile_rows = rows - i0 < FAST_MR ? rows - i0 : FAST_MR;
        for (int p0 = 0; p0 < kc; p0 += FAST_KC) {
            const int chunk = kc - p0 < FAST_KC ? kc - p0 : FAST_KC;
            const bool acc = accumulate || p0 > 0;
            /* A short group of rows is copied, zero-padded to MR columns:
             * reading MR floats past the last row could leave the matrix. */
            float pad[FAST_KC * FAST_MR];
            const float *a = a_t + (size_t)p0 * lda_t + i0;
            size_t lda = lda_t;
            if (tile_rows < FAST_MR) {
                pack_strips(a, lda_t, tile_rows, chunk, pad);
                a = pad;
                lda = FAST_MR;
            }
            for (int j0 = 0; j0 < cols; j0 += FAST_NR) {
                const float *panel = b_panels + (size_t)(j0 / FAST_NR) * panel_stride +
                                     (size_t)p0 * FAST_NR;
                const int tile_cols = cols - j0 < FAST_NR ? cols - j0 : FAST_NR;
                tile_at(chunk, a, lda, panel, tile_rows, tile_cols, c + (size_t)i0 * ldc + j0,
                        ldc, acc);
            }
        }
    }
}

/* C (rows, cols) = or += A (rows, kc) @ B (kc, cols) with A as strips
 * (pack_strips) and B as panels: each panel, loaded once into L1, meets
 * every strip of A (from L2) before the next panel comes in, the loop
 * order of GotoBLAS. */
static void strips_times_panels(int rows, int cols, int kc, const float *strips,
                                const float *b_panels, size_t panel_stride, float *c, size_t ldc,
                                bool accumulate)
{
    for (int j0 = 0; j0 < cols; j0 += FAST_NR) {
        const float *panel = b_panels + (size_t)(j0 / FAST_NR) * panel_stride;
        const int tile_cols = cols - j0 < FAST_NR ? cols - j0 : FAST_NR;
        for (int i0 = 0; i0 < rows; i0 += FAST_MR) {
            const int tile_rows = rows - i0 < FAST_MR ? rows - i0 : FAST_MR;
            tile_at(kc, strips + (size_t)i0 * kc, FAST_MR, panel, tile_rows, tile_cols,
                    c + (size_t)i0 * ldc + j0, ldc, accumulate);
        }
    }
}

/* ---- the whole product ------------------------------------------------------ */

enum {
    FAST_NC = 512,             /* columns of C per chunk */
    FAST_MC = 16 * FAST_MR,    /* rows of A^T's strips packed at a time (a_transposed) */
    ROW_BLOCK = 8 * FAST_MR,   /* rows of C a thread takes at a time (row_blocks) */
};

typedef struct {
    int m, n, k;
    const float *a;
    size_t lda;
    bool a_transposed;      /* A given as (k, m) rows */
    const float *panels;    /* all of B, packed: panel j at j * k * FAST_NR; or NULL: */
    const float *b;         /* B itself, (k, n) rows or, with b_transposed, (n, k) */
    size_t ldb;
    bool b_transposed;
    float *c;
    size_t ldc;
    bool accumulate;
    const float *bias;      /* (n,) or NULL: C = bias + A @ B, each row from the bias
                             * (A not transposed) */
    int num_threads;
    bool split_columns;     /* threads share C's columns, not its rows */
    bool row_blocks;        /* threads take ROW_BLOCK rows at a time from next_block */
    atomic_int next_block;
    float **b_copies;       /* per thread: one chunk of B, (FAST_KC, FAST_NC) as panels */
    float **a_copies;       /* per thread, a_transposed: (FAST_MC, FAST_KC) of A as strips */
    FastGemmScratch *scratch;   /* or NULL: one thread, these copies made by the caller */
} Gemm;

/* Of count items in groups of size, thread t's share [*first, *last), in
 * whole groups; false when it is empty. */
static bool thread_share(int count, int size, int thread, int num_threads, int *first, int *last)
{
    int groups = (count + size - 1) / size;
    *first = (int)((long)groups * thread / num_threads) * size;
    *last = (int)((long)groups * (thread + 1) / num_threads) * size;
    if (*last > count)
        *last = count;
    return *first < *last;
}

/* Thread t takes a contiguous band of rows, a multiple of MR long (except
 * the last), or with split_columns a band of columns, whole panels, and
 * runs the k chunks over it. */
/* Thread t's part with row_blocks: all of B as panels (packed already, or
 * packed here once into its copy), then blocks of ROW_BLOCK rows taken in
 * turn from a shared counter until none are left, each run over every k
 * chunk in order. A thread the machine slows down (another program on its
 * core) takes fewer blocks, and the others do the rest. */
static void gemm_row_blocks(Gemm *g, int thread)
{
    const float *panels = g->panels;
    if (panels == NULL) {   /* B is one chunk (see gemm_threads) */
        fast_pack_panels(g->b, g->ldb, g->b_transposed, g->k, g->n, g->b_copies[thread]);
        panels = g->b_copies[thread];
    }
    const size_t panel_stride = (size_t)g->k * FAST_NR;
    for (int i0 = ROW_BLOCK * atomic_fetch_add(&g->next_block, 1); i0 < g->m;
         i0 = ROW_BLOCK * atomic_fetch_add(&g->next_block, 1)) {
        const int rows = g->m - i0 < ROW_BLOCK ? g->m - i0 : ROW_BLOCK;
        for (int p0 = 0; p0 < g->k; p0 += FAST_KC) {
            const int kc = g->k - p0 < FAST_KC ? g->k - p0 : FAST_KC;
            const bool acc = g->accumulate || p0 > 0;
            for (int j0 = 0; j0 < g->n; j0 += FAST_NC) {
                const int cols = g->n - j0 < FAST_NC ? g->n - j0 : FAST_NC;
                const float *bias = g->bias != NULL && p0 == 0 ? g->bias + j0 : NULL;
                block_rows(rows, cols, kc, g->a + (size_t)i0 * g->lda + p0, g->lda,
                           panels + ((size_t)(j0 / FAST_NR) * g->k + p0) * FAST_NR, panel_stride,
                           g->c + (size_t)i0 * g->ldc + j0, g->ldc, acc, bias);
            }
        }
    }
}

/* The panels of B's chunk of rows p0 .. p0 + kc - 1 and columns
 * j0 .. j0 + cols - 1, and their stride: packed once for all threads, or
 * packed now into the thread's own copy. */
static const float *chunk_panels(const Gemm *g, int thread, int p0, int kc, int j0, int cols,
                                 size_t *panel_stride)
{
    if (g->panels != NULL) {
        *panel_stride = (size_t)g->k * FAST_NR;
        return g->panels + ((size_t)(j0 / FAST_NR) * g->k + p0) * FAST_NR;
    }
    /* every thread packs the chunk it needs itself: a little work twice,
     * but no thread waits for another */
    const float *b = g->b_transposed ? g->b + (size_t)j0 * g->ldb + p0
                                     : g->b + (size_t)p0 * g->ldb + j0;
    fast_pack_panels(b, g->ldb, g->b_transposed, kc, cols, g->b_copies[thread]);
    *panel_stride = (size_t)kc * FAST_NR;
    return g->b_copies[thread];
}

static void gemm_band(void *arg, int thread)
{
    Gemm *g = arg;
    if (g->row_blocks) {
        gemm_row_blocks(g, thread);
        return;
    }
    int first = 0, last = g->m, col_first = 0, col_last = g->n;
    if (!(g->split_columns
              ? thread_share(g->n, FAST_NR, thread, g->num_threads, &col_first, &col_last)
              : thread_share(g->m, FAST_MR, thread, g->num_threads, &first, &last)))
        return;
    /* Loop order, outermost first: a chunk of k (FAST_KC), a chunk of
     * columns (FAST_NC), then fast_block, which takes MR rows of A at a
     * time and runs them across every panel of the chunk. The MR rows of A
     * (at most 12 x 256 floats, 12 KB) stay in L1 while the panels
     * (256 x 512 floats, 512 KB) stream from L2, where they stay for the
     * next MR rows. */
    for (int p0 = 0; p0 < g->k; p0 += FAST_KC) {
        int kc = g->k - p0 < FAST_KC ? g->k - p0 : FAST_KC;
        /* later chunks add to the first, the first to the bias */
        const bool acc = g->accumulate || p0 > 0;
        const float *bias = g->bias != NULL && p0 == 0 ? g->bias : NULL;
        for (int j0 = col_first; j0 < col_last; j0 += FAST_NC) {
            int cols = col_last - j0 < FAST_NC ? col_last - j0 : FAST_NC;
            size_t panel_stride;
            const float *panel = chunk_panels(g, thread, p0, kc, j0, cols, &panel_stride);
            if (!g->a_transposed) {
                block_rows(last - first, cols, kc, g->a + (size_t)first * g->lda + p0, g->lda,
                           panel, panel_stride, g->c + (size_t)first * g->ldc + j0, g->ldc, acc,
                           bias != NULL ? bias + j0 : NULL);
                continue;
            }
            /* A^T: a band of MC rows of A at a time, packed into strips */
            for (int i0 = first; i0 < last; i0 += FAST_MC) {
                const int rows = last - i0 < FAST_MC ? last - i0 : FAST_MC;
                pack_strips(g->a + (size_t)p0 * g->lda + i0, g->lda, rows, kc,
                            g->a_copies[thread]);
                strips_times_panels(rows, cols, kc, g->a_copies[thread], panel, panel_stride,
                                    g->c + (size_t)i0 * g->ldc + j0, g->ldc, acc);
            }
        }
    }
}

/* m, n, k > 0: share C between threads and run gemm_band. The
 * per-thread chunks of B are allocated here, by the calling thread (see
 * fast_multihead.c on why not in the workers). */
static void gemm_threads(Gemm *g, int num_threads)
{
    if (g->scratch != NULL)
        num_threads = 1;
    /* Threads that share C's rows each pack all of B; sharing its columns,
     * each packs its own part of B and reads all of A. The first suits a
     * tall C (a layer's m rows against a small weight), the second a
     * square one whose B is as large as A (a weight gradient, dY^T X,
     * summed over thousands of rows). Either way every element of C is
     * summed by one thread in the same order: the bits do not change. */
    g->split_columns = g->panels == NULL && g->n >= g->m;
    int groups = g->split_columns ? (g->n + FAST_NR - 1) / FAST_NR : (g->m + FAST_MR - 1) / FAST_MR;
    if (num_threads > groups)
        num_threads = groups;   /* no thread without a whole tile to do */
    const int T = g->num_threads = num_threads < 1 ? 1 : num_threads;
    /* Rows shared in blocks taken in turn rather than in fixed bands, when
     * each thread can hold all of B as panels at once: packed already, or
     * one chunk. A fixed band waits for its slowest thread; with blocks
     * the threads end within a block of each other. */
    g->row_blocks = T > 1 && !g->split_columns && !g->a_transposed &&
                    (g->panels != NULL || (g->k <= FAST_KC && g->n <= FAST_NC));
    atomic_init(&g->next_block, 0);
    /* a chunk of B is at most (FAST_KC, FAST_NC), and no larger than B */
    const size_t chunk = fast_panels_size(g->k < FAST_KC ? g->k : FAST_KC,
                                          g->n < FAST_NC ? g->n : FAST_NC);
    if (g->scratch != NULL) {   /* one thread, the caller's copies: nothing to allocate */
        g->b_copies = &g->scratch->b_copy;
        g->a_copies = &g->scratch->a_copy;
        gemm_band(g, 0);
        return;
    }
    g->b_copies = g->panels == NULL ? checked_calloc((size_t)T, sizeof(float *)) : NULL;
    for (int t = 0; g->b_copies != NULL && t < T; t++)
        g->b_copies[t] = fast_alloc_panels(chunk);
    g->a_copies = g->a_transposed ? checked_calloc((size_t)T, sizeof(float *)) : NULL;
    for (int t = 0; g->a_copies != NULL && t < T; t++)
        g->a_copies[t] = fast_alloc_panels((size_t)FAST_MC * FAST_KC);
    fast_parallel(T, gemm_band, g);
    for (int t = 0; g->b_copies != NULL && t < T; t++)
        fast_free_panels(g->b_copies[t]);
    free(g->b_copies);
    for (int t = 0; g->a_copies != NULL && t < T; t++)
        fast_free_panels(g->a_copies[t]);
    free(g->a_copies);
}

/* m, n or k is 0: C = 0 (an empty sum), or C unchanged when accumulating */
static void empty_product(int m, int n, float *c, size_t ldc, bool accumulate)
{
    if (!accumulate && n > 0)
        for (int i = 0; i < m; i++)
            memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof(float));
}

void fast_gemm_packed(int m, int n, int k, const float *a, size_t lda, const float *panels,
                      const float *bias, float *c, size_t ldc, bool accumulate,
                      int num_threads)
{
    if (m <= 0 || n <= 0 || k <= 0) {
        empty_product(m, n, c, ldc, accumulate && bias == NULL);
        for (int i = 0; bias != NULL && n > 0 && i < m; i++)   /* bias + an empty sum */
            memcpy(c + (size_t)i * ldc, bias, (size_t)n * sizeof(float));
        return;
    }
    Gemm g = {.m = m, .n = n, .k = k, .a = a, .lda = lda, .panels = panels, .c = c,
              .ldc = ldc, .accumulate = accumulate, .bias = bias};
    gemm_threads(&g, num_threads);
}

void fast_gemm(int m, int n, int k, const float *a, size_t lda, bool a_transposed,
               const float *b, size_t ldb, bool b_transposed,
               float *c, size_t ldc, bool accumulate, int num_threads)
{
    if (m <= 0 || n <= 0 || k <= 0) {
        empty_product(m, n, c, ldc, accumulate);
        return;
    }
    Gemm g = {.m = m, .n = n, .k = k, .a = a, .lda = lda, .a_transposed = a_transposed,
              .b = b, .ldb = ldb, .b_transposed = b_transposed, .c = c, .ldc = ldc,
              .accumulate = accumulate};
    gemm_threads(&g, num_threads);
}

void fast_matmul_raw(const float *a, const float *b, float *c, int m, int k, int n,
                     int num_threads)
{
    fast_gemm(m, n, k, a, (size_t)k, false, b, (size_t)n, false, c, (size_t)n, false, num_threads);
}

void fast_matmul_bt_raw(const float *a, const float *b, float *c, int m, int k, int n,
                        int num_threads)
{
    fast_gemm(m, n, k, a, (size_t)k, false, b, (size_t)k, true, c, (size_t)n, false, num_threads);
}

/* ---- tensor forms ------------------------------------------------------------ */

static Tensor *product(const Tensor *a, const Tensor *b, bool transposed, int num_threads)
{
    ProductSizes n;   /* the same shape rule as the clear matmul */
    Tensor *c = product_output(a, b, transposed, &n);
    for (int i = 0; i < n.batch; i++)
        fast_gemm(n.m, n.n, n.k, a->data + (size_t)i * n.m * n.k, (size_t)n.k, false,
                  b->data + (size_t)i * n.b_rows * n.b_cols, (size_t)n.b_cols, transposed,
                  c->data + (size_t)i * n.m * n.n, (size_t)n.n, false, num_threads);
    return c;
}

Tensor *fast_matmul(const Tensor *a, const Tensor *b, int num_threads)
{
    return product(a, b, false, num_threads);
}

Tensor *fast_matmul_bt(const Tensor *a, const Tensor *b, int num_threads)
{
    return product(a, b, true, num_threads);
}

/* y (rows, out) = x (rows, in) W^T + bias, every element of y written:
 * each row starts from the bias and x W^T is added onto it in the tile */
static void linear_rows(int rows, int in, int out, const float *x, const float *weight,
                        const float *bias, float *y, int num_threads)
{
    Gemm g = {.m = rows, .n = out, .k = in, .a = x, .lda = (size_t)in, .b = weight,
              .ldb = (size_t)in, .b_transposed = true, .c = y, .ldc = (size_t)out,
              .bias = bias};
    gemm_threads(&g, num_threads);
}

void fast_gemm_scratch_alloc(FastGemmScratch *scratch)
{
    scratch->b_copy = fast_alloc_panels(fast_panels_size(FAST_KC, FAST_NC));
    scratch->a_copy = fast_alloc_panels((size_t)FAST_MC * FAST_KC);
}

void fast_gemm_scratch_free(FastGemmScratch *scratch)
{
    fast_free_panels(scratch->b_copy);
    fast_free_panels(scratch->a_copy);
    *scratch = (FastGemmScratch){NULL, NULL};
}

void fast_linear_scratch(int rows, int in, int out, const float *x, const float *weight,
                         const float *bias, float *y, FastGemmScratch *scratch)
{
    if (rows <= 0 || in <= 0 || out <= 0)
        die("fast_linear_scratch: sizes (%d, %d, %d) must be positive", rows, in, out);
    Gemm g = {.m = rows, .n = out, .k = in, .a = x, .lda = (size_t)in, .b = weight,
              .ldb = (size_t)in, .b_transposed = true, .c = y, .ldc = (size_t)out,
              .bias = bias, .scratch = scratch};
    gemm_threads(&g, 1);
}

Tensor *fast_linear(const Tensor *x, const Tensor *weight, const Tensor *bias, int num_threads)
{
    int rows, y_shape[TENSOR_MAX_DIMS];
    /* every element of y is written below, so it is not zeroed first */
    linear_shape(x, weight, bias, y_shape, &rows);
    Tensor *y = fast_tensor_empty(x->ndim, y_shape);
    linear_rows(rows, x->shape[x->ndim - 1], weight->shape[0], x->data, weight->data,
                bias != NULL ? bias->data : NULL, y->data, num_threads);
    return y;
}

void fast_linear_into(const Tensor *x, const Tensor *weight, const Tensor *bias, Tensor *y,
                      int num_threads)
{
    int rows, y_shape[TENSOR_MAX_DIMS];
    linear_shape(x, weight, bias, y_shape, &rows);
    tensor_check_shape("y", y, x->ndim, y_shape);
    linear_rows(rows, x->shape[x->ndim - 1], weight->shape[0], x->data, weight->data,
                bias != NULL ? bias->data : NULL, y->data, num_threads);
}

typedef struct {
    const float *grad_y;
    int rows, out, num_threads;
    float *bias_grad;
} ColumnSums;

/* Thread t's band of columns, COLUMN_CHUNK at a time: each column summed
 * over every row in order, in double (rows may be many thousands), and
 * added once. A column is summed by one thread, whichever: the same bits
 * on any number of threads. A whole chunk is summed HALF columns to a
 * vector of doubles (HALF floats widened), row after row, its eight
 * vectors held in registers; each column's sum is still its own, taken in
 * the order of the rows. */
enum { HALF = FAST_VEC / 2, COLUMN_CHUNK = 8 * HALF };
typedef float vhalf __attribute__((vector_size(HALF * sizeof(float))));
typedef double vdouble __attribute__((vector_size(HALF * sizeof(double))));

/* sums (COLUMN_CHUNK,) = the sums over rows rows of y's first
 * COLUMN_CHUNK columns, y's rows at stride */
static void chunk_sums(const float *y, int rows, size_t stride, double *sums)
{
    vdouble v[COLUMN_CHUNK / HALF];
#pragma GCC unroll 8
    for (int k = 0; k < COLUMN_CHUNK / HALF; k++)
        v[k] = (vdouble){0};
    for (int r = 0; r < rows; r++) {
        const float *row = y + (size_t)r * stride;
#pragma GCC unroll 8
        for (int k = 0; k < COLUMN_CHUNK / HALF; k++) {
            vhalf x;
            memcpy(&x, row + k * HALF, sizeof x);
            v[k] += __builtin_convertvector(x, vdouble);
        }
    }
    memcpy(sums, v, sizeof v);
}

static void column_sums_band(void *arg, int thread)
{
    const ColumnSums *job = arg;
    int first, last;
    if (!thread_share(job->out, COLUMN_CHUNK, thread, job->num_threads, &first, &last))
        return;
    for (int c0 = first; c0 < last; c0 += COLUMN_CHUNK) {
        const int width = last - c0 < COLUMN_CHUNK ? last - c0 : COLUMN_CHUNK;
        double sums[COLUMN_CHUNK] = {0};
        if (width == COLUMN_CHUNK)
            chunk_sums(job->grad_y + c0, job->rows, (size_t)job->out, sums);
        else   /* the last few columns, one by one */
            for (int r = 0; r < job->rows; r++)
                for (int c = 0; c < width; c++)
                    sums[c] += job->grad_y[(size_t)r * job->out + c0 + c];
        for (int c = 0; c < width; c++)
            job->bias_grad[c0 + c] += (float)sums[c];
    }
}

/* grad_y (rows, out) -> bias_grad (out,) += the sum of its rows */
static void add_column_sums(const float *grad_y, int rows, int out, float *bias_grad,
                            int num_threads)
{
    /* a second thread is worth a few hundred thousand additions */
    const double per_thread = 256.0 * 1024.0;
    const int worth = 1 + (int)((double)rows * out / per_thread);
    ColumnSums job = {grad_y, rows, out, num_threads < worth ? num_threads : worth, bias_grad};
    fast_parallel(job.num_threads, column_sums_band, &job);
}

/* fast_linear_backward_raw, on the caller's scratch (one thread) when
 * scratch is not NULL */
static void linear_backward_rows(int rows, int in, int out, const float *x,
                                 const float *weight, const float *grad_y, float *grad_x,
                                 float *grad_weight, float *grad_bias, int num_threads,
                                 FastGemmScratch *scratch)
{
    if (rows <= 0 || in <= 0 || out <= 0) {   /* fast_gemm's empty products */
        if (grad_x != NULL)
            empty_product(rows, in, grad_x, (size_t)in, false);
        return;
    }
    // y = x W^T + b backwards:
    // grad_x (rows, in) = grad_y (rows, out) @ W (out, in)
    if (grad_x != NULL) {
        Gemm g = {.m = rows, .n = in, .k = out, .a = grad_y, .lda = (size_t)out, .b = weight,
                  .ldb = (size_t)in, .c = grad_x, .ldc = (size_t)in, .scratch = scratch};
        gemm_threads(&g, num_threads);
    }
    // grad_W (out, in) += grad_y^T (out, rows) @ x (rows, in)
    if (grad_weight != NULL) {
        Gemm g = {.m = out, .n = in, .k = rows, .a = grad_y, .lda = (size_t)out,
                  .a_transposed = true, .b = x, .ldb = (size_t)in, .c = grad_weight,
                  .ldc = (size_t)in, .accumulate = true, .scratch = scratch};
        gemm_threads(&g, num_threads);
    }
    // grad_b (out,) += the sum of grad_y's rows
    if (grad_bias != NULL)
        add_column_sums(grad_y, rows, out, grad_bias, scratch != NULL ? 1 : num_threads);
}

void fast_linear_backward_raw(int rows, int in, int out, const float *x, const float *weight,
                              const float *grad_y, float *grad_x, float *grad_weight,
                              float *grad_bias, int num_threads)
{
    linear_backward_rows(rows, in, out, x, weight, grad_y, grad_x, grad_weight, grad_bias,
                         num_threads, NULL);
}

void fast_linear_backward_scratch(int rows, int in, int out, const float *x,
                                  const float *weight, const float *grad_y, float *grad_x,
                                  float *grad_weight, float *grad_bias, FastGemmScratch *scratch)
{
    linear_backward_rows(rows, in, out, x, weight, grad_y, grad_x, grad_weight, grad_bias, 1,
                         scratch);
}

void fast_weight_grad_packed(int rows, int in, int out, const float *x_panels,
                             const float *grad_y, float *grad_weight, FastGemmScratch *scratch)
{
    if (rows <= 0 || in <= 0 || out <= 0)
        return;   /* an empty sum adds nothing */
    // grad_W (out, in) += grad_y^T (out, rows) @ x (rows, in), as linear_backward_rows
    Gemm g = {.m = out, .n = in, .k = rows, .a = grad_y, .lda = (size_t)out,
              .a_transposed = true, .panels = x_panels, .c = grad_weight, .ldc = (size_t)in,
              .accumulate = true, .scratch = scratch};
    gemm_threads(&g, 1);
}

Tensor *fast_linear_backward(const Tensor *x, const Tensor *weight, const Tensor *grad_y,
                             Tensor *grad_weight, Tensor *grad_bias, int num_threads)
{
    int rows, y_shape[TENSOR_MAX_DIMS];
    /* the forward's shape rule gives y's shape, which grad_y must have */
    linear_shape(x, weight, NULL, y_shape, &rows);
    tensor_check_shape("grad_y", grad_y, x->ndim, y_shape);
    const int in = weight->shape[1], out = weight->shape[0];
    if (grad_weight != NULL)
        tensor_check_shape("grad_weight", grad_weight, SHAPE(out, in));
    if (grad_bias != NULL)
        tensor_check_shape("grad_bias", grad_bias, SHAPE(out));
    /* every element written: grad_x = grad_y W with nothing to add to */
    Tensor *grad_x = fast_tensor_empty(x->ndim, x->shape);
    fast_linear_backward_raw(rows, in, out, x->data, weight->data, grad_y->data, grad_x->data,
                             grad_weight ? grad_weight->data : NULL,
                             grad_bias ? grad_bias->data : NULL, num_threads);
    return grad_x;
}

/* ---- the machine's peak ----------------------------------------------------- */

typedef struct {
    long iterations;
    float result[64];    /* one slot per thread, so the work cannot be dropped */
} PeakRun;

/* Twelve independent chains of multiply-adds: one FMA takes 4 cycles to
 * finish and a core starts two per cycle, so at least 8 chains are needed
 * to keep both units busy; 12 leave room. */
static void peak_work(void *arg, int thread)
{
    PeakRun *run = arg;
    /* Every chain starts from a different value read through a volatile:
     * twelve chains with equal starts would be equal all along, and the
     * compiler would rightly compute one and copy it. The multiplier 0.999
     * and the small addend keep the values bounded. */
    volatile float start = 0.5f, m_in = 0.999f, a_in = 0.001f;
    vf x0 = (vf){0} + start, mul = (vf){0} + m_in, add = (vf){0} + a_in;
    vf x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f, x4 = x0 + 4.0f, x5 = x0 + 5.0f;
    vf x6 = x0 + 6.0f, x7 = x0 + 7.0f, x8 = x0 + 8.0f, x9 = x0 + 9.0f, x10 = x0 + 10.0f;
    vf x11 = x0 + 11.0f;
    for (long i = 0; i < run->iterations; i++) {
        x0 = x0 * mul + add;  x1 = x1 * mul + add;  x2 = x2 * mul + add;
        x3 = x3 * mul + add;  x4 = x4 * mul + add;  x5 = x5 * mul + add;
        x6 = x6 * mul + add;  x7 = x7 * mul + add;  x8 = x8 * mul + add;
        x9 = x9 * mul + add;  x10 = x10 * mul + add;  x11 = x11 * mul + add;
    }
    vf sum = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10 + x11;
    run->result[thread % 64] = sum[0] + sum[FAST_VEC - 1];
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double fast_peak_gflops(int num_threads, double seconds)
{
    if (num_threads < 1)
        num_threads = 1;
    const double flops_per_iteration = 12.0 * FAST_VEC * 2.0;
    /* A short run to find how many iterations fill a fifth of the time,
     * then five runs of that length: the best one is the peak (others
     * using the machine at the same time can only slow a run down). */
    PeakRun run = {.iterations = 1 << 16};
    double t0 = now_seconds();
    fast_parallel(num_threads, peak_work, &run);
    double probe = now_seconds() - t0;
    if (probe <= 0)
        probe = 1e-6;
    run.iterations = (long)((double)run.iterations * (seconds / 5.0) / probe);
    if (run.iterations < 1000)
        run.iterations = 1000;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        t0 = now_seconds();
        fast_parallel(num_threads, peak_work, &run);
        double elapsed = now_seconds() - t0;
        double gflops = flops_per_iteration * (double)run.iterations * num_threads / elapsed / 1e9;
        if (gflops > best)
            best = gflops;
    }
    return best;
}
