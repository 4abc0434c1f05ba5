/* masked_softmax_row.c - exercise 2.2's my_masked_softmax_row in place of
 * the repository's masked_softmax_row (common/softmax.c): every row of the
 * clear attention's weights (attention.c). inside.txt forces the model's
 * attention onto the clear layer, which calls it. */
#include "exercises.h"
#include "softmax.h"

void masked_softmax_row(float *row, int n, int valid_len)
{
    my_masked_softmax_row(row, n, valid_len);
}
