/*
 * Exercise 6.2: undoing a permutation
 * (06_permutation_invariance/README.md, "Exercises").
 *
 * perm (n,), each of 0 .. n-1 once -> inverse (n,), written into the
 * caller's array, such that applying perm and then inverse (exercise 6.1)
 * gives the tokens back: inverse[perm[i]] = i.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/permutation_inverse.c
 */
#include "exercises.h"

void my_permutation_inverse(const int *perm, int *inverse, int n)
{
    not_started();   /* delete this line when you begin */
    (void)perm;
    for (int i = 0; i < n; i++)
        inverse[i] = 0;
}
