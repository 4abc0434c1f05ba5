/*
 * Bug zoo: valid_lens over the heads (exercise 4.4).
 * The grader says it fails. Read what it says, find the line, fix it
 * (02_softmax_mask/bug_zoo.md explains it, folded away).
 */
#include "exercises.h"

#include <stdlib.h>

ValidLens *my_repeat_valid_lens(const ValidLens *valid_lens, int num_heads)
{
    int batch = valid_lens->shape[0], rows = batch * num_heads;
    int per_row = valid_lens->ndim == 2 ? valid_lens->shape[1] : 1;
    int *lens = malloc((size_t)rows * (size_t)per_row * sizeof(int));
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < per_row; q++)
            lens[r * per_row + q] = valid_lens->data[(r % batch) * per_row + q];
    ValidLens *out = valid_lens->ndim == 2 ? valid_lens_2d(lens, rows, per_row)
                                           : valid_lens_1d(lens, rows);
    free(lens);
    return out;
}
