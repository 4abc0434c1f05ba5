/* worked_example.c - the worked example's tokens and formula. See
 * worked_example.h. */
#include "worked_example.h"

#include "ops.h"
#include "softmax.h"

const float EXAMPLE_TOKENS[3 * 3] = {
    0.8063f,  0.5281f,  2.7724f,
    1.4511f, -0.4305f,  1.3205f,
    1.3092f, -0.5249f, -1.0714f,
};

const float EXAMPLE_PRINTED_OUTPUT[3 * 3] = {
    0.8178f,  0.5111f,  2.7465f,
    1.0429f,  0.1725f,  2.2049f,
    1.3184f, -0.5126f, -0.8610f,
};

Tensor *unscaled_attention(const Tensor *queries, const Tensor *keys, const Tensor *values,
                           Tensor **weights)
{
    Tensor *scores = matmul_bt(queries, keys);   /* (T, K): no division by sqrt(d) */
    Tensor *probabilities = softmax(scores);     /* each row sums to 1 */
    Tensor *output = matmul(probabilities, values);
    tensor_free(scores);
    if (weights != NULL)
        *weights = probabilities;
    else
        tensor_free(probabilities);
    return output;
}
