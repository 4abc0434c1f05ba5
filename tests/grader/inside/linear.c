/* linear.c - exercise 5.1's my_linear in place of the repository's linear
 * (common/ops.c): every linear layer the clear path runs. inside.txt
 * forces the model's linear layers and attention onto the clear path,
 * which calls it. */
#include "exercises.h"
#include "ops.h"

Tensor *linear(const Tensor *x, const Tensor *weight, const Tensor *bias)
{
    return my_linear(x, weight, bias);
}
