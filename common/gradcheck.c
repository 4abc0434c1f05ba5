/*
 * gradcheck.c - central finite differences (introduced in chapter 03's
 * optional section "Attention, backwards"). See gradcheck.h.
 */
#include "gradcheck.h"

#include <math.h>

/* x (any shape), loss(ctx) reading x -> numerical dloss/dx (x's shape) */
Tensor *gradcheck_numeric(double (*loss)(void *ctx), void *ctx, Tensor *x, double eps)
{
    if (!(eps > 0.0))
        die("gradcheck_numeric", "the step eps must be positive, got %g", eps);
    Tensor *grad = tensor_zeros(x->ndim, x->shape);
    for (size_t i = 0; i < x->size; i++) {
        const float saved = x->data[i];
        /* x is float32, so x + eps is rounded: divide by the step that was
         * really taken, not by the eps asked for, or a step that is not a
         * float (say 1e-3 next to 0.7) adds its own relative error. */
        const float up = (float)(saved + eps), down = (float)(saved - eps);
        x->data[i] = up;
        const double loss_up = loss(ctx);
        x->data[i] = down;
        const double loss_down = loss(ctx);
        x->data[i] = saved;
        const double step = (double)up - (double)down;
        if (step == 0.0)
            die("gradcheck_numeric", "eps %g is below the float spacing at %g: "
                "the element did not move", eps, (double)saved);
        grad->data[i] = (float)((loss_up - loss_down) / step);
    }
    return grad;
}

/* a, b (the same shape) -> max |a - b| / max(max |b|, tiny) */
double gradcheck_rel_error(const Tensor *a, const Tensor *b)
{
    tensor_check_shape("gradcheck_rel_error", "a", a, b->ndim, b->shape);
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < a->size; i++) {
        const double diff = fabs((double)a->data[i] - (double)b->data[i]);
        if (isnan(diff))
            return NAN;
        if (diff > max_diff)
            max_diff = diff;
        if (fabs((double)b->data[i]) > max_ref)
            max_ref = fabs((double)b->data[i]);
    }
    /* All-zero reference: the absolute error is the only measure left, and
     * a tiny floor keeps it from dividing by 0. */
    const double tiny = 1e-30;
    return max_diff / (max_ref > tiny ? max_ref : tiny);
}

double gradcheck_dot_loss(const Tensor *out, const Tensor *g)
{
    tensor_check_shape("gradcheck_dot_loss", "g", g, out->ndim, out->shape);
    double sum = 0.0;
    for (size_t i = 0; i < out->size; i++)
        sum += (double)out->data[i] * g->data[i];
    return sum;
}
