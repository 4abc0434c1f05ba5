/*
 * Bug zoo: the softmax, backwards (exercise 3.4).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

void my_softmax_row_backward(const float *weights, const float *grad_weights,
                             float *grad_scores, int n)
{
    /* each weight's own slope, dp_j/ds_j = p_j (1 - p_j) */
    for (int j = 0; j < n; j++)
        grad_scores[j] = grad_weights[j] * weights[j] * (1.0f - weights[j]);
}
