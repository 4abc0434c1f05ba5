/*
 * parameter_table.c - a model's parameters, listed once (introduced in
 * chapter 05's optional section "Attention that learns"). See
 * parameter_table.h.
 */
#include "learn/parameter_table.h"

#include <stdio.h>

#include "error.h"

ParameterTable parameter_table(Parameter *params, int max_params, ModelFile *files,
                               int max_files)
{
    return (ParameterTable){params, 0, max_params, files, 0, max_files};
}

static void add_parameter(ParameterTable *t, const char *name, Tensor *value, Tensor *grad)
{
    if (t->num_params >= t->max_params)
        die("%s: more than the model's %d parameters", name, t->max_params);
    t->params[t->num_params++] = (Parameter){name, value, grad};
}

/* the file of parts[0..n), stacked along dimension 0 */
static void add_file(ParameterTable *t, ModelFile file)
{
    if (t->files == NULL)
        return;
    if (t->num_files >= t->max_files)
        die("%s: more than the model's %d files", file.name, t->max_files);
    t->files[t->num_files++] = file;
}

void parameter_table_add(ParameterTable *t, const char *name, Tensor *value, Tensor *grad)
{
    add_parameter(t, name, value, grad);
    add_file(t, (ModelFile){.name = name, .parts = {value}});
}

void parameter_table_ints(ParameterTable *t, const char *name, int *ints, int num_ints)
{
    add_file(t, (ModelFile){.name = name, .ints = ints, .num_ints = num_ints});
}

/* How the attention layer's names are written: as they are, or (a layer
 * of several) under prefix in place of "attention.", into names. */
typedef struct {
    const char *prefix;   /* NULL: as they are */
    char (*names)[PARAMETER_NAME_LEN];
    int count;
} Naming;

static const char *layer_name(Naming *naming, const char *name)
{
    static const char attention[] = "attention.";
    if (naming->prefix == NULL)
        return name;
    if (naming->count >= PARAMETER_LAYER_NAMES)
        die("%s: more than a layer's %d names", name, PARAMETER_LAYER_NAMES);
    char *kept = naming->names[naming->count++];
    const int n = snprintf(kept, PARAMETER_NAME_LEN, "%s%s", naming->prefix,
                           name + sizeof attention - 1);
    if (n < 0 || n >= PARAMETER_NAME_LEN)
        die("%s%s: a name longer than %d characters", naming->prefix,
            name + sizeof attention - 1, PARAMETER_NAME_LEN - 1);
    return kept;
}

/* nn.MultiheadAttention: Adam works element by element, so W_q, W_k and
 * W_v as three tensors step exactly as the one stacked in_proj_weight */
static void add_stacked(ParameterTable *t, Naming *n, const MultiHeadAttention *a,
                        const MultiHeadGrads *g)
{
    add_parameter(t, layer_name(n, "attention.in_proj_weight[W_q]"), a->W_q, g->W_q);
    add_parameter(t, layer_name(n, "attention.in_proj_weight[W_k]"), a->W_k, g->W_k);
    add_parameter(t, layer_name(n, "attention.in_proj_weight[W_v]"), a->W_v, g->W_v);
    add_file(t, (ModelFile){.name = layer_name(n, "attention.in_proj_weight"),
                            .parts = {a->W_q, a->W_k, a->W_v}});
    if (a->bias) {
        add_parameter(t, layer_name(n, "attention.in_proj_bias[b_q]"), a->b_q, g->b_q);
        add_parameter(t, layer_name(n, "attention.in_proj_bias[b_k]"), a->b_k, g->b_k);
        add_parameter(t, layer_name(n, "attention.in_proj_bias[b_v]"), a->b_v, g->b_v);
        add_file(t, (ModelFile){.name = layer_name(n, "attention.in_proj_bias"),
                                .parts = {a->b_q, a->b_k, a->b_v}});
    }
    parameter_table_add(t, layer_name(n, "attention.out_proj.weight"), a->W_o, g->W_o);
    if (a->bias)
        parameter_table_add(t, layer_name(n, "attention.out_proj.bias"), a->b_o, g->b_o);
}

/* d2l's four nn.Linear, in the module's order: each weight, then its bias */
static void add_linears(ParameterTable *t, Naming *n, const MultiHeadAttention *a,
                        const MultiHeadGrads *g)
{
    static const char *const names[4][2] = {
        {"attention.W_q.weight", "attention.W_q.bias"}, {"attention.W_k.weight", "attention.W_k.bias"},
        {"attention.W_v.weight", "attention.W_v.bias"}, {"attention.W_o.weight", "attention.W_o.bias"},
    };
    Tensor *const weights[4] = {a->W_q, a->W_k, a->W_v, a->W_o};
    Tensor *const biases[4] = {a->b_q, a->b_k, a->b_v, a->b_o};
    Tensor *const grad_weights[4] = {g->W_q, g->W_k, g->W_v, g->W_o};
    Tensor *const grad_biases[4] = {g->b_q, g->b_k, g->b_v, g->b_o};
    for (int i = 0; i < 4; i++) {
        parameter_table_add(t, layer_name(n, names[i][0]), weights[i], grad_weights[i]);
        if (a->bias)
            parameter_table_add(t, layer_name(n, names[i][1]), biases[i], grad_biases[i]);
    }
}

static void add_layer(ParameterTable *t, Naming *n, AttentionLayout layout,
                      const MultiHeadAttention *a, const MultiHeadGrads *g)
{
    if (layout == ATTENTION_STACKED)
        add_stacked(t, n, a, g);
    else
        add_linears(t, n, a, g);
}

void parameter_table_attention(ParameterTable *t, AttentionLayout layout,
                               const MultiHeadAttention *a, const MultiHeadGrads *g)
{
    Naming as_they_are = {NULL, NULL, 0};
    add_layer(t, &as_they_are, layout, a, g);
}

void parameter_table_layer(ParameterTable *t, const char *prefix, LayerNames names,
                           AttentionLayout layout, const MultiHeadAttention *a,
                           const MultiHeadGrads *g)
{
    Naming under_prefix = {prefix, names, 0};
    add_layer(t, &under_prefix, layout, a, g);
}
