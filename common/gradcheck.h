/*
 * gradcheck.h - central finite differences, to check a backward pass
 * (introduced in chapter 03's optional section "Attention, backwards").
 *
 * For a scalar loss L(x) and one element x_i,
 *     dL/dx_i ~ (L(x + eps e_i) - L(x - eps e_i)) / (2 eps),
 * whose error is O(eps^2) (truncation) plus about |L| * u / eps (rounding,
 * u the unit roundoff of the arithmetic that computes L): too large a step
 * misses the curvature, too small a step divides rounding noise by eps.
 * Chapter 03's backward program tabulates the two in float32.
 */
#ifndef GRADCHECK_H
#define GRADCHECK_H

#include "tensor.h"

/* loss(ctx) -> a scalar loss (double); x: the tensor to perturb (its data is
 * changed and restored, element by element; the loss must read it through
 * ctx); eps: the step. Returns the numerical gradient, x's shape (new).
 * Two loss calls per element of x. */
Tensor *gradcheck_numeric(double (*loss)(void *ctx), void *ctx, Tensor *x, double eps);

/* out, g (any shape, the same) -> sum(out * g), in double: the loss whose
 * gradient with respect to out is g, which turns any backward into one a
 * finite difference can check (g is grad_output). */
double gradcheck_dot_loss(const Tensor *out, const Tensor *g);

/* max |a - b| / max(max |b|, tiny): the relative error used everywhere,
 * b being the reference. Shapes must match; NaN anywhere gives NaN. */
double gradcheck_rel_error(const Tensor *a, const Tensor *b);

#endif
