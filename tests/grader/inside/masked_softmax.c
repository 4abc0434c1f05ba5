/* masked_softmax.c - exercise 2.3's my_masked_softmax in place of the
 * repository's masked_softmax (common/softmax.c), for make NN_chapter
 * EXERCISE=FILE (tests/grader/inside_run). Every call from another file of
 * common/ and from the program comes here. */
#include "exercises.h"
#include "softmax.h"

Tensor *masked_softmax(const Tensor *x, const ValidLens *valid_lens)
{
    return my_masked_softmax(x, valid_lens);
}
