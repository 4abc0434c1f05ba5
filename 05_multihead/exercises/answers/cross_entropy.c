/*
 * Exercise 5.10, worked answer: cross-entropy and its gradient.
 *
 * -log softmax(z)[y] = logsumexp(z) - z[y], with the row's maximum taken
 * out of the exponentials (chapter 02's stable softmax) and the sum in
 * double. The mean's gradient is (softmax(z) - onehot(y)) / N: each row
 * is one N-th of the loss.
 */
#include "exercises.h"

#include <math.h>

double my_cross_entropy(const float *logits, const int *targets, int N, int C,
                        float *grad_logits)
{
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * C;
        float *grad = grad_logits + (size_t)n * C;
        // the row's logsumexp, its maximum taken out
        double max = z[0], sum = 0.0;
        for (int c = 1; c < C; c++)
            max = fmax(max, z[c]);
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - max);
        const double logsumexp = max + log(sum);
        total += logsumexp - z[targets[n]];
        // softmax minus the one-hot target, over N
        for (int c = 0; c < C; c++)
            grad[c] = (float)((exp(z[c] - logsumexp) - (c == targets[n])) / N);
    }
    return total / N;
}
