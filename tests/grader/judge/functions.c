/* functions.c - the functions exercise 6.3 measures (functions.h), built
 * from attention alone, so that the runner that holds them holds nothing
 * of permute_tokens.c, where the exercise's answer lives. */
#include "functions.h"
#include "attention.h"
#include "positional.h"

static Tensor *plain(const Tensor *X) { return dot_product_attention(X, X, X, NULL, NULL, NULL); }

static Tensor *with_positions(const Tensor *X)
{
    Tensor *Y = add_positional_encoding(X);
    Tensor *out = plain(Y);
    tensor_free(Y);
    return out;
}

static Tensor *causal(const Tensor *X)
{
    ValidLens *mask = valid_lens_causal(X->shape[0], X->shape[1]);
    Tensor *out = dot_product_attention(X, X, X, mask, NULL, NULL);
    valid_lens_free(mask);
    return out;
}

const GraderFunction grader_functions[GRADER_FUNCTIONS] = {plain, with_positions, causal};
