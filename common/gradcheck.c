/*
 * gradcheck.c - central finite differences (introduced in chapter 03's
 * optional section "Attention, backwards"). See gradcheck.h.
 */
#include "gradcheck.h"

#include <math.h>
#include <string.h>

/* x (any shape), loss(ctx) reading x -> numerical dloss/dx (x's shape) */
Tensor *gradcheck_numeric(double (*loss)(void *ctx), void *ctx, Tensor *x, double eps)
{
    if (!(eps > 0.0))
        die("the step eps must be positive, got %g", eps);
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
            die("eps %g is below the float spacing at %g: "
                "the element did not move", eps, (double)saved);
        grad->data[i] = (float)((loss_up - loss_down) / step);
    }
    return grad;
}

/* a, b (the same shape) -> max |a - b| / max(max |b|, tiny) */
double gradcheck_rel_error(const Tensor *a, const Tensor *b)
{
    tensor_check_shape("a", a, b->ndim, b->shape);
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
    tensor_check_shape("g", g, out->ndim, out->shape);
    double sum = 0.0;
    for (size_t i = 0; i < out->size; i++)
        sum += (double)out->data[i] * g->data[i];
    return sum;
}

/* ---- attention in float64 -------------------------------------------------------- */

enum { MAX_N = ATTENTION64_MAX_TOKENS };

static void check_sizes(const Attention64 *p)
{
    if (p->n < 1 || p->n > ATTENTION64_MAX_TOKENS || p->d < 1 ||
        p->d > ATTENTION64_MAX_HIDDENS)
        die("n %d and d %d must be 1 to %d and 1 to %d", p->n, p->d,
            ATTENTION64_MAX_TOKENS, ATTENTION64_MAX_HIDDENS);
}

/* q, k (n, d) -> P = softmax(q k^T / sqrt(d)) (n, n) */
static void weights64(const Attention64 *p, double *P)
{
    const int n = p->n, d = p->d;
    for (int i = 0; i < n; i++) {
        double max = -INFINITY, sum = 0.0;
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int c = 0; c < d; c++)
                s += p->q[i * d + c] * p->k[j * d + c];
            P[i * n + j] = s / sqrt((double)d);
            max = fmax(max, P[i * n + j]);
        }
        for (int j = 0; j < n; j++)
            sum += P[i * n + j] = exp(P[i * n + j] - max);
        for (int j = 0; j < n; j++)
            P[i * n + j] /= sum;
    }
}

double attention64_loss(const Attention64 *p)
{
    check_sizes(p);
    const int n = p->n, d = p->d;
    double P[MAX_N * MAX_N], loss = 0.0;
    weights64(p, P);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < d; c++) {
            double o = 0.0;
            for (int j = 0; j < n; j++)
                o += P[i * n + j] * p->v[j * d + c];
            loss += o * p->g[i * d + c];
        }
    return loss;
}

void attention64_grads(const Attention64 *p, double *grad)
{
    check_sizes(p);
    const int n = p->n, d = p->d, nd = n * d;
    double P[MAX_N * MAX_N], dS[MAX_N * MAX_N];
    weights64(p, P);
    memset(grad, 0, 3 * (size_t)nd * sizeof(double));
    for (int i = 0; i < n; i++) {
        double dP[MAX_N], dot = 0.0;
        for (int j = 0; j < n; j++) {
            dP[j] = 0.0;
            for (int c = 0; c < d; c++) {
                dP[j] += p->g[i * d + c] * p->v[j * d + c];          /* dP = dO V^T */
                grad[2 * nd + j * d + c] += P[i * n + j] * p->g[i * d + c];   /* dV */
            }
            dot += dP[j] * P[i * n + j];
        }
        for (int j = 0; j < n; j++)
            dS[i * n + j] = P[i * n + j] * (dP[j] - dot) / sqrt((double)d);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int c = 0; c < d; c++) {
                grad[i * d + c] += dS[i * n + j] * p->k[j * d + c];        /* dQ */
                grad[nd + j * d + c] += dS[i * n + j] * p->q[i * d + c];   /* dK */
            }
}

void attention64_numeric(Attention64 *p, double eps, double *grad)
{
    const int nd = p->n * p->d;
    double *inputs[3] = {p->q, p->k, p->v};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < nd; i++) {
            const double original = inputs[t][i];
            inputs[t][i] = original + eps;
            const double up = attention64_loss(p);
            inputs[t][i] = original - eps;
            const double down = attention64_loss(p);
            inputs[t][i] = original;
            grad[t * nd + i] = (up - down) / (2.0 * eps);
        }
}

double gradcheck_rel_error64(const double *a, const double *exact, int count)
{
    double diff = 0.0, scale = 0.0;
    for (int i = 0; i < count; i++) {
        diff = fmax(diff, fabs(a[i] - exact[i]));
        scale = fmax(scale, fabs(exact[i]));
    }
    return diff / scale;
}
