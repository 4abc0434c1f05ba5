/*
 * Exercise 6.6, worked answer: ALiBi's bias.
 *
 * For H a power of two the slopes are a geometric series, 2^(-8/H) to the
 * power h. For other H the paper keeps the n slopes of n, the largest
 * power of two below H, and adds every other slope of the 2n rule (the
 * 1st, 3rd, ...): head h > n takes slope 2h - 2n - 1 of 2n. The penalty
 * depends on |i - j| only, so a key before the query and one after it at
 * the same distance are penalised alike.
 */
#include "exercises.h"

#include <math.h>
#include <stdlib.h>

/* slope k (1-based) of the power-of-two rule for n heads */
static double slope_of(int n, int k)
{
    return pow(2.0, -8.0 * k / n);
}

void my_alibi_bias(int num_heads, int head, int num_queries, int num_keys, float *bias)
{
    int n = 1;
    while (2 * n <= num_heads)
        n *= 2;
    const double m = head <= n ? slope_of(n, head) : slope_of(2 * n, 2 * (head - n) - 1);
    for (int i = 0; i < num_queries; i++)
        for (int j = 0; j < num_keys; j++)
            bias[(size_t)i * num_keys + j] = (float)(-m * abs(i - j));
}
