/*
 * linear_layer.h - a linear layer's parameters as PyTorch's nn.Linear
 * draws them, with their gradients: the readout every model here ends
 * with, and the two-key model's MLP (introduced in chapter 05's optional
 * section "Attention that learns"). The layer runs as ops.h's linear and
 * linear_backward.
 *
 * Legend: in = in_features, out = out_features.
 *
 * nn.Linear.reset_parameters draws the weight with kaiming_uniform_
 * (a = sqrt(5)), whose bound works out to 1 / sqrt(in), then the bias with
 * the same bound: uniform in [-bound, bound), the weight first.
 */
#ifndef LINEAR_LAYER_H
#define LINEAR_LAYER_H

#include "random.h"
#include "tensor.h"

/* -> weight (out, in) and bias (out,) drawn from rng in that order;
 * grad_weight (out, in) and grad_bias (out,) zero. */
void linear_layer_new(int out_features, int in_features, Rng *rng, Tensor **weight,
                      Tensor **bias, Tensor **grad_weight, Tensor **grad_bias);

#endif
