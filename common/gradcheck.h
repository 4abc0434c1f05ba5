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

/* ---- attention in float64 --------------------------------------------------
 * The same attention and loss L = sum(O * G) in double, for one sequence of
 * n tokens of size d: q, k, v, g (n, d), row-major. Its formula gradient is
 * the exact answer a float32 finite difference is measured against (chapter
 * 03's backward, Part 4: truncation against rounding). */
enum { ATTENTION64_MAX_TOKENS = 8, ATTENTION64_MAX_HIDDENS = 4 };

typedef struct {
    int n, d;
    double q[ATTENTION64_MAX_TOKENS * ATTENTION64_MAX_HIDDENS];
    double k[ATTENTION64_MAX_TOKENS * ATTENTION64_MAX_HIDDENS];
    double v[ATTENTION64_MAX_TOKENS * ATTENTION64_MAX_HIDDENS];
    double g[ATTENTION64_MAX_TOKENS * ATTENTION64_MAX_HIDDENS];
} Attention64;

double attention64_loss(const Attention64 *p);
/* the passes of the backward in double -> grad (3, n, d): dQ, dK, dV */
void attention64_grads(const Attention64 *p, double *grad);
/* central differences in double over q, k, v -> grad (3, n, d); p's
 * inputs are moved and put back */
void attention64_numeric(Attention64 *p, double eps, double *grad);
/* a, exact (count,) -> max |a - exact| / max |exact| */
double gradcheck_rel_error64(const double *a, const double *exact, int count);

#endif
