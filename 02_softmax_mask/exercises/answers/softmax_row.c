/*
 * Exercise 2.1, worked answer: a softmax over one row that never overflows.
 *
 * exp(x_j - m) / sum_i exp(x_i - m) is the same softmax for any m; with m
 * the row's maximum every exponent is <= 0, so no expf overflows, and the
 * largest term is exp(0) = 1, so the sum is at least 1.
 */
#include "exercises.h"

#include <math.h>

void my_softmax_row(float *row, int n)
{
    // pass 1: the row's maximum
    float max = row[0];
    for (int j = 1; j < n; j++)
        if (row[j] > max)
            max = row[j];
    // pass 2: exponentials of the shifted scores, and their sum
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        row[j] = expf(row[j] - max);
        sum += row[j];
    }
    // pass 3: normalise
    for (int j = 0; j < n; j++)
        row[j] /= sum;
}
