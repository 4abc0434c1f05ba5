/*
 * optim.c - parameters, Adam and SGD (introduced in chapter 05's optional
 * section "Attention that learns"). See optim.h.
 *
 * Adam follows torch.optim.Adam (PyTorch 1.13, the single-tensor path)
 * operation by operation, in float32 like the tensors it updates, with
 * the step-dependent scalars in double as Python computes them; that is
 * what lets a few steps match PyTorch's to float rounding.
 */
#include "learn/optim.h"
#include "learn/adamw.h"
#include "learn/internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void parameters_zero_grad(const Parameter *params, int count)
{
    for (int i = 0; i < count; i++)
        memset(params[i].grad->data, 0, params[i].grad->size * sizeof(float));
}

size_t parameters_count(const Parameter *params, int count)
{
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += params[i].value->size;
    return total;
}

/* Every number of the values (or of the gradients) finite. A float is not
 * finite when its eight exponent bits are all ones (an infinity or a NaN);
 * the test runs on the bits, without a branch, so the loop runs in vectors,
 * and a chunk's answers are looked at when the chunk ends. */
static bool all_finite(const Parameter *params, int count, bool grads)
{
    enum { CHUNK = 4096 };
    const uint32_t exponent = 0x7f800000u;
    for (int i = 0; i < count; i++) {
        const Tensor *x = grads ? params[i].grad : params[i].value;
        for (size_t start = 0; start < x->size; start += CHUNK) {
            const size_t end = x->size - start < CHUNK ? x->size : start + CHUNK;
            uint32_t not_finite = 0;
            for (size_t j = start; j < end; j++) {
                uint32_t bits;
                memcpy(&bits, &x->data[j], sizeof bits);
                not_finite |= (bits & exponent) == exponent;
            }
            if (not_finite)
                return false;
        }
    }
    return true;
}

bool parameters_grads_finite(const Parameter *params, int count)
{
    return all_finite(params, count, true);
}

bool parameters_finite(const Parameter *params, int count)
{
    return all_finite(params, count, false);
}

/* Stop unless each gradient has its value's shape. */
static void check_params(const Parameter *params, int count)
{
    for (int i = 0; i < count; i++) {
        const Tensor *value = params[i].value;
        tensor_check_shape(params[i].name, params[i].grad, value->ndim, value->shape);
    }
}

double squares_sum(const float *x, size_t n)
{
    enum { SUMS = 8 };
    double sums[SUMS] = {0};
    size_t j = 0;
    for (; j + SUMS <= n; j += SUMS)
#pragma GCC unroll 8   /* so that the eight sums live in registers */
        for (int s = 0; s < SUMS; s++)
            sums[s] += (double)x[j + s] * x[j + s];
    for (int s = 0; j + s < n; s++)   /* the last few, each to its own sum */
        sums[s] += (double)x[j + s] * x[j + s];
    return ((sums[0] + sums[1]) + (sums[2] + sums[3])) +
           ((sums[4] + sums[5]) + (sums[6] + sums[7]));
}

double parameters_clip_grad_norm(const Parameter *params, int count, double max_norm)
{
    double square_sum = 0.0;
    for (int i = 0; i < count; i++)
        square_sum += squares_sum(params[i].grad->data, params[i].grad->size);
    const double norm = sqrt(square_sum);
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        for (int i = 0; i < count; i++) {
            Tensor *g = params[i].grad;
            for (size_t j = 0; j < g->size; j++)
                g->data[j] *= (float)coef;
        }
    return norm;
}

Adam *adam_new(const Parameter *params, int count, float lr)
{
    check_params(params, count);
    Adam *adam = checked_calloc(1, sizeof *adam);
    adam->lr = lr;
    adam->beta1 = 0.9f;
    adam->beta2 = 0.999f;
    adam->eps = 1e-8f;
    adam->count = count;
    adam->params = params;
    adam->m = checked_calloc((size_t)count, sizeof *adam->m);
    adam->v = checked_calloc((size_t)count, sizeof *adam->v);
    for (int i = 0; i < count; i++) {
        adam->m[i] = tensor_zeros(params[i].value->ndim, params[i].value->shape);
        adam->v[i] = tensor_zeros(params[i].value->ndim, params[i].value->shape);
    }
    return adam;
}

void adam_update_part(const Adam *adam, int part, int parts)
{
    for (int i = 0; i < adam->count; i++) {
        const Tensor *value = adam->params[i].value;
        const size_t start = value->size * (size_t)part / (size_t)parts;
        const size_t end = value->size * (size_t)(part + 1) / (size_t)parts;
        /* AdamW decays matrices only (optim.h); Adam decays nothing */
        const float weight_decay = value->ndim >= 2 ? adam->weight_decay : 0.0f;
        adamw_update(value->data + start, adam->params[i].grad->data + start,
                     adam->m[i]->data + start, adam->v[i]->data + start, end - start,
                     adam->step, adam->lr, adam->beta1, adam->beta2, adam->eps, weight_decay);
    }
}

void adam_step(Adam *adam)
{
    adam->step++;
    adam_update_part(adam, 0, 1);
}

void adam_free(Adam *adam)
{
    if (adam == NULL)
        return;
    for (int i = 0; i < adam->count; i++) {
        tensor_free(adam->m[i]);
        tensor_free(adam->v[i]);
    }
    free(adam->m);
    free(adam->v);
    free(adam);
}

AdamSnapshot *adam_snapshot_new(const Adam *adam)
{
    AdamSnapshot *s = checked_calloc(1, sizeof *s);
    s->count = adam->count;
    s->values = checked_calloc((size_t)adam->count, sizeof *s->values);
    s->m = checked_calloc((size_t)adam->count, sizeof *s->m);
    s->v = checked_calloc((size_t)adam->count, sizeof *s->v);
    for (int i = 0; i < adam->count; i++) {
        s->values[i] = tensor_copy(adam->params[i].value);
        s->m[i] = tensor_copy(adam->m[i]);
        s->v[i] = tensor_copy(adam->v[i]);
    }
    s->step = adam->step;
    return s;
}

/* dst = src, two tensors of the same size */
static void copy_data(Tensor *dst, const Tensor *src)
{
    memcpy(dst->data, src->data, src->size * sizeof(float));
}

void adam_snapshot_take(AdamSnapshot *s, const Adam *adam)
{
    for (int i = 0; i < s->count; i++) {
        copy_data(s->values[i], adam->params[i].value);
        copy_data(s->m[i], adam->m[i]);
        copy_data(s->v[i], adam->v[i]);
    }
    s->step = adam->step;
}

void adam_snapshot_restore(const AdamSnapshot *s, Adam *adam)
{
    for (int i = 0; i < s->count; i++) {
        copy_data(adam->params[i].value, s->values[i]);
        copy_data(adam->m[i], s->m[i]);
        copy_data(adam->v[i], s->v[i]);
    }
    adam->step = s->step;
}

void adam_snapshot_free(AdamSnapshot *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->count; i++) {
        tensor_free(s->values[i]);
        tensor_free(s->m[i]);
        tensor_free(s->v[i]);
    }
    free(s->values);
    free(s->m);
    free(s->v);
    free(s);
}

void sgd_step(const Parameter *params, int count, float lr)
{
    check_params(params, count);
    for (int i = 0; i < count; i++) {
        float *p = params[i].value->data;
        const float *g = params[i].grad->data;
        for (size_t j = 0; j < params[i].value->size; j++)
            p[j] -= lr * g[j];
    }
}
