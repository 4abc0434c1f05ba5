/*
 * embedding.c - a token embedding (introduced in chapter 05's optional
 * section "Attention that learns"). See embedding.h.
 *
 * Legend: V = vocabulary size, D = embedding size, N = number of ids.
 */
#include "learn/embedding.h"

#include <string.h>

Tensor *embedding_new(int num_embeddings, int embedding_dim, Rng *rng)
{
    if (num_embeddings < 1 || embedding_dim < 1)
        die("sizes must be positive: num_embeddings %d, embedding_dim %d",
            num_embeddings, embedding_dim);
    return tensor_normal(rng, 0.0f, 1.0f, SHAPE(num_embeddings, embedding_dim));
}

/* Stop unless every id is a row of the table. */
static void check_ids(const int *ids, size_t count, int vocab)
{
    for (size_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            die("id %d at position %zu is outside the vocabulary [0, %d)", ids[i], i,
                vocab);
}

/* weight (V, D), ids (...) -> out (..., D) */
Tensor *embedding_forward(const Tensor *weight, const int *ids, int ndim, const int *shape)
{
    tensor_check_shape("weight", weight, SHAPE(-1, -1));
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS - 1)
        die("ids must have 1 to %d dimensions, got %d", TENSOR_MAX_DIMS - 1, ndim);
    const int V = weight->shape[0], D = weight->shape[1];
    int out_shape[TENSOR_MAX_DIMS];
    memcpy(out_shape, shape, (size_t)ndim * sizeof *shape);
    out_shape[ndim] = D;
    Tensor *out = tensor_empty(ndim + 1, out_shape);   /* every row copied below */
    const size_t N = out->size / (size_t)D;
    check_ids(ids, N, V);
    for (size_t i = 0; i < N; i++)
        memcpy(out->data + i * D, weight->data + (size_t)ids[i] * D, (size_t)D * sizeof(float));
    return out;
}

/* grad_out (..., D) -> grad_weight (V, D) += each row into the row of its id */
void embedding_backward(Tensor *grad_weight, const int *ids, const Tensor *grad_out)
{
    tensor_check_shape("grad_weight", grad_weight, SHAPE(-1, -1));
    const int V = grad_weight->shape[0], D = grad_weight->shape[1];
    if (grad_out->shape[grad_out->ndim - 1] != D) {
        char a[64], b[64];
        die("grad_out %s must end in the embedding size of grad_weight %s",
            shape_str(a, sizeof a, grad_out->ndim, grad_out->shape),
            shape_str(b, sizeof b, grad_weight->ndim, grad_weight->shape));
    }
    const size_t N = grad_out->size / (size_t)D;
    check_ids(ids, N, V);
    for (size_t i = 0; i < N; i++) {
        float *row = grad_weight->data + (size_t)ids[i] * D;
        const float *grad_row = grad_out->data + i * D;
        for (int j = 0; j < D; j++)
            row[j] += grad_row[j];
    }
}

/* ---- a GPT's embedding and its tied unembedding -------------------------------- */

/* wte (V, D), wpe (C, D), tokens (B, T) -> x (B, T, D) */
Tensor *embed_tokens(const Tensor *wte, const Tensor *wpe, const int *tokens, int batch_size,
                     int length)
{
    const int B = batch_size, T = length, D = wte->shape[1];
    tensor_check_shape("wpe", wpe, SHAPE(-1, D));
    if (T > wpe->shape[0])
        die("%d tokens, but wpe has %d positions", T, wpe->shape[0]);
    Tensor *x = embedding_forward(wte, tokens, SHAPE(B, T));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT3(x, b, t, j) += AT2(wpe, t, j);
    return x;
}

/* grad_x (B, T, D) -> grad_wte (V, D) +=, grad_wpe (C, D) += */
void embed_tokens_backward(const Tensor *grad_x, const int *tokens, Tensor *grad_wte,
                           Tensor *grad_wpe)
{
    tensor_check_shape("grad_x", grad_x, SHAPE(-1, -1, -1));
    const int B = grad_x->shape[0], T = grad_x->shape[1], D = grad_x->shape[2];
    tensor_check_shape("grad_wpe", grad_wpe, SHAPE(-1, D));
    if (T > grad_wpe->shape[0])
        die("%d tokens, but grad_wpe has %d positions", T, grad_wpe->shape[0]);
    embedding_backward(grad_wte, tokens, grad_x);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT2(grad_wpe, t, j) += AT3(grad_x, b, t, j);
}

/* h (B, T, D), wte (V, D) -> logits (B, T, V) */
Tensor *unembed(const LanguageKernels *kernels, const Tensor *h, const Tensor *wte)
{
    return kernels->linear(h, wte, NULL, kernels->num_threads);
}

/* grad_logits (B, T, V) -> grad_h (B, T, D); grad_wte (V, D) += */
Tensor *unembed_backward(const LanguageKernels *kernels, const Tensor *h, const Tensor *wte,
                         const Tensor *grad_logits, Tensor *grad_wte)
{
    return kernels->linear_backward(h, wte, grad_logits, grad_wte, NULL, kernels->num_threads);
}
