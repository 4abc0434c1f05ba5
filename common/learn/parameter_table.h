/*
 * parameter_table.h - a model's parameters, listed once (introduced in
 * chapter 05's optional section "Attention that learns").
 *
 * A model names each of its parameters once, in the order of PyTorch's
 * module, and the table fills both lists a model keeps: the optimiser's
 * (optim.h: one Parameter per tensor, with its gradient; the gradient
 * checks read it too) and the files' (state_dict.h: one ModelFile per
 * entry of PyTorch's state_dict, tensors stacked where PyTorch stacks
 * them). The attention layer's part is one call, in either of the two
 * layouts PyTorch modules give it:
 *
 *   ATTENTION_STACKED, nn.MultiheadAttention:
 *     attention.in_proj_weight (3D, D) = W_q, W_k, W_v    attention.in_proj_bias (3D,)
 *     attention.out_proj.weight (D, D) = W_o              attention.out_proj.bias (D,)
 *   ATTENTION_LINEARS, d2l's MultiHeadAttention (four nn.Linear):
 *     attention.W_q.weight ... attention.W_o.weight       attention.W_q.bias ...
 *
 *     ParameterTable t = parameter_table(m->params, MAX_PARAMS, m->files, MAX_FILES);
 *     parameter_table_add(&t, "embed_keys.weight", m->embed_keys, m->grad_embed_keys);
 *     parameter_table_attention(&t, ATTENTION_STACKED, m->attention, m->grad_attention);
 *     ...
 *     parameter_table_ints(&t, "num_heads", &m->saved_num_heads, 1);
 *
 * A model of several attention layers names each under a prefix of its
 * own in place of "attention." (nn.ModuleList's "layers.0.", "layers.1.",
 * ...): parameter_table_layer writes those names into an array the model
 * keeps (LayerNames), as long as its lists.
 */
#ifndef PARAMETER_TABLE_H
#define PARAMETER_TABLE_H

#include "learn/optim.h"
#include "multihead.h"
#include "state_dict.h"

typedef enum { ATTENTION_STACKED, ATTENTION_LINEARS } AttentionLayout;

typedef struct {
    Parameter *params;
    int num_params, max_params;
    ModelFile *files;          /* NULL: a model that is never saved */
    int num_files, max_files;
} ParameterTable;

/* An empty table over the model's two arrays. */
ParameterTable parameter_table(Parameter *params, int max_params, ModelFile *files,
                               int max_files);
/* One trainable tensor, its own file. */
void parameter_table_add(ParameterTable *t, const char *name, Tensor *value, Tensor *grad);
/* The attention layer's parameters under "attention.", in layout's names. */
void parameter_table_attention(ParameterTable *t, AttentionLayout layout,
                               const MultiHeadAttention *a, const MultiHeadGrads *g);
/* The names of one attention layer under a prefix: at most 10 (stacked,
 * with biases: three parts and their file, for the weights and the biases,
 * and the two out_proj files). */
enum { PARAMETER_LAYER_NAMES = 10, PARAMETER_NAME_LEN = 48 };
typedef char LayerNames[PARAMETER_LAYER_NAMES][PARAMETER_NAME_LEN];
/* The same under prefix in place of "attention." ("layers.0." ->
 * layers.0.in_proj_weight), the names written into names. */
void parameter_table_layer(ParameterTable *t, const char *prefix, LayerNames names,
                           AttentionLayout layout, const MultiHeadAttention *a,
                           const MultiHeadGrads *g);
/* A file of num_ints whole numbers that no shape says (num_heads). */
void parameter_table_ints(ParameterTable *t, const char *name, int *ints, int num_ints);

#endif
