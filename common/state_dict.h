/*
 * state_dict.h - a model as a list of named parameters (introduced in
 * chapter 05's optional section "Attention that learns").
 *
 * PyTorch's module.state_dict() is a list of (name, tensor) pairs; a model
 * here describes itself the same way, with the names PyTorch gives the same
 * parameters, so that the file code (io/model.h) can save and load any
 * model without knowing it, and a few lines of Python rebuild the module.
 *
 * One entry may hold several C tensors stacked along their first dimension:
 * nn.MultiheadAttention keeps W_q, W_k and W_v as one in_proj_weight (3 D, D)
 * and their biases as one in_proj_bias (3 D,), where our layer has four
 * tensors per projection. An entry may instead hold a few whole numbers,
 * for what a model needs that no shape says (its number of heads).
 */
#ifndef STATE_DICT_H
#define STATE_DICT_H

#include <stdbool.h>

#include "tensor.h"

enum { MODEL_MAX_PARTS = 4 };

typedef struct {
    const char *name;                 /* "attention.in_proj_weight" */
    Tensor *parts[MODEL_MAX_PARTS];   /* stacked along dimension 0; unused ones NULL */
    int *ints;                        /* instead of parts: num_ints whole numbers */
    int num_ints;
    bool nonnegative;                 /* loading refuses a negative number (Adam's v) */
} ModelFile;

#endif
