/*
 * Exercise 3.5: the values' gradient
 * (03_self_attention/README.md, "Exercises"; backward.md derives it).
 *
 * weights P (B, T, n_k) as the forward returned them (masked ones exactly
 * 0), grad_output dO = dL/doutput (B, T, v) -> grad_values dV = dL/dvalues
 * (B, n_k, v), a new tensor:
 *     dV = P^T dO, sequence by sequence
 *
 * Grade it:  make check EXERCISE=03_self_attention/exercises/attention_grad_values.c
 */
#include "exercises.h"

Tensor *my_attention_grad_values(const Tensor *weights, const Tensor *grad_output)
{
    not_started();   /* delete this line when you begin */
    return tensor_zeros(SHAPE(weights->shape[0], weights->shape[2], grad_output->shape[2]));
}
