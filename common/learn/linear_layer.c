/*
 * linear_layer.c - a linear layer's parameters as nn.Linear draws them
 * (introduced in chapter 05's optional section "Attention that learns").
 * See linear_layer.h.
 *
 * Legend: in = in_features, out = out_features.
 */
#include "learn/linear_layer.h"

#include <math.h>

/* -> weight (out, in), bias (out,), their gradients (zeros) */
void linear_layer_new(int out_features, int in_features, Rng *rng, Tensor **weight,
                      Tensor **bias, Tensor **grad_weight, Tensor **grad_bias)
{
    const float bound = 1.0f / sqrtf((float)in_features);
    *weight = tensor_uniform(rng, -bound, bound, SHAPE(out_features, in_features));
    *bias = tensor_uniform(rng, -bound, bound, SHAPE(out_features));
    *grad_weight = tensor_zeros(SHAPE(out_features, in_features));
    *grad_bias = tensor_zeros(SHAPE(out_features));
}
