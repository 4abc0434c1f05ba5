/*
 * multihead_checked.h - chapter 05's layer run on tensors a user gave (the
 * files of 05_multihead/multihead --from), every stage checked.
 *
 * Legend: B = batch_size, T = num_queries, n_k = num_keys, H = num_heads,
 * D = num_hiddens, Dq, Dk, Dv = query, key and value sizes.
 *
 * The library passes IEEE values through (multihead.h): finite inputs near
 * float32's largest value overflow into infinity in a projection, and then
 * into NaN. A run here checks each stage in the order the forward (and the
 * backward) computes it, so that the one error line names the first stage
 * that overflowed, where the fix is; and it checks the memory the run
 * needs before anything large is allocated.
 */
#ifndef MULTIHEAD_CHECKED_H
#define MULTIHEAD_CHECKED_H

#include <stdbool.h>
#include <stddef.h>

#include "multihead.h"
#include "tensor.h"
#include "valid_lens.h"

/* With grad_output = G, the gradients of L = sum(output * G) with respect
 * to every input and parameter: what PyTorch's
 * (output * G).sum().backward() leaves in .grad. */
typedef struct {
    Tensor *queries, *keys, *values;   /* (B, T, Dq), (B, n_k, Dk), (B, n_k, Dv) */
    MultiHeadGrads *params;            /* W_q ... W_o, and b_q ... b_o with biases */
} LayerGradients;

void layer_gradients_free(LayerGradients *grads);
/* The largest |entry| of each gradient on stdout, and the key bias's,
 * which is 0 up to rounding:
 *   gradients of sum(output * grad_output), largest |entry|:
 *     queries 1.102, keys 1.193, values 2.434
 *     W_q 2.681, W_k 3.235, W_v 5.226, W_o 7.113
 *     b_k 1.6e-07 (0 up to rounding: softmax ignores a shift shared by all keys) */
void layer_gradients_print(const LayerGradients *grads);

/* Every gradient with its name: grad_queries, grad_keys, grad_values,
 * grad_W_q ... grad_W_o, grad_b_q ... grad_b_o, the names of their files.
 * Empty grads (no backward) or a layer without biases gives NULL tensors.
 * Returns the count, LAYER_GRADIENTS. */
enum { LAYER_GRADIENTS = 11 };
int layer_gradients_list(const LayerGradients *grads, const char *names[LAYER_GRADIENTS],
                         const Tensor *tensors[LAYER_GRADIENTS]);

/* What one run of the layer gives. */
typedef struct {
    Tensor *output;              /* (B, T, D) */
    Tensor *attention_weights;   /* (B, H, T, n_k) */
    LayerGradients grads;        /* all NULL without grad_output */
} LayerResults;

/* queries (B, T, Dq), keys (B, n_k, Dk), values (B, n_k, Dv), valid_lens or
 * NULL -> results: forward in evaluation mode and, with grad_output
 * (B, T, D) not NULL, backward, every stage checked for NaN and infinity in
 * the order it is computed: the query, key and value projections, the
 * attention scores, the heads' output, the output, then each gradient.
 * Returns 0, or -1 with one line in err naming the first stage that
 * overflowed float32 and where:
 *   the query projection overflows float32 at [0, 1, 3]: scale the inputs down
 * and results empty: a program writes nothing it cannot read back. The
 * memory the run needs is checked first (multihead_check_memory). */
int multihead_checked_run(const MultiHeadAttention *layer, const Tensor *queries,
                          const Tensor *keys, const Tensor *values, const ValidLens *valid_lens,
                          const Tensor *grad_output, LayerResults *results, char *err,
                          size_t err_len);
void layer_results_free(LayerResults *results);

/* Bytes a run of layer on B sequences of T queries and n_k keys needs, about:
 * the inputs and parameters, the projections and their split copies, the
 * (B, H, T, n_k) attention weights twice, the heads' outputs; about twice that
 * with the backward. multihead_check_memory compares it with
 * memory_available (memory.h): 0, or -1 with one line in err saying how much
 * is needed, before anything large is allocated. */
double multihead_bytes_needed(const MultiHeadAttention *layer, int B, int T, int n_k,
                              bool backward);
int multihead_check_memory(const MultiHeadAttention *layer, int B, int T, int n_k, bool backward,
                           char *err, size_t err_len);

#endif
