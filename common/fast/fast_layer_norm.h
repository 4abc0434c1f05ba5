/*
 * fast_layer_norm.h - layer normalisation with FAST_VEC rows side by side
 * in vector lanes, the same bits as learn/layer_norm.h's (chapter 06's
 * language model, its share of a training step).
 *
 * Legend: R = rows, D = num_hiddens.
 *
 * Each row's sums (its mean, its variance, the backward's two means) are
 * chains over j: an addition waits for the one before it. The clear code
 * runs one row at a time; layer_norm_forward_grouped runs eight side by
 * side but gathers each of their columns one float at a time. Here a
 * square of FAST_VEC rows by FAST_VEC columns is loaded as rows and
 * turned in registers into columns (a transpose, a few rounds of
 * shuffles), so lane g of every vector belongs to row g: FAST_VEC chains
 * in flight, every addition in the clear code's order. The parts with no
 * sum across j (y, grad_x, and the parameters' gradients summed over the
 * rows in order) run along each row, a vector of j at a time.
 *
 * The file is compiled without fused multiply-adds (the Makefile): every
 * product is rounded on its own, as in learn/'s code, so the results are
 * the same bits (tests/test_fast.c compares them).
 */
#ifndef FAST_LAYER_NORM_H
#define FAST_LAYER_NORM_H

/* x (R, D) -> y (R, D), mean (R,), rstd (R,), with eps added to each
 * variance (learn/layer_norm.h's LAYER_NORM_EPS gives layer_norm_forward's
 * bits) */
void fast_layer_norm_forward(const float *x, const float *weight, const float *bias, float eps,
                             float *y, float *mean, float *rstd, int rows, int D);

/* grad_y (R, D) -> grad_x (R, D) +=, grad_weight (D,) +=, grad_bias (D,)
 * +=: layer_norm_backward's bits */
void fast_layer_norm_backward(const float *grad_y, const float *x, const float *weight,
                              const float *mean, const float *rstd, float *grad_x,
                              float *grad_weight, float *grad_bias, int rows, int D);

#endif
