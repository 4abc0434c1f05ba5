/*
 * fast_exp.c - a vectorisable exp. See fast_exp.h for what it promises.
 *
 * The arithmetic is written on a vector of FAST_VEC floats at once (16
 * with AVX-512, else 8): the type vf of fast_vector.h, on which + - * and
 * comparisons act lane by lane.
 * There is no branch on the data: every special case is a comparison that
 * makes a lane mask, and a select that picks the right lane.
 */
#include "fast/fast_exp.h"
#include "fast/fast_internal.h"

#include "fast/fast_vector.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef uint32_t vu __attribute__((vector_size(FAST_VEC * sizeof(uint32_t))));

/* Lane by lane: mask ? a : b, where mask lanes are all ones or all zeros
 * (what a vector comparison returns). Casting between vector types of the
 * same size reinterprets the bits. */
static inline vf select_vec(vi mask, vf a, vf b)
{
    return (vf)((mask & (vi)a) | (~mask & (vi)b));
}

/* Thresholds, as exact float constants:
 *   OVERFLOW_X  = 88.72283172607421875, the largest float whose exp rounds
 *                 to a finite float; above it the answer is +inf.
 *   UNDERFLOW_X = -103.972076416015625, the smallest float whose exp rounds
 *                 to a non-zero float (2^-149, the smallest subnormal);
 *                 below it the true result is under 2^-150, half of that,
 *                 and rounds to exactly 0. */
#define OVERFLOW_X   0x1.62e42ep+6f
#define UNDERFLOW_X  -0x1.9fe368p+6f

/* Below WEIGHT_FLUSH_X, exp is under 2^-125 (1.7e-38 at -87): as a
 * softmax weight beside the largest one (exp(0) = 1) it is nothing, and
 * the weights' exp flushes it to 0 (see exp_vec). */
#define WEIGHT_FLUSH_X  -87.0f

/* exp of every lane. With weights, the lanes are softmax arguments, at
 * most 0 up to rounding (a score minus the row's maximum or logsumexp):
 * the overflow check is left out (a lane above OVERFLOW_X, +inf included,
 * gives a meaningless number), and a result below 2^-125 is flushed to 0
 * (x < WEIGHT_FLUSH_X), so that 2^n is one normal float and step 4 needs
 * one multiplication, not two. The rest is the same arithmetic, within
 * 1 ulp of expf in between. */
/* Kept whole (64 lines): its five steps are one chain of vector registers, x to y. */
static inline vf exp_vec_for(vf x, bool weights)
{
    /* No lane is clamped first: for NaN, infinities and |x| beyond the
     * range, steps 1 to 4 compute meaningless numbers and step 5 replaces
     * them. The bit arithmetic is done on unsigned lanes, where wrapping
     * around is defined, so a meaningless lane is harmless. (Clamping
     * first costs two selects per vector: a third of the time.) */

    /* step 1: n = round(x / ln 2). Adding 1.5 * 2^23 pushes the fraction
     * bits out of the float, so the addition itself rounds to the nearest
     * integer; the low bits of the sum then hold n (no float-to-int
     * conversion, which would be undefined behaviour out of range). */
    const float shifter = 0x1.8p23f;
    vf t = x * 1.44269504088896341f + shifter;
    vf n = t - shifter;
    vu n_bits = (vu)t - 0x4b400000u;   /* n in two's complement */

    /* step 2: r = x - n ln 2, in two parts (Cody and Waite): LN2_HI has
     * few enough bits that n * LN2_HI is exact for |n| <= 150, and LN2_LO
     * supplies the rest of ln 2, so r keeps its accuracy. |r| <= 0.347. */
    const float ln2_hi = 0x1.62e4p-1f;            /* 0.693145751953125 */
    const float ln2_lo = 0x1.7f7d1cp-20f;         /* ln 2 - LN2_HI */
    vf r = x - n * ln2_hi;
    r = r - n * ln2_lo;

    /* step 3: exp(r) by its Taylor series up to r^7 / 7!, in Horner form.
     * The first term left out is r^8 / 8! <= 5e-9 relative: far below the
     * float rounding error, so the result is good to about 1 ulp. */
    vf p = (vf){0} + (1.0f / 5040.0f);
    p = p * r + (1.0f / 720.0f);
    p = p * r + (1.0f / 120.0f);
    p = p * r + (1.0f / 24.0f);
    p = p * r + (1.0f / 6.0f);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;

    /* step 4: multiply by 2^n, built in the exponent bits:
     * (n + 127) << 23 is the float 2^n when -126 <= n <= 127. n runs from
     * -150 to 128 in the range, so 2^n is split into 2^n1 * 2^n2 with
     * n1 = floor(n / 2) (an arithmetic shift: a signed lane, shifted right,
     * keeps its sign in GCC and Clang): both halves are normal floats, the
     * first product is exact, and only the second rounds, once, also when
     * the result is subnormal. */
    if (weights) {
        /* -126 <= n <= 128 wherever the answer is not flushed */
        const vf y = p * (vf)((n_bits + 127u) << 23);
        return (vf)((vi)y & ~(x < WEIGHT_FLUSH_X));
    }
    vu n1 = (vu)((vi)n_bits >> 1);
    vu n2 = n_bits - n1;
    vf scale1 = (vf)((n1 + 127u) << 23);
    vf scale2 = (vf)((n2 + 127u) << 23);
    vf y = (p * scale1) * scale2;

    /* step 5: the exact answers outside the range. !(x <= OVERFLOW_X)
     * holds for overflow, +inf and NaN, and x + inf is +inf for the first
     * two and NaN for NaN. Below UNDERFLOW_X, -inf included, every bit of
     * the answer is cleared: exactly +0. */
    vi special = ~(x <= OVERFLOW_X);
    y = select_vec(special, x + __builtin_inff(), y);
    y = (vf)((vi)y & ~(x < UNDERFLOW_X));
    return y;
}

static inline vf exp_vec(vf x)
{
    return exp_vec_for(x, false);
}

/* the softmax weights' exp (the rules above exp_vec_for) */
static inline vf exp_weights(vf x)
{
    return exp_vec_for(x, true);
}

float fast_expf(float x)
{
    vf v = (vf){0} + x;
    return exp_vec(v)[0];
}

void fast_exp_array(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + FAST_VEC <= n; i += FAST_VEC)
        store_vec(y + i, exp_vec(load_vec(x + i)));
    if (i < n) {
        /* the last few values go through a zero-padded vector */
        float tail[FAST_VEC] = {0};
        memcpy(tail, x + i, (n - i) * sizeof(float));
        store_vec(tail, exp_vec(load_vec(tail)));
        memcpy(y + i, tail, (n - i) * sizeof(float));
    }
}

/* Lane by lane: the larger of a and b (b where either is NaN). */
static inline vf max_vec(vf a, vf b)
{
    return select_vec(a > b, a, b);
}

/* The sum (or, with take_max, the largest) of the lanes of x, by halves:
 * each step combines the vector with itself turned by half its remaining
 * width, so 16 lanes take four steps in a row instead of fifteen. */
static inline float reduce_lanes(vf x, bool take_max)
{
#if defined(__AVX512F__)   /* FAST_VEC is 16 */
    const vf half = __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15,
                                            0, 1, 2, 3, 4, 5, 6, 7);
    x = take_max ? max_vec(x, half) : x + half;
    const vf quarter = __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3,
                                               12, 13, 14, 15, 8, 9, 10, 11);
    x = take_max ? max_vec(x, quarter) : x + quarter;
    const vf eighth = __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5,
                                              10, 11, 8, 9, 14, 15, 12, 13);
    x = take_max ? max_vec(x, eighth) : x + eighth;
    const vf next = __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6,
                                            9, 8, 11, 10, 13, 12, 15, 14);
#else
    const vf quarter = __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3);
    x = take_max ? max_vec(x, quarter) : x + quarter;
    const vf eighth = __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5);
    x = take_max ? max_vec(x, eighth) : x + eighth;
    const vf next = __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6);
#endif
    x = take_max ? max_vec(x, next) : x + next;
    return x[0];
}

/* x[0..n) with the lanes from n on set to fill, 0 <= n < FAST_VEC: the last,
 * partial vector of a row, read without going past its end. */
static inline vf load_partial(const float *x, size_t n, float fill)
{
    float lanes[FAST_VEC];
    for (int lane = 0; lane < FAST_VEC; lane++)
        lanes[lane] = fill;
    memcpy(lanes, x, n * sizeof(float));
    return load_vec(lanes);
}

/* The first n lanes (n < FAST_VEC) of the vector at x, the others fill,
 * from a load of the whole vector: x must be readable that far. The
 * same lanes as load_partial, without its trip through memory. */
static inline vf load_first(const float *x, size_t n, float fill)
{
    static const int32_t index[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    vi lanes;
    memcpy(&lanes, index, sizeof lanes);
    return select_vec(lanes < (int32_t)n, load_vec(x), (vf){0} + fill);
}

/* fast_row_max, and (padded) fast_row_max_padded */
static inline float row_max(const float *row, size_t n, bool padded)
{
    /* four running maxima: one alone would make every step wait for the
     * comparison before it */
    vf m0 = (vf){0} - __builtin_inff(), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 4 * FAST_VEC <= n; i += 4 * FAST_VEC) {
        m0 = max_vec(load_vec(row + i), m0);
        m1 = max_vec(load_vec(row + i + FAST_VEC), m1);
        m2 = max_vec(load_vec(row + i + 2 * FAST_VEC), m2);
        m3 = max_vec(load_vec(row + i + 3 * FAST_VEC), m3);
    }
    for (; i + FAST_VEC <= n; i += FAST_VEC)
        m1 = max_vec(load_vec(row + i), m1);
    if (i < n)
        m2 = max_vec(padded ? load_first(row + i, n - i, -__builtin_inff())
                            : load_partial(row + i, n - i, -__builtin_inff()),
                     m2);
    return reduce_lanes(max_vec(max_vec(m0, m1), max_vec(m2, m3)), true);
}

float fast_row_max(const float *row, size_t n)
{
    return row_max(row, n, false);
}

float fast_row_max_padded(const float *row, size_t n)
{
    return row_max(row, n, true);
}

/* fast_exp_shift_sum, and (padded) fast_exp_shift_sum_padded */
static inline float exp_shift_sum(float *row, size_t n, float shift, bool padded)
{
    /* One partial sum per lane, added together at the end: the vector
     * form of the sum (a different order than a scalar loop, so the
     * last bit may differ from it). */
    vf sum = {0};
    size_t i = 0;
    for (; i + FAST_VEC <= n; i += FAST_VEC) {
        vf e = exp_weights(load_vec(row + i) - shift);
        store_vec(row + i, e);
        sum += e;
    }
    if (i < n && padded) {
        /* the lanes past n are -inf, whose exp is 0, stored as such */
        const vf e = exp_weights(load_first(row + i, n - i, -__builtin_inff()) - shift);
        store_vec(row + i, e);
        sum += e;
    } else if (i < n) {
        /* the last few values through one vector padded with -inf, whose
         * exp is 0: they add nothing to the sum */
        float lanes[FAST_VEC];
        store_vec(lanes, exp_weights(load_partial(row + i, n - i, -__builtin_inff()) - shift));
        sum += load_vec(lanes);
        memcpy(row + i, lanes, (n - i) * sizeof(float));
    }
    return reduce_lanes(sum, false);
}

float fast_exp_shift_sum(float *row, size_t n, float shift)
{
    return exp_shift_sum(row, n, shift, false);
}

float fast_exp_shift_sum_padded(float *row, size_t n, float shift)
{
    return exp_shift_sum(row, n, shift, true);
}

void fast_exp_sub(const float *x, const float *shift, float *y, size_t n)
{
    size_t i = 0;
    for (; i + FAST_VEC <= n; i += FAST_VEC)
        store_vec(y + i, exp_weights(load_vec(x + i) - load_vec(shift + i)));
    if (i < n) {
        /* the last few through one vector, padded with exp(0 - 0) */
        float lanes[FAST_VEC];
        store_vec(lanes, exp_weights(load_partial(x + i, n - i, 0.0f) -
                                     load_partial(shift + i, n - i, 0.0f)));
        memcpy(y + i, lanes, (n - i) * sizeof(float));
    }
}

/* ---- GELU ------------------------------------------------------------------------ */

/* Lane by lane: half of 1 + tanh(c (u + 0.044715 u^3)), GELU's gate, as
 * the sigmoid 1 / (1 + exp(-2 z)), which is 0 or 1 where the exp
 * overflows or vanishes, with no branch. Written this way, not as
 * 1 - 2 / (exp(2 z) + 1), nothing cancels where the gate is near 0. */
static inline vf gelu_gate(vf u)
{
    const vf z = 0.7978845608028654f * (u + 0.044715f * u * u * u);
    return 1.0f / (1.0f + exp_vec(-2.0f * z));
}

static inline vf gelu_vec(vf u)
{
    return u * gelu_gate(u);
}

/* With s the gate, 1 - tanh^2 = 4 s (1 - s): the slope of mlp.h is
 * s + 2 u s (1 - s) c (1 + 3 * 0.044715 u^2). */
static inline vf gelu_slope_vec(vf u)
{
    const vf s = gelu_gate(u);
    return s + 2.0f * u * s * (1.0f - s) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * u * u);
}

void fast_gelu_forward(const float *f, float *g, size_t n)
{
    size_t i = 0;
    for (; i + FAST_VEC <= n; i += FAST_VEC)
        store_vec(g + i, gelu_vec(load_vec(f + i)));
    if (i < n) {
        float lanes[FAST_VEC];
        store_vec(lanes, gelu_vec(load_partial(f + i, n - i, 0.0f)));
        memcpy(g + i, lanes, (n - i) * sizeof(float));
    }
}

void fast_gelu_backward(const float *f, const float *grad_g, float *grad_f, size_t n)
{
    size_t i = 0;
    for (; i + FAST_VEC <= n; i += FAST_VEC)
        store_vec(grad_f + i, load_vec(grad_g + i) * gelu_slope_vec(load_vec(f + i)));
    if (i < n) {
        float lanes[FAST_VEC];
        store_vec(lanes, load_partial(grad_g + i, n - i, 0.0f) *
                             gelu_slope_vec(load_partial(f + i, n - i, 0.0f)));
        memcpy(grad_f + i, lanes, (n - i) * sizeof(float));
    }
}

void fast_gelu_forward_slope(float *f, float *g, size_t n)
{
    size_t i = 0;
    for (; i + FAST_VEC <= n; i += FAST_VEC) {
        const vf u = load_vec(f + i);
        store_vec(g + i, gelu_vec(u));
        store_vec(f + i, gelu_slope_vec(u));
    }
    if (i < n) {
        const vf u = load_partial(f + i, n - i, 0.0f);
        float value[FAST_VEC], slope[FAST_VEC];
        store_vec(value, gelu_vec(u));
        store_vec(slope, gelu_slope_vec(u));
        memcpy(g + i, value, (n - i) * sizeof(float));
        memcpy(f + i, slope, (n - i) * sizeof(float));
    }
}
