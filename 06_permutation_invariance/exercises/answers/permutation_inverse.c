/*
 * Exercise 6.2, worked answer: undoing a permutation.
 *
 * perm puts token perm[i] at position i; the inverse must take it back,
 * so inverse[perm[i]] = i. One pass, one write per entry.
 */
#include "exercises.h"

void my_permutation_inverse(const int *perm, int *inverse, int n)
{
    for (int i = 0; i < n; i++)
        inverse[perm[i]] = i;
}
