/*
 * Exercise 4.1: where an element lands
 * (04_transpose_qkv/README.md, "Exercises").
 *
 * transpose_qkv turns x (B, T, D) into out (B*H, T, d), d = D / H, with row
 * b * H + h holding head h of sequence b. Return the flat index into out's
 * data where x[b][t][c] lands.
 *
 * Grade it:  make check EXERCISE=04_transpose_qkv/exercises/split_offset.c
 */
#include "exercises.h"

size_t my_split_offset(int b, int t, int c, int T, int D, int H)
{
    not_started();   /* delete this line when you begin */
    (void)b;
    (void)t;
    (void)c;
    (void)T;
    (void)D;
    (void)H;
    return 0;
}
