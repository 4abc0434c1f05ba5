/*
 * Exercise 6.7, worked answer: a previous-token score.
 *
 * One weight a query: the entry just left of the diagonal, weights[b][t][t
 * - 1]. Query 0 has no previous token, so it is left out of the mean, not
 * counted as a 0. A head that always looks one back scores 1; one that
 * spreads its weight evenly over a causal row scores the mean of 1 / (t +
 * 1), small for long rows.
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
            sum += AT3(weights, b, t, t - 1);
    return sum / ((double)B * (T - 1));
}
