/* embed_tokens_backward.c - exercise 6.13's my_embed_tokens_backward in
 * place of the repository's embed_tokens_backward
 * (common/learn/embedding.c): the language model's last backward step. */
#include "exercises.h"
#include "learn/embedding.h"

void embed_tokens_backward(const Tensor *grad_x, const int *tokens, Tensor *grad_wte,
                           Tensor *grad_wpe)
{
    my_embed_tokens_backward(grad_x->data, tokens, grad_x->shape[0], grad_x->shape[1],
                             grad_x->shape[2], grad_wte->data, grad_wpe->data);
}
