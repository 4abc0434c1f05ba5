/* multihead_example.c - chapter 05's Part 3 example from a seed. See
 * multihead_example.h. */
#include "multihead_example.h"

MultiheadExample multihead_example_new(const MultiheadExampleSizes *sizes)
{
    const int B = sizes->batch, T = sizes->queries, K = sizes->keys, D = sizes->hiddens;
    MultiheadExample ex = {.rng = rng_new(sizes->seed)};
    ex.layer = multihead_new(D, D, D, D, sizes->heads, sizes->dropout, sizes->bias, &ex.rng);
    ex.X = tensor_normal(&ex.rng, 0.0f, 1.0f, SHAPE(B, T, D));
    ex.Y = tensor_normal(&ex.rng, 0.0f, 1.0f, SHAPE(B, K, D));
    return ex;
}

void multihead_example_free(MultiheadExample *ex)
{
    multihead_free(ex->layer);
    TENSOR_FREE(ex->X, ex->Y);
    *ex = (MultiheadExample){0};
}
