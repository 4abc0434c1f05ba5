/*
 * Bug zoo: a previous-token score (exercise 6.7).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

double my_previous_token_score(const Tensor *weights)
{
    const int B = weights->shape[0], T = weights->shape[1];
    if (T < 2)
        return 0.0;
    double sum = 0.0;
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            sum += AT3(weights, b, t - 1, t);
    return sum / ((double)B * (T - 1));
}
