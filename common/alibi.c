/*
 * alibi.c - ALiBi's linear biases (introduced in chapter 06's page
 * "Positions that keep a symmetry"). See alibi.h.
 *
 * Legend: B = batch_size, H = num_heads, T = num_queries, K = num_keys.
 */
#include "alibi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The power-of-two rule: m_h = 2^(-8h / n), h = 1 ... n. */
static double slope_of(int h, int n)
{
    return pow(2.0, -8.0 * (double)h / (double)n);
}

/* -> slopes (H,) */
void alibi_slopes(int num_heads, double *slopes)
{
    if (num_heads < 1)
        die("num_heads must be at least 1, got %d", num_heads);
    int n = 1;   /* the largest power of two not above H */
    while (2 * n <= num_heads)
        n *= 2;
    for (int h = 1; h <= n; h++)
        slopes[h - 1] = slope_of(h, n);
    /* the rest: slopes 1, 3, 5, ... of the 2n rule, which fall between
     * the ones above, so the heads still spread from near to far */
    for (int h = n + 1, odd = 1; h <= num_heads; h++, odd += 2)
        slopes[h - 1] = slope_of(odd, 2 * n);
}

/* scores (B*H, T, K) -> scores + bias, in place */
void alibi_add_bias(Tensor *scores, int num_heads)
{
    tensor_check_shape("scores", scores, SHAPE(-1, -1, -1));
    Tensor *bias = alibi_bias(num_heads, scores->shape[1], scores->shape[2]);
    const int N = scores->shape[0];
    if (N % num_heads != 0)
        die("%d score matrices are not a whole number of %d heads", N,
            num_heads);
    const size_t per_head = bias->size / (size_t)num_heads;
    for (int n = 0; n < N; n++) {
        float *matrix = scores->data + (size_t)n * per_head;
        const float *head_bias = bias->data + (size_t)(n % num_heads) * per_head;
        for (size_t i = 0; i < per_head; i++)
            matrix[i] += head_bias[i];
    }
    tensor_free(bias);
}

/* -> bias (H, T, K) */
Tensor *alibi_bias(int num_heads, int num_queries, int num_keys)
{
    double *slopes = checked_malloc((size_t)num_heads, sizeof *slopes);
    alibi_slopes(num_heads, slopes);
    Tensor *bias = tensor_zeros(SHAPE(num_heads, num_queries, num_keys));
    for (int h = 0; h < num_heads; h++)
        for (int i = 0; i < num_queries; i++)
            for (int j = 0; j < num_keys; j++)
                AT3(bias, h, i, j) = (float)(-slopes[h] * abs(i - j));
    free(slopes);
    return bias;
}

void alibi_slope_text(char *buf, size_t len, double slope)
{
    const double inverse = 1.0 / slope;
    if (inverse == floor(inverse))
        snprintf(buf, len, "1/%.0f", inverse);
    else
        snprintf(buf, len, "%.4f", slope);
}
