/*
 * Bug zoo: measuring equivariance (exercise 6.3).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"
#include "permute_tokens.h"

float my_equivariance_gap(Tensor *(*f)(const Tensor *X), const Tensor *X, const int *perm)
{
    Tensor *PX = permute_tokens(X, perm);
    Tensor *f_PX = f(PX);   // f(P X)
    Tensor *f_X = f(X);     // f(X), to compare with
    float gap = tensor_max_abs_diff(f_PX, f_X);
    tensor_free(PX);
    tensor_free(f_PX);
    tensor_free(f_X);
    return gap;
}
