/*
 * loss.c - cross-entropy over logits (introduced in chapter 05's optional
 * section "Attention that learns"). See loss.h.
 *
 * Legend: N = number of predictions, C = number of classes.
 */
#include "learn/loss.h"

#include <math.h>

#include "ops.h"

/* logits (..., C) -> the number of rows N and C; stops on a bad target. */
static int rows_of(const Tensor *logits, const int *targets, int *num_classes)
{
    const int C = logits->shape[logits->ndim - 1];
    const size_t N = logits->size / (size_t)C;
    for (size_t i = 0; i < N; i++)
        if (targets[i] < 0 || targets[i] >= C)
            die("target %d of row %zu is outside the classes [0, %d)", targets[i],
                   i, C);
    *num_classes = C;
    return (int)N;
}

/* logits (C,) -> log(sum_j exp(z_j)) */
double logsumexp_row(const float *logits, int num_classes)
{
    // pass 1: the maximum, so that every exponential below is at most 1
    double max = logits[0];
    for (int j = 1; j < num_classes; j++)
        if (logits[j] > max)
            max = logits[j];
    if (isinf(max))
        return max;   /* +inf stays +inf; all -inf would give NaN below */
    // pass 2: the sum of the shifted exponentials, at least 1 (from the maximum)
    double sum = 0.0;
    for (int j = 0; j < num_classes; j++)
        sum += exp((double)logits[j] - max);
    return max + log(sum);
}

/* logits (N, C), targets (N,) -> mean of logsumexp(z) - z[y] */
double cross_entropy(const Tensor *logits, const int *targets)
{
    int C;
    const int N = rows_of(logits, targets, &C);
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        const float *row = logits->data + (size_t)i * C;
        total += logsumexp_row(row, C) - (double)row[targets[i]];
    }
    return total / N;
}

/* logits (N, C), targets (N,) -> grad (N, C) = grad_loss (softmax - onehot) / N;
 * returns the mean of logsumexp(z) - z[y], summed as cross_entropy sums it */
double cross_entropy_backward_rows(const float *logits, const int *targets, int N, int C,
                                   float grad_loss, float *grad)
{
    const double scale = (double)grad_loss / N;
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        const float *row = logits + (size_t)i * C;
        float *grad_row = grad + (size_t)i * C;
        /* softmax(z)_j = exp(z_j - logsumexp(z)): the log-sum-exp of the
         * forward gives the probabilities without a second normalisation */
        const double lse = logsumexp_row(row, C);
        total += lse - (double)row[targets[i]];
        for (int j = 0; j < C; j++) {
            const double p = exp((double)row[j] - lse);
            grad_row[j] = (float)(scale * (p - (j == targets[i] ? 1.0 : 0.0)));
        }
    }
    return total / N;
}

Tensor *cross_entropy_backward(const Tensor *logits, const int *targets, float grad_loss)
{
    int C;
    const int N = rows_of(logits, targets, &C);
    Tensor *grad = tensor_empty(logits->ndim, logits->shape);   /* every element written */
    cross_entropy_backward_rows(logits->data, targets, N, C, grad_loss, grad->data);
    return grad;
}

double cross_entropy_with_grad(const Tensor *logits, const int *targets, int *correct,
                               Tensor **grad_logits)
{
    int C;
    const int N = rows_of(logits, targets, &C);
    if (correct != NULL)
        *correct = count_correct(logits, targets);
    *grad_logits = tensor_empty(logits->ndim, logits->shape);   /* every element written */
    return cross_entropy_backward_rows(logits->data, targets, N, C, 1.0f, (*grad_logits)->data);
}

int count_correct(const Tensor *logits, const int *targets)
{
    int C;
    const int N = rows_of(logits, targets, &C);
    int correct = 0;
    for (int i = 0; i < N; i++) {
        correct += argmax(logits->data + (size_t)i * C, C) == targets[i];
    }
    return correct;
}
