/*
 * Exercise 4.4, worked answer: valid_lens over the heads.
 *
 * Row r = b * H + h of the split scores belongs to sequence b = r / H, so
 * it copies sequence b's lengths: each sequence H times in a row
 * (repeat_interleave), not the whole list H times over (repeat).
 */
#include "exercises.h"

#include <stdlib.h>

ValidLens *my_repeat_valid_lens(const ValidLens *valid_lens, int num_heads)
{
    int rows = valid_lens->shape[0] * num_heads;
    int per_row = valid_lens->ndim == 2 ? valid_lens->shape[1] : 1;
    int *lens = malloc((size_t)rows * (size_t)per_row * sizeof(int));
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < per_row; q++)
            lens[r * per_row + q] = valid_lens->data[(r / num_heads) * per_row + q];
    ValidLens *out = valid_lens->ndim == 2 ? valid_lens_2d(lens, rows, per_row)
                                           : valid_lens_1d(lens, rows);
    free(lens);
    return out;
}
