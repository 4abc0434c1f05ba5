/*
 * Exercise 2.2, worked answer: one row masked by its valid_len.
 *
 * The mask is a loop bound: the softmax runs over the first valid_len
 * scores only, and the rest are replaced by 0 (not added to, so no score,
 * however large, leaks through).
 */
#include "exercises.h"

#include <math.h>

void my_masked_softmax_row(float *row, int n, int valid_len)
{
    if (valid_len > 0) {
        float max = row[0];
        for (int j = 1; j < valid_len; j++)
            if (row[j] > max)
                max = row[j];
        float sum = 0.0f;
        for (int j = 0; j < valid_len; j++) {
            row[j] = expf(row[j] - max);
            sum += row[j];
        }
        for (int j = 0; j < valid_len; j++)
            row[j] /= sum;
    }
    for (int j = valid_len; j < n; j++)
        row[j] = 0.0f;
}
