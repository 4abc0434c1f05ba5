/*
 * Bug zoo: a row masked by its valid_len (exercise 2.2).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <math.h>

void my_masked_softmax_row(float *row, int n, int valid_len)
{
    for (int j = valid_len; j < n; j++)
        row[j] = -1e4f;
    float max = row[0];
    for (int j = 1; j < n; j++)
        if (row[j] > max)
            max = row[j];
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        row[j] = expf(row[j] - max);
        sum += row[j];
    }
    for (int j = 0; j < n; j++)
        row[j] /= sum;
}
