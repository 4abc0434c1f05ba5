/*
 * Bug zoo: ALiBi's bias (exercise 6.6).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
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
            bias[(size_t)i * num_keys + j] = (float)(m * abs(i - j));
}
