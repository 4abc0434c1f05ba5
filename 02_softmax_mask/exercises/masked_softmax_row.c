/*
 * Exercise 2.2: one row masked by its valid_len
 * (02_softmax_mask/README.md, "Exercises").
 *
 * row (n,), in place: the keys j < valid_len share the weight as in a
 * softmax over them alone; every key j >= valid_len gets exactly 0.
 * valid_len is from 0 to n, and 0 gives a row of zeros.
 *
 * Grade it:  make check EXERCISE=02_softmax_mask/exercises/masked_softmax_row.c
 */
#include "exercises.h"

void my_masked_softmax_row(float *row, int n, int valid_len)
{
    not_started();   /* delete this line when you begin */
    (void)row;
    (void)n;
    (void)valid_len;
}
