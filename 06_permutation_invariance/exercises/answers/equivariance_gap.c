/*
 * Exercise 6.3, worked answer: measuring equivariance.
 *
 * Both sides of f(P X) = P f(X), computed the long way, and their largest
 * difference. Equivariant f gives a few roundings at most (the sums over
 * the keys run in another order), others a real difference.
 */
#include "exercises.h"
#include "permute_tokens.h"

float my_equivariance_gap(Tensor *(*f)(const Tensor *X), const Tensor *X, const int *perm)
{
    Tensor *PX = permute_tokens(X, perm);
    Tensor *f_PX = f(PX);            // f(P X)
    Tensor *f_X = f(X);
    Tensor *P_fX = permute_tokens(f_X, perm);   // P f(X)
    float gap = tensor_max_abs_diff(f_PX, P_fX);
    Tensor *made[] = {PX, f_PX, f_X, P_fX};
    tensor_free_all(made, 4);
    return gap;
}
