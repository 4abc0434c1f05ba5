/*
 * test_language_model.c - chapter 06's character-level GPT
 * (common/learn/language_model.c) and its new parts: the loss and every
 * gradient, and three AdamW steps with clipping, against PyTorch
 * autograd; layer norm and GELU against float64 and its finite
 * differences; the whole backward (the MLP, the tied unembedding, every
 * other parameter) against finite differences; the fast kernels against
 * the clear ones; the cached decoder against the full forward, bit for
 * bit, and sampling's restart of a full window; the learning rate's
 * schedule; the loss over a text; a model saved and loaded back; the
 * program's own AdamW settings and initialisation, through the functions
 * it calls.
 *
 * Legend: B = batch_size, T = tokens of a sequence, C = context,
 * V = vocabulary, D = num_hiddens, H = num_heads, N = num_layers,
 * R = rows of a layer norm.
 *
 * The PyTorch reference is in tests/fixtures/language_model/, made by
 * tests/fixtures/make_language_model_fixtures.py.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../06_permutation_invariance/language_ladder.h"
#include "../06_permutation_invariance/language_run.h"
#include "../06_permutation_invariance/language_step.h"
#include "fast/fast_exp.h"
#include "gradcheck.h"
#include "helpers.h"
#include "io/model.h"
#include "io/npy.h"
#include "learn/language_model.h"
#include "learn/layer_norm.h"
#include "learn/loss.h"
#include "learn/mlp.h"
#include "learn/optim.h"
#include "run/saved_models.h"
#include "tensor.h"

#define FIXTURE "tests/fixtures/language_model"

/* The fixture's sizes, as make_language_model_fixtures.py sets them. */
enum { VOCAB = 11, CONTEXT = 8, HIDDENS = 12, HEADS = 3, LAYERS = 2, BATCH = 2, STEPS = 3 };
static const int BYTES[VOCAB] = {10, 32, 33, 97, 98, 99, 100, 101, 102, 103, 104};
/* its schedule and optimiser */
static const double LR = 0.01, MIN_LR = 0.001, MAX_NORM = 1.0;
enum { WARMUP = 1, DECAY_STEPS = 4 };

static LanguageModel *load_model(const char *dir)
{
    Rng rng = rng_new(0);
    LanguageModel *model = language_model_new(BYTES, VOCAB, CONTEXT, HIDDENS, HEADS, LAYERS,
                                              &rng);
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_load(dir, model->files, model->num_files, err, sizeof err), 0, "%s", err);
    cr_assert_eq(model->saved_heads, HEADS);
    cr_assert_eq(model->saved_layers, LAYERS);
    cr_assert_eq(memcmp(model->bytes, BYTES, sizeof BYTES), 0);
    return model;
}

/* a fixture file of (STEPS,) float64 numbers -> (STEPS,) floats (new) */
static Tensor *load_per_step(const char *path)
{
    char err[NPY_ERR_LEN];
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert(x, "%s", err);
    cr_assert(x->ndim == 1 && x->shape[0] == STEPS, "%s", path);
    return x;
}

/* ---- against PyTorch autograd --------------------------------------------------- */

/* The key bias b_k has no gradient: it adds q . b_k to every score of a
 * query, the same number for every key, and softmax ignores a shift. Its
 * computed gradient (PyTorch's too) is what rounding leaves of a sum that
 * is 0, so it is compared with the model's largest gradient, and Adam,
 * which divides a gradient by its own size, moves b_k by noise. */
static bool is_key_bias(const Parameter *p)
{
    return strstr(p->name, "[b_k]") != NULL;
}

/* the largest |number| of all the parameters' gradients, or of their
 * values (a model loaded from grads/ holds PyTorch's gradients as values) */
static float largest_grad(const Parameter *params, int count, bool values)
{
    float largest = 0.0f;
    for (int i = 0; i < count; i++)
        largest = fmaxf(largest, tensor_max_abs(values ? params[i].value : params[i].grad));
    return largest;
}

Test(language_model, loss_and_gradients_equal_pytorch_autograd)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    LanguageModel *expected = load_model(FIXTURE "/grads");   /* gradients as values */
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, CONTEXT + 1);
    Tensor *losses = load_per_step(FIXTURE "/losses.npy");

    const double loss = language_model_loss_grad(model, tokens, BATCH, CONTEXT);
    cr_expect(fabs(loss - losses->data[0]) <= 1e-5 * fabs(losses->data[0]),
              "loss %.7f, PyTorch %.7f", loss, (double)losses->data[0]);
    cr_assert_eq(model->num_params, 4 + LM_BLOCK_PARAMS * LAYERS);
    const float largest = largest_grad(expected->params, expected->num_params, true);
    for (int i = 0; i < model->num_params; i++) {
        const Parameter *p = &model->params[i];
        const Tensor *want = expected->params[i].value;
        if (is_key_bias(p)) {
            cr_expect_lt(tensor_max_abs(p->grad), 1e-6f * largest, "%s", p->name);
            cr_expect_lt(tensor_max_abs(want), 1e-6f * largest, "PyTorch's %s", p->name);
            continue;
        }
        /* 1e-5 relative, and 1e-5 of the tensor's largest gradient for
         * the elements near 0 (sums that cancel) */
        const float atol = 1e-5f * tensor_max_abs(want);
        cr_expect(tensor_allclose(p->grad, want, atol, 1e-5f, stderr), "%s", p->name);
        /* and the gradient is not all zeros: the comparison compares something */
        cr_expect_gt(tensor_max_abs(want), 1e-4f, "%s", p->name);
    }
    tensor_free(losses);
    free(tokens);
    language_model_free(expected);
    language_model_free(model);
}

/* The fixture's AdamW is the program's (betas (0.9, 0.99), eps 1e-8,
 * weight decay 0.1 on matrices), at the fixture's learning rate. */
static Adam *fixture_adamw(LanguageModel *model)
{
    LanguageTraining t = LANGUAGE_TRAINING;
    t.lr = LR;
    return language_adamw_new(model, &t);
}

Test(language_model, three_clipped_adamw_steps_equal_pytorch)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    LanguageModel *expected = load_model(FIXTURE "/after_3_steps");
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, CONTEXT + 1);
    Tensor *losses = load_per_step(FIXTURE "/losses.npy");
    Tensor *rates = load_per_step(FIXTURE "/learning_rates.npy");
    Adam *adam = fixture_adamw(model);
    for (int step = 0; step < STEPS; step++) {
        adam->lr = (float)lm_learning_rate(step, LR, MIN_LR, WARMUP, DECAY_STEPS);
        cr_expect_eq(adam->lr, rates->data[step], "step %d: learning rate %.9g, PyTorch %.9g",
                     step, (double)adam->lr, (double)rates->data[step]);
        const int *batch = tokens + (size_t)step * BATCH * (CONTEXT + 1);
        const double loss = language_model_train_step(model, adam, batch, BATCH, MAX_NORM);
        cr_expect(fabs(loss - losses->data[step]) <= 1e-5 * fabs(losses->data[step]),
                  "step %d: loss %.7f, PyTorch %.7f", step, loss, (double)losses->data[step]);
    }
    for (int i = 0; i < model->num_params; i++) {
        const Parameter *p = &model->params[i];
        /* b_k moved by rounding noise: at most about lr a step, on either side */
        const float atol = is_key_bias(p) ? 2.0f * STEPS * (float)LR : 1e-6f;
        cr_expect(tensor_allclose(p->value, expected->params[i].value, atol, 1e-5f, stderr),
                  "%s after %d steps", p->name, STEPS);
    }
    adam_free(adam);
    TENSOR_FREE(losses, rates);
    free(tokens);
    language_model_free(expected);
    language_model_free(model);
}

/* The optimiser the program trains with (language_adamw_new with its
 * defaults, LANGUAGE_TRAINING) is nanoGPT's: lr 1e-3, betas (0.9, 0.99),
 * eps 1e-8, weight decay 0.1 on the matrices (wte, wpe, every weight of
 * attention and of the MLP) and on nothing else (biases, layer norms).
 * Every value 1 and every gradient 0.5: after one step m = 0.05,
 * v = 0.0025 (0.00025 with beta2 0.999), and a value moves by lr, after
 * decaying to 1 - lr * 0.1 when it is a matrix's. */
Test(language_model, the_programs_adamw_is_nanogpts)
{
    Rng rng = rng_new(1);
    LanguageModel *model = language_model_new(BYTES, VOCAB, CONTEXT, HIDDENS, HEADS, LAYERS,
                                              &rng);
    const LanguageTraining t = LANGUAGE_TRAINING;
    Adam *adam = language_adamw_new(model, &t);
    cr_expect_eq(adam->lr, 1e-3f);
    cr_expect_eq(adam->beta1, 0.9f);
    cr_expect_eq(adam->beta2, 0.99f);
    cr_expect_eq(adam->eps, 1e-8f);
    cr_expect_eq(adam->weight_decay, 0.1f);
    for (int i = 0; i < model->num_params; i++)
        for (size_t j = 0; j < model->params[i].value->size; j++) {
            model->params[i].value->data[j] = 1.0f;
            model->params[i].grad->data[j] = 0.5f;
        }
    adam_step(adam);
    int decayed = 0;
    for (int i = 0; i < model->num_params; i++) {
        const char *name = model->params[i].name;
        const bool decays = strstr(name, "ln_") == NULL && strstr(name, "bias") == NULL;
        decayed += decays;
        const float expected = decays ? 1.0f - 1e-3f * 0.1f - 1e-3f : 1.0f - 1e-3f;
        const Tensor *value = model->params[i].value;
        for (size_t j = 0; j < value->size; j++)
            cr_assert_float_eq(value->data[j], expected, 1e-6f, "%s[%zu] = %.7f, expected %.7f",
                               name, j, (double)value->data[j], (double)expected);
        cr_assert_float_eq(adam->m[i]->data[0], 0.05f, 1e-7f, "%s: m", name);
        cr_assert_float_eq(adam->v[i]->data[0], 0.0025f, 1e-7f, "%s: v = %.7g", name,
                           (double)adam->v[i]->data[0]);
    }
    /* wte, wpe; per block W_q, W_k, W_v, out_proj, fc, proj */
    cr_expect_eq(decayed, 2 + 6 * LAYERS);
    adam_free(adam);
    language_model_free(model);
}

/* The initialisation the program draws (language_model_new), nanoGPT's:
 * every weight and embedding N(0, 0.02); the two projections into the
 * stream, attn.out_proj and mlp.proj, N(0, 0.02 / sqrt(2 N)); biases 0,
 * layer norms' weights 1. The standard deviation of each matrix is within
 * 6% (more than 4 standard errors at 4,096 draws) and its mean within 4
 * standard errors of 0. */
Test(language_model, initialisation_is_nanogpts)
{
    enum { V = 65, C = 64, D = 64, H = 4, N = 4 };
    int bytes[V];
    for (int i = 0; i < V; i++)
        bytes[i] = 32 + i;
    Rng rng = rng_new(7);
    LanguageModel *model = language_model_new(bytes, V, C, D, H, N, &rng);
    int residual = 0, plain = 0;
    for (int i = 0; i < model->num_params; i++) {
        const char *name = model->params[i].name;
        const Tensor *x = model->params[i].value;
        if (x->ndim == 1) {
            const float expected = strstr(name, "ln_") && strstr(name, "weight") ? 1.0f : 0.0f;
            for (size_t j = 0; j < x->size; j++)
                cr_assert_eq(x->data[j], expected, "%s[%zu] = %g", name, j, (double)x->data[j]);
            continue;
        }
        const bool into_stream = strstr(name, "out_proj.weight") || strstr(name, "mlp.proj");
        residual += into_stream;
        plain += !into_stream;
        const double std_expected = into_stream ? 0.02 / sqrt(2.0 * N) : 0.02;
        double sum = 0.0, squares = 0.0;
        for (size_t j = 0; j < x->size; j++) {
            sum += x->data[j];
            squares += (double)x->data[j] * x->data[j];
        }
        const double n = (double)x->size, mean = sum / n;
        const double std = sqrt(squares / n - mean * mean);
        cr_expect(fabs(std - std_expected) < 0.06 * std_expected,
                  "%s: std %.5f, expected %.5f", name, std, std_expected);
        cr_expect(fabs(mean) < 4.0 * std_expected / sqrt(n), "%s: mean %.6f", name, mean);
    }
    cr_expect_eq(residual, 2 * N);
    cr_expect_eq(plain, 2 + 4 * N);   /* wte, wpe; W_q, W_k, W_v and fc per block */
    language_model_free(model);
}

/* The norm that clipping measures is PyTorch's, every step of the fixture
 * passes max_norm (so the steps above check clipping), and after clipping
 * the norm is max_norm. */
Test(language_model, clipping_scales_the_gradient_norm_to_max_norm)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, CONTEXT + 1);
    Tensor *norms = load_per_step(FIXTURE "/grad_norms.npy");
    for (int step = 0; step < STEPS; step++)
        cr_expect_gt(norms->data[step], 2.0 * MAX_NORM, "step %d: norm %.4f", step,
                     (double)norms->data[step]);
    language_model_loss_grad(model, tokens, BATCH, CONTEXT);
    const double norm = parameters_clip_grad_norm(model->params, model->num_params, MAX_NORM);
    cr_expect(fabs(norm - norms->data[0]) <= 1e-5 * norms->data[0], "norm %.7f, PyTorch %.7f",
              norm, (double)norms->data[0]);
    const double clipped = parameters_clip_grad_norm(model->params, model->num_params, 1e9);
    cr_expect(fabs(clipped - MAX_NORM) <= 1e-5, "norm after clipping %.7f", clipped);
    tensor_free(norms);
    free(tokens);
    language_model_free(model);
}

/* ---- layer norm and GELU against float64 ------------------------------------------ */

/* x (R, D) -> y (R, D), nn.LayerNorm's formula in double */
static void layer_norm64(const double *x, const double *weight, const double *bias, double *y,
                         int rows, int D)
{
    for (int r = 0; r < rows; r++) {
        const double *x_row = x + r * D;
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < D; j++)
            mean += x_row[j] / D;
        for (int j = 0; j < D; j++)
            var += (x_row[j] - mean) * (x_row[j] - mean) / D;
        for (int j = 0; j < D; j++)
            y[r * D + j] = (x_row[j] - mean) / sqrt(var + (double)LAYER_NORM_EPS) * weight[j] +
                           bias[j];
    }
}

enum { LN_ROWS = 3, LN_D = 7 };

/* the inputs of the layer norm checks, each as float64 */
typedef struct {
    double x[LN_ROWS * LN_D], weight[LN_D], bias[LN_D], grad_y[LN_ROWS * LN_D];
} LayerNormCase;

/* L = sum(layer_norm64(x) * grad_y): its gradients are the backward's */
static double layer_norm64_loss(const LayerNormCase *c)
{
    double y[LN_ROWS * LN_D], loss = 0.0;
    layer_norm64(c->x, c->weight, c->bias, y, LN_ROWS, LN_D);
    for (int i = 0; i < LN_ROWS * LN_D; i++)
        loss += y[i] * c->grad_y[i];
    return loss;
}

/* central differences of L in double over values[0 .. n) -> grad (n,) */
static void numeric64(LayerNormCase *c, double *values, int n, double *grad)
{
    const double eps = 1e-6;
    for (int i = 0; i < n; i++) {
        const double kept = values[i];
        values[i] = kept + eps;
        const double up = layer_norm64_loss(c);
        values[i] = kept - eps;
        const double down = layer_norm64_loss(c);
        values[i] = kept;
        grad[i] = (up - down) / (2.0 * eps);
    }
}

static void to_double(const float *x, double *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = x[i];
}

Test(language_model, layer_norm_equals_float64_and_its_finite_differences)
{
    // rows with a mean far from 0 and different spreads; scales and shifts not 1 and 0
    Rng rng = rng_new(11);
    float x[LN_ROWS * LN_D], weight[LN_D], bias[LN_D], grad_y[LN_ROWS * LN_D];
    for (int r = 0; r < LN_ROWS; r++)
        for (int j = 0; j < LN_D; j++)
            x[r * LN_D + j] = 2.0f * (float)r - 1.0f + (0.5f + r) * rng_normal(&rng);
    for (int j = 0; j < LN_D; j++) {
        weight[j] = 1.0f + 0.5f * rng_normal(&rng);
        bias[j] = 0.3f * rng_normal(&rng);
    }
    for (int i = 0; i < LN_ROWS * LN_D; i++)
        grad_y[i] = rng_normal(&rng);
    LayerNormCase c;
    to_double(x, c.x, LN_ROWS * LN_D);
    to_double(weight, c.weight, LN_D);
    to_double(bias, c.bias, LN_D);
    to_double(grad_y, c.grad_y, LN_ROWS * LN_D);

    // the forward, and its statistics, against float64
    float y[LN_ROWS * LN_D], mean[LN_ROWS], rstd[LN_ROWS];
    layer_norm_forward(x, weight, bias, y, mean, rstd, LN_ROWS, LN_D);
    double y64[LN_ROWS * LN_D], y_c[LN_ROWS * LN_D];
    layer_norm64(c.x, c.weight, c.bias, y64, LN_ROWS, LN_D);
    to_double(y, y_c, LN_ROWS * LN_D);
    cr_expect_lt(gradcheck_rel_error64(y_c, y64, LN_ROWS * LN_D), 1e-6, "forward: %.2e",
                 gradcheck_rel_error64(y_c, y64, LN_ROWS * LN_D));
    for (int r = 0; r < LN_ROWS; r++) {
        double m = 0.0, var = 0.0;
        for (int j = 0; j < LN_D; j++)
            m += c.x[r * LN_D + j] / LN_D;
        for (int j = 0; j < LN_D; j++)
            var += (c.x[r * LN_D + j] - m) * (c.x[r * LN_D + j] - m) / LN_D;
        cr_expect(fabs(mean[r] - m) <= 1e-6 * (1.0 + fabs(m)), "row %d: mean %.7f, not %.7f",
                  r, (double)mean[r], m);
        const double s = 1.0 / sqrt(var + (double)LAYER_NORM_EPS);
        cr_expect(fabs(rstd[r] - s) <= 1e-6 * s, "row %d: rstd %.7f, not %.7f", r,
                  (double)rstd[r], s);
    }

    // the backward, added into what is there, against central differences in double
    float grad_x[LN_ROWS * LN_D], grad_weight[LN_D], grad_bias[LN_D];
    for (int i = 0; i < LN_ROWS * LN_D; i++)
        grad_x[i] = 0.25f;
    for (int j = 0; j < LN_D; j++)
        grad_weight[j] = grad_bias[j] = -0.5f;
    layer_norm_backward(grad_y, x, weight, mean, rstd, grad_x, grad_weight, grad_bias, LN_ROWS,
                        LN_D);
    double numeric[LN_ROWS * LN_D], analytic[LN_ROWS * LN_D];
    struct { const char *name; double *values; const float *grad; float before; int n; } parts[] = {
        {"x", c.x, grad_x, 0.25f, LN_ROWS * LN_D},
        {"weight", c.weight, grad_weight, -0.5f, LN_D},
        {"bias", c.bias, grad_bias, -0.5f, LN_D},
    };
    for (int p = 0; p < 3; p++) {
        numeric64(&c, parts[p].values, parts[p].n, numeric);
        for (int i = 0; i < parts[p].n; i++)
            analytic[i] = (double)parts[p].grad[i] - parts[p].before;
        const double error = gradcheck_rel_error64(analytic, numeric, parts[p].n);
        cr_expect_lt(error, 1e-5, "grad_%s: relative error %.2e", parts[p].name, error);
    }
}

static double gelu64(double u)
{
    return 0.5 * u * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (u + 0.044715 * u * u * u)));
}

enum { GELU_N = 61 };

/* u in [-6, 6] by 0.2, and the tanh's saturated ends */
static void gelu_inputs(float *u)
{
    for (int i = 0; i < GELU_N; i++)
        u[i] = -6.0f + 0.2f * (float)i;
}

Test(language_model, gelu_equals_float64_pytorch_and_its_finite_differences)
{
    // a few values of F.gelu(u, approximate='tanh') and its slope, from PyTorch in float64
    const float u[] = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f};
    const double value[] = {-0.003637392, -0.158808009, -0.154285990, 0.0,
                            0.345714010, 0.841191991, 2.996362608};
    const double slope[] = {-0.011584167, -0.082964084, 0.132630096, 0.5,
                            0.867369904, 1.082964084, 1.011584167};
    float g[7], ones[7], grad[7];
    for (int i = 0; i < 7; i++)
        ones[i] = 1.0f;
    gelu_forward(u, g, 7);
    gelu_backward(u, ones, grad, 7);
    for (int i = 0; i < 7; i++) {
        cr_expect(fabs(g[i] - value[i]) <= 1e-6, "gelu(%g) = %.9f, PyTorch %.9f", (double)u[i],
                  (double)g[i], value[i]);
        cr_expect(fabs(grad[i] - slope[i]) <= 1e-6, "gelu'(%g) = %.9f, PyTorch %.9f",
                  (double)u[i], (double)grad[i], slope[i]);
    }

    // on a grid: the forward against float64, the backward against its central differences
    float grid[GELU_N], grad_g[GELU_N], out[GELU_N], grad_f[GELU_N];
    gelu_inputs(grid);
    Rng rng = rng_new(5);
    for (int i = 0; i < GELU_N; i++)
        grad_g[i] = rng_normal(&rng);
    gelu_forward(grid, out, GELU_N);
    gelu_backward(grid, grad_g, grad_f, GELU_N);
    for (int i = 0; i < GELU_N; i++) {
        const double v = grid[i], eps = 1e-6;
        cr_expect(fabs(out[i] - gelu64(v)) <= 1e-6 * (1.0 + fabs(v)), "gelu(%g) = %.9f, not %.9f",
                  v, (double)out[i], gelu64(v));
        const double numeric = grad_g[i] * (gelu64(v + eps) - gelu64(v - eps)) / (2.0 * eps);
        cr_expect(fabs(grad_f[i] - numeric) <= 1e-5 * (1.0 + fabs(numeric)),
                  "gelu_backward at %g: %.9f, finite differences %.9f", v, (double)grad_f[i],
                  numeric);
    }
}

/* The vector GELU gives the clear one's numbers, the tail past the last
 * whole vector included, in place too: within 1e-6 of the value and 4e-6
 * of the slope (its tanh, 1 - 2 / (exp(2 z) + 1), is within a few ulps
 * of 1, so where 1 + tanh nearly cancels, for u below -3, the two differ
 * by that much in absolute terms; measured at most 3.2e-7 and 2.0e-6 on
 * [-10, 10]). */
Test(language_model, fast_gelu_equals_clear)
{
    float grid[GELU_N], grad_g[GELU_N];
    float clear[GELU_N], fast[GELU_N], clear_grad[GELU_N], fast_grad[GELU_N];
    gelu_inputs(grid);
    Rng rng = rng_new(6);
    for (int i = 0; i < GELU_N; i++)
        grad_g[i] = 2.0f * rng_uniform(&rng) - 1.0f;   /* |grad_g| <= 1 */
    gelu_forward(grid, clear, GELU_N);
    gelu_backward(grid, grad_g, clear_grad, GELU_N);
    memcpy(fast, grid, sizeof grid);
    fast_gelu_forward(fast, fast, GELU_N);
    memcpy(fast_grad, grad_g, sizeof grad_g);
    fast_gelu_backward(grid, fast_grad, fast_grad, GELU_N);
    for (int i = 0; i < GELU_N; i++) {
        cr_expect(fabs(fast[i] - clear[i]) <= 1e-6 + 1e-6 * fabs(clear[i]),
                  "gelu(%g): fast %.9f, clear %.9f", (double)grid[i], (double)fast[i],
                  (double)clear[i]);
        cr_expect(fabs(fast_grad[i] - clear_grad[i]) <= 4e-6 + 1e-6 * fabs(clear_grad[i]),
                  "gelu'(%g): fast %.9f, clear %.9f", (double)grid[i], (double)fast_grad[i],
                  (double)clear_grad[i]);
    }
}

/* fast_gelu_forward_slope gives fast_gelu_forward's values bit for bit,
 * and a slope that, times grad_g, is fast_gelu_backward's gradient bit
 * for bit: at every length up to GELU_N (every tail), on the grid and at
 * values where the gate's exp overflows or vanishes, and NaN. Nothing
 * past n is written. */
Test(language_model, fast_gelu_slope_is_the_forward_and_backward_bit_for_bit)
{
    float u[GELU_N + 6], grad_g[GELU_N + 6];
    gelu_inputs(u);
    const float extremes[6] = {-1e30f, -200.0f, 60.0f, 1e30f, -INFINITY, NAN};
    memcpy(u + GELU_N, extremes, sizeof extremes);
    Rng rng = rng_new(7);
    for (int i = 0; i < GELU_N + 6; i++)
        grad_g[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    for (int n = 0; n <= GELU_N + 6; n++) {
        const int first = n > GELU_N ? n - GELU_N : 0;   /* the extremes at the front too */
        float value[GELU_N + 7], grad_f[GELU_N + 6], g[GELU_N + 7], slope[GELU_N + 7];
        float *in = u + first;
        const int count = n - first;
        fast_gelu_forward(in, value, (size_t)count);
        fast_gelu_backward(in, grad_g, grad_f, (size_t)count);
        memcpy(slope, in, (size_t)count * sizeof(float));
        slope[count] = g[count] = 7.0f;   /* past n: left alone */
        fast_gelu_forward_slope(slope, g, (size_t)count);
        cr_assert(slope[count] == 7.0f && g[count] == 7.0f, "n %d: wrote past n", count);
        for (int i = 0; i < count; i++) {
            const float product = grad_g[i] * slope[i];
            cr_assert(memcmp(&g[i], &value[i], sizeof(float)) == 0 &&
                          memcmp(&product, &grad_f[i], sizeof(float)) == 0,
                      "n %d, gelu(%g): %.9g and %.9g, not %.9g and %.9g", count,
                      (double)in[i], (double)g[i], (double)product, (double)value[i],
                      (double)grad_f[i]);
        }
    }
}

/* ---- the whole backward against finite differences ------------------------------- */

typedef struct {
    const LanguageModel *model;
    const int *tokens;
    int batch, length;
} LossContext;

static double model_loss(void *ctx)
{
    const LossContext *c = ctx;
    return language_model_loss(c->model, c->tokens, c->batch, c->length);
}

enum { FD_SAMPLES = 40 };

/* Central differences of the loss, step eps, at FD_SAMPLES elements of
 * p's value spread through it (every element of a small tensor) -> the
 * largest |grad - numeric|; *largest receives the largest |numeric|. The
 * stride is prime to 2 and 3, so that the elements fall in every column
 * of the matrices here (12 and 48 wide). */
static double sampled_difference(LossContext *ctx, const Parameter *p, double eps,
                                 double *largest)
{
    const size_t n = p->value->size;
    size_t stride = (n + FD_SAMPLES - 1) / FD_SAMPLES;
    while (stride > 1 && (stride % 2 == 0 || stride % 3 == 0))
        stride++;
    double worst = 0.0;
    *largest = 0.0;
    for (size_t i = 0; i < n; i += stride) {
        float *x = &p->value->data[i];
        const float kept = *x, up = (float)(kept + eps), down = (float)(kept - eps);
        *x = up;
        const double loss_up = model_loss(ctx);
        *x = down;
        const double loss_down = model_loss(ctx);
        *x = kept;
        const double numeric = (loss_up - loss_down) / ((double)up - down);
        worst = fmax(worst, fabs(p->grad->data[i] - numeric));
        *largest = fmax(*largest, fabs(numeric));
    }
    return worst;
}

/* Every parameter of the fixture's model (weights away from their
 * initial values, so every layer norm and GELU bends): the MLP's two
 * layers, the unembedding tied to wte (whose gradient adds the
 * embedding's and the unembedding's parts), the layer norms, attention,
 * positions. On a shorter sequence than the context, so wpe's last rows
 * get no gradient and must get none. */
Test(language_model, backward_equals_finite_differences)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, CONTEXT + 1);
    enum { T = CONTEXT - 2 };
    int window[BATCH * (T + 1)];
    for (int b = 0; b < BATCH; b++)
        memcpy(window + b * (T + 1), tokens + b * (CONTEXT + 1), sizeof(int) * (T + 1));
    language_model_loss_grad(model, window, BATCH, T);
    LossContext ctx = {model, window, BATCH, T};
    const float largest_model = largest_grad(model->params, model->num_params, false);
    for (int i = 0; i < model->num_params; i++) {
        const Parameter *p = &model->params[i];
        double largest;
        const double difference = sampled_difference(&ctx, p, 1e-2, &largest);
        if (is_key_bias(p)) {   /* 0, within the differences' rounding */
            cr_expect_lt(largest, 1e-3 * largest_model, "%s", p->name);
            cr_expect_lt(tensor_max_abs(p->grad), 1e-6f * largest_model, "%s", p->name);
        } else {
            cr_expect_gt(largest, 1e-3 * largest_model, "%s: no gradient to check", p->name);
            cr_expect(difference < 2e-3 * largest, "%s: relative error %.2e", p->name,
                      difference / largest);
        }
    }
    for (int t = T; t < CONTEXT; t++)
        for (int j = 0; j < HIDDENS; j++)
            cr_expect_eq(AT2(model->grad_wpe, t, j), 0.0f, "wpe row %d", t);
    free(tokens);
    language_model_free(model);
}

/* ---- the rungs of the build-up (06_permutation_invariance/language_ladder.h) ---- */

/* The fixture's sizes as a training's, and its vocabulary as a corpus's */
static LanguageTraining small_training(Corpus *corpus)
{
    *corpus = (Corpus){.vocab = VOCAB};
    memcpy(corpus->bytes, BYTES, sizeof BYTES);
    LanguageTraining t = LANGUAGE_TRAINING;
    t.context = CONTEXT;
    t.num_hiddens = HIDDENS;
    t.num_heads = HEADS;
    t.num_layers = LAYERS;
    return t;
}

/* Each rung's backward against finite differences, every parameter it has
 * moved off its initial values (layer norms 1 and biases 0 would hide a
 * wrong term), on windows shorter than the context. The parameters each
 * rung lists are what it has: the bigram wte alone, (V, V); one block of
 * attention (wte, wpe and attention's 8); the MLP's 4 more; two blocks;
 * the layer norms, 2 in each of a block's halves and 2 of ln_f. */
Test(language_model, every_rung_of_the_ladder_has_its_backward, .timeout = 60)
{
    Corpus corpus;
    const LanguageTraining t = small_training(&corpus);
    const int params[LADDER_RUNGS] = {1, 10, 10, 14, 26, 36};
    enum { T = CONTEXT - 2 };
    int window[BATCH * (T + 1)];
    Rng rng = rng_new(5);
    for (int i = 0; i < BATCH * (T + 1); i++)
        window[i] = (int)rng_below(&rng, VOCAB);
    for (int r = 0; r < LADDER_RUNGS; r++) {
        LanguageModel *model = ladder_rung_new(r, &corpus, &t, 3);
        cr_expect_eq(model->num_params, params[r], "rung %d lists %d parameters, not %d", r + 1,
                     model->num_params, params[r]);
        for (int i = 0; i < model->num_params; i++)
            for (size_t j = 0; j < model->params[i].value->size; j++)
                model->params[i].value->data[j] += 0.3f * rng_normal(&rng);
        language_model_loss_grad(model, window, BATCH, T);
        LossContext ctx = {model, window, BATCH, T};
        const float largest_model = largest_grad(model->params, model->num_params, false);
        for (int i = 0; i < model->num_params; i++) {
            const Parameter *p = &model->params[i];
            double largest;
            const double difference = sampled_difference(&ctx, p, 1e-2, &largest);
            if (is_key_bias(p))   /* 0: a key's bias adds the same score to every key */
                continue;
            cr_expect_gt(largest, 1e-4 * largest_model, "rung %d, %s: no gradient to check",
                         r + 1, p->name);
            cr_expect(difference < 2e-3 * largest, "rung %d, %s: relative error %.2e", r + 1,
                      p->name, difference / largest);
        }
        language_model_free(model);
    }
    // the bigram is a table: token i's logits are row i of wte, whatever came before
    LanguageModel *bigram = ladder_rung_new(0, &corpus, &t, 3);
    cr_assert_eq(bigram->wte->shape[1], VOCAB);
    Tensor *logits = language_model_forward(bigram, window, BATCH, T, NULL, NULL);
    for (int i = 0; i < BATCH * T; i++)
        cr_expect_eq(memcmp(logits->data + (size_t)i * VOCAB,
                            bigram->wte->data + (size_t)window[i] * VOCAB, VOCAB * sizeof(float)),
                     0, "the bigram's logits at %d are not wte's row", i);
    tensor_free(logits);
    language_model_free(bigram);
}

/* The last rung is the model language_model trains: drawn from the same
 * stream, the same numbers, the same loss and gradients, bit for bit. */
Test(language_model, the_last_rung_is_the_model_bit_for_bit)
{
    Corpus corpus;
    const LanguageTraining t = small_training(&corpus);
    Rng rng = rng_use(3, RNG_PARAMETERS);
    LanguageModel *model = language_model_new(BYTES, VOCAB, CONTEXT, HIDDENS, HEADS, LAYERS,
                                              &rng);
    LanguageModel *rung = ladder_rung_new(LADDER_RUNGS - 1, &corpus, &t, 3);
    int tokens[BATCH * (CONTEXT + 1)];
    for (int i = 0; i < BATCH * (CONTEXT + 1); i++)
        tokens[i] = (int)rng_below(&rng, VOCAB);
    cr_assert_eq(rung->num_params, model->num_params);
    const double loss = language_model_loss_grad(model, tokens, BATCH, CONTEXT);
    cr_expect_eq(language_model_loss_grad(rung, tokens, BATCH, CONTEXT), loss);
    for (int i = 0; i < model->num_params; i++) {
        const Parameter *a = &model->params[i], *b = &rung->params[i];
        cr_expect_str_eq(a->name, b->name);
        cr_expect(a->value->size == b->value->size &&
                      memcmp(a->value->data, b->value->data, a->value->size * 4) == 0 &&
                      memcmp(a->grad->data, b->grad->data, a->grad->size * 4) == 0,
                  "%s differs", a->name);
    }
    language_model_free(model);
    language_model_free(rung);
}

/* ---- the fast kernels against the clear ones ------------------------------------- */

static void expect_fast_equals_clear(LanguageModel *clear, LanguageModel *fast,
                                     const int *tokens, int B, int T)
{
    cr_assert(language_kernels("fast", 2, &fast->kernels));
    const double loss_clear = language_model_loss_grad(clear, tokens, B, T);
    const double loss_fast = language_model_loss_grad(fast, tokens, B, T);
    cr_expect(fabs(loss_clear - loss_fast) <= 1e-5 * loss_clear, "loss %.7f, fast %.7f",
              loss_clear, loss_fast);
    const float largest = largest_grad(clear->params, clear->num_params, false);
    for (int i = 0; i < clear->num_params; i++) {
        const Parameter *p = &clear->params[i];
        if (is_key_bias(p)) {
            cr_expect_lt(tensor_max_abs(fast->params[i].grad), 1e-6f * largest, "fast %s",
                         p->name);
            continue;
        }
        const double error = gradcheck_rel_error(fast->params[i].grad, p->grad);
        cr_expect(error <= 1e-4, "%s: relative error %.2e", p->name, error);
    }
}

Test(language_model, fast_kernels_give_the_clear_loss_and_gradients)
{
    // the fixture's model
    LanguageModel *clear = load_model(FIXTURE "/initial"), *fast = load_model(FIXTURE "/initial");
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, CONTEXT + 1);
    expect_fast_equals_clear(clear, fast, tokens, BATCH, CONTEXT);
    language_model_free(clear);
    language_model_free(fast);
    free(tokens);

    // and a wider one, drawn, at sizes that are not multiples of a vector
    enum { V = 20, C = 33, D = 40, H = 5, N = 2, B = 3 };
    int bytes[V], text[B * (C + 1)];
    for (int i = 0; i < V; i++)
        bytes[i] = 40 + i;
    Rng rng = rng_new(21), again = rng_new(21);
    clear = language_model_new(bytes, V, C, D, H, N, &rng);
    fast = language_model_new(bytes, V, C, D, H, N, &again);
    for (int i = 0; i < B * (C + 1); i++)
        text[i] = (int)(rng_uniform(&rng) * V) % V;
    expect_fast_equals_clear(clear, fast, text, B, C);
    language_model_free(clear);
    language_model_free(fast);
}

/* ---- a training step's shares --------------------------------------------------- */

/* tokens (B, C + 1) drawn from rng */
static void draw_tokens(int *tokens, int count, int V, Rng *rng)
{
    for (int i = 0; i < count; i++)
        tokens[i] = (int)(rng_uniform(rng) * V) % V;
}

/* the loss of tokens (B, C + 1) from one forward of the whole batch */
static double loss_of_whole_batch(const LanguageModel *model, const int *tokens, int B, int C)
{
    int inputs[4 * 64], targets[4 * 64];
    cr_assert(B * C <= 4 * 64);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < C; t++) {
            inputs[b * C + t] = tokens[b * (C + 1) + t];
            targets[b * C + t] = tokens[b * (C + 1) + t + 1];
        }
    Tensor *logits = language_model_forward(model, inputs, B, C, NULL, NULL);
    const double loss = cross_entropy(logits, targets);
    tensor_free(logits);
    return loss;
}

/* A step cuts the batch in shares, each run on a thread of its own or in
 * turn (language_model_train_step): one thread and two give the same bits,
 * step after step, for an even batch and an odd one; and the step's
 * gradient is the whole batch's (language_model_loss_grad) up to the order
 * of the sums over the windows. */
Test(language_model, one_thread_and_two_train_to_the_same_bits)
{
    enum { V = 20, C = 33, D = 40, H = 5, N = 2, STEPS_TAKEN = 3 };
    int bytes[V];
    for (int i = 0; i < V; i++)
        bytes[i] = 40 + i;
    for (int B = 3; B <= 4; B++) {
        Rng rng = rng_new(5), again = rng_new(5), whole_rng = rng_new(5), text_rng = rng_new(6);
        LanguageModel *one = language_model_new(bytes, V, C, D, H, N, &rng);
        LanguageModel *two = language_model_new(bytes, V, C, D, H, N, &again);
        LanguageModel *whole = language_model_new(bytes, V, C, D, H, N, &whole_rng);
        cr_assert(language_kernels("fast", 1, &one->kernels));
        cr_assert(language_kernels("fast", 2, &two->kernels));
        cr_assert(language_kernels("fast", 2, &whole->kernels));
        const LanguageTraining t = LANGUAGE_TRAINING;
        Adam *adam_one = language_adamw_new(one, &t), *adam_two = language_adamw_new(two, &t);
        int tokens[4 * (C + 1)];
        for (int step = 0; step < STEPS_TAKEN; step++) {
            draw_tokens(tokens, B * (C + 1), V, &text_rng);
            if (step == 0) {   /* the first step's gradient against the whole batch's */
                const double loss = language_model_loss_grad(whole, tokens, B, C);
                const double loss_shares = language_model_train_step(two, adam_two, tokens, B,
                                                                     1e9);
                cr_expect(fabs(loss - loss_shares) <= 1e-6 * loss, "B %d: loss %.9f, "
                          "in shares %.9f", B, loss, loss_shares);
                for (int i = 0; i < two->num_params; i++) {
                    if (is_key_bias(&two->params[i]))
                        continue;   /* rounding noise only (see above) */
                    const double error = gradcheck_rel_error(two->params[i].grad,
                                                             whole->params[i].grad);
                    cr_expect(error <= 1e-5, "B %d: %s: relative error %.2e", B,
                              two->params[i].name, error);
                }
                language_model_train_step(one, adam_one, tokens, B, 1e9);
                continue;
            }
            const double loss_one = language_model_train_step(one, adam_one, tokens, B, 1.0);
            const double loss_two = language_model_train_step(two, adam_two, tokens, B, 1.0);
            cr_expect(loss_one == loss_two, "B %d, step %d: loss %.9f on one thread, %.9f on "
                      "two", B, step, loss_one, loss_two);
        }
        const double held_one = language_model_loss(one, tokens, B, C);
        const double held_two = language_model_loss(two, tokens, B, C);
        cr_expect(held_one == held_two, "B %d: loss without gradient %.9f on one thread, "
                  "%.9f on two", B, held_one, held_two);
        const double whole_loss = loss_of_whole_batch(two, tokens, B, C);
        cr_expect(fabs(held_two - whole_loss) <= 1e-6 * whole_loss, "B %d: loss %.9f, of the "
                  "whole batch %.9f", B, held_two, whole_loss);
        for (int i = 0; i < one->num_params; i++) {
            const Tensor *a = one->params[i].value, *b = two->params[i].value;
            cr_expect(memcmp(a->data, b->data, a->size * sizeof(float)) == 0,
                      "B %d: %s differs between one thread and two", B, one->params[i].name);
        }
        adam_free(adam_one);
        adam_free(adam_two);
        language_model_free(one);
        language_model_free(two);
        language_model_free(whole);
    }
}

/* The bench's count of a step's work (make bench-language-model's share of
 * the peak): at the defaults, with Shakespeare's 65 characters, 12 windows
 * of 64 tokens, each through 4 blocks of 12 * 128^2 multiply-adds, the
 * unembedding's 65 * 128, the attention's 2 * 64 * 128 a block; two FLOPs
 * a multiply-add, and the backward twice the forward: about 4 GFLOP. */
Test(language_model, a_default_step_is_about_4_gflop)
{
    const LanguageTraining t = LANGUAGE_TRAINING;
    cr_expect_eq(language_step_flops(&t, 65), 3964207104.0, "%.0f",
                 language_step_flops(&t, 65));
}

/* ---- decoding ------------------------------------------------------------------- */

/* tokens (T,) -> the clear forward's logits (1, T, V) (new) */
static Tensor *full_logits(const LanguageModel *model, const int *tokens, int T)
{
    return language_model_forward(model, tokens, 1, T, NULL, NULL);
}

/* Each step's logits are the full forward's at that position, bit for
 * bit: one forward of the whole window, and one of the window so far. */
Test(language_model, decoder_logits_equal_the_full_forward_bit_for_bit)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    const int tokens[CONTEXT] = {3, 7, 7, 0, 10, 1, 4, 9};
    Tensor *full = full_logits(model, tokens, CONTEXT);
    LanguageDecoder *dec = language_decoder_new(model);
    for (int round = 0; round < 2; round++) {   /* and again after a reset */
        for (int t = 0; t < CONTEXT; t++) {
            const float *logits = language_decoder_step(dec, tokens[t]);
            cr_expect_eq(memcmp(logits, full->data + (size_t)t * VOCAB, sizeof(float) * VOCAB),
                         0, "position %d: the decoder's logits differ from the forward's", t);
            Tensor *prefix = full_logits(model, tokens, t + 1);
            cr_expect_eq(memcmp(logits, prefix->data + (size_t)t * VOCAB, sizeof(float) * VOCAB),
                         0, "position %d: the decoder's logits differ from a forward of %d", t,
                         t + 1);
            tensor_free(prefix);
        }
        cr_expect_eq(dec->length, CONTEXT);
        language_decoder_reset(dec);
    }
    language_decoder_free(dec);
    tensor_free(full);
    language_model_free(model);
}

/* What language_model_sample draws, replayed with full forwards: the
 * window holds the prompt (its last C / 2 tokens when it is longer than
 * C) and grows by each token drawn; when it is full, the next starts
 * again from its last C / 2. Each token must be the one sample_token draws
 * from a fresh full forward of that window, with the same generator. */
static void expect_sample_replays(const LanguageModel *model, const int *prompt, int P, int n)
{
    const int C = model->context, keep = C / 2;
    int out[64], text[96];
    cr_assert(n <= 64 && P + n <= 96);
    Rng rng = rng_new(8), replay = rng_new(8);
    language_model_sample(model, prompt, P, out, n, 1.0f, &rng);
    memcpy(text, prompt, sizeof(int) * P);
    int length = P, window = P > C ? keep : P, restarts = 0;
    for (int i = 0; i < n; i++) {
        Tensor *logits = full_logits(model, text + length - window, window);
        const int token = sample_token(logits->data + (size_t)(window - 1) * model->vocab,
                                       model->vocab, 1.0f, &replay);
        tensor_free(logits);
        cr_assert_eq(out[i], token, "token %d (prompt %d, window %d): drawn %d, replayed %d",
                     i, P, window, out[i], token);
        text[length++] = out[i];
        restarts += window == C;
        window = window == C ? keep : window + 1;
    }
    cr_expect_geq(restarts, 3, "the window filled only %d times", restarts);
}

Test(language_model, sampling_restarts_a_full_window_from_its_last_half)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    const int prompt[CONTEXT + 3] = {1, 5, 6, 2, 8, 3, 0, 4, 9, 7, 10};
    expect_sample_replays(model, prompt, 3, 40);
    expect_sample_replays(model, prompt, CONTEXT + 3, 40);   /* a prompt longer than C */
    language_model_free(model);
}

/* ---- the schedule and the loss over a text --------------------------------------- */

Test(language_model, learning_rate_warms_up_then_follows_a_cosine)
{
    // nanoGPT's defaults: lr 1e-3, min_lr 1e-4, warmup 100, decay to 2000
    const struct { int step; double lr; } cases[] = {
        {0, 1e-3 * 1 / 101},                       /* warmup: lr (s + 1) / (warmup + 1) */
        {49, 1e-3 * 50 / 101},
        {99, 1e-3 * 100 / 101},
        {100, 1e-3},                               /* the cosine starts at lr */
        {575, 1e-4 + 0.5 * (1 + 0.70710678118654752) * 9e-4},   /* a quarter: cos(pi / 4) */
        {1050, 5.5e-4},                            /* half way: the mean of lr and min_lr */
        {1999, 1e-4 + 0.5 * (1 + cos(3.14159265358979323846 * 1899.0 / 1900.0)) * 9e-4},
        {2000, 1e-4},
        {5000, 1e-4},                              /* min_lr after */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const double lr = lm_learning_rate(cases[i].step, 1e-3, 1e-4, 100, 2000);
        cr_expect(fabs(lr - cases[i].lr) <= 1e-12 * cases[i].lr, "step %d: %.12g, not %.12g",
                  cases[i].step, lr, cases[i].lr);
    }
}

/* ids (T + 1,) -> the sum of the T losses of one window, in double from
 * the forward's logits */
static double window_loss_sum(const LanguageModel *model, const int *ids, int T)
{
    Tensor *logits = full_logits(model, ids, T);
    double sum = 0.0;
    for (int t = 0; t < T; t++) {
        const float *row = logits->data + (size_t)t * model->vocab;
        double max = row[0], total = 0.0;
        for (int i = 1; i < model->vocab; i++)
            max = fmax(max, row[i]);
        for (int i = 0; i < model->vocab; i++)
            total += exp(row[i] - max);
        sum += max + log(total) - row[ids[t + 1]];
    }
    tensor_free(logits);
    return sum;
}

/* Windows of C + 1 ids, each starting on the last id of the one before:
 * ids 0 .. 8, 8 .. 16, 16 .. 20 for 21 ids and C = 8, so every id but the
 * first is predicted once; whatever the batch. */
Test(language_model, text_loss_is_the_mean_over_overlapping_windows)
{
    LanguageModel *model = load_model(FIXTURE "/initial");
    enum { N = 2 * CONTEXT + 5 };
    int ids[N];
    Rng rng = rng_new(4);
    for (int i = 0; i < N; i++)
        ids[i] = (int)(rng_uniform(&rng) * VOCAB) % VOCAB;
    const struct { size_t n; double expected; } cases[] = {
        {N, (window_loss_sum(model, ids, CONTEXT) + window_loss_sum(model, ids + CONTEXT, CONTEXT) +
             window_loss_sum(model, ids + 2 * CONTEXT, 4)) / (N - 1)},
        {2 * CONTEXT + 1, (window_loss_sum(model, ids, CONTEXT) +
                           window_loss_sum(model, ids + CONTEXT, CONTEXT)) / (2 * CONTEXT)},
        {CONTEXT, window_loss_sum(model, ids, CONTEXT - 1) / (CONTEXT - 1)},
        {2, window_loss_sum(model, ids, 1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int batch_size = 1; batch_size <= 3; batch_size++) {
            const double loss = language_model_text_loss(model, ids, cases[i].n, batch_size);
            cr_expect(fabs(loss - cases[i].expected) <= 1e-6 * cases[i].expected,
                      "%zu ids, batch %d: %.9f, by hand %.9f", cases[i].n, batch_size, loss,
                      cases[i].expected);
        }
    language_model_free(model);
}

/* ---- files ----------------------------------------------------------------------- */

Test(language_model, save_then_load_gives_the_same_model)
{
    const int bytes[5] = {10, 65, 66, 97, 122};
    Rng rng = rng_new(31), other = rng_new(32);
    LanguageModel *saved = language_model_new(bytes, 5, 6, 8, 2, 3, &rng);
    LanguageModel *loaded = language_model_new(bytes, 5, 6, 8, 2, 3, &other);
    for (int i = 0; i < saved->num_params; i++) {   /* biases and scales not 0 and 1 either */
        Tensor *x = saved->params[i].value;
        for (size_t j = 0; j < x->size; j++)
            x->data[j] = rng_normal(&rng);
    }
    char dir[64], err[MODEL_ERR_LEN];
    scratch_dir_make(dir, sizeof dir, "language_model");
    cr_assert_eq(model_save(dir, saved->files, saved->num_files, err, sizeof err), 0, "%s", err);
    int ints[5];
    cr_assert_eq(model_read_ints(dir, "vocab", ints, 5, err, sizeof err), 0, "%s", err);
    cr_expect_eq(memcmp(ints, bytes, sizeof bytes), 0);
    cr_assert_eq(model_read_ints(dir, "num_heads", ints, 1, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ints[0], 2);
    cr_assert_eq(model_read_ints(dir, "num_layers", ints, 1, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ints[0], 3);
    cr_assert_eq(model_load(dir, loaded->files, loaded->num_files, err, sizeof err), 0, "%s",
                 err);
    for (int i = 0; i < saved->num_params; i++) {
        const Tensor *a = saved->params[i].value, *b = loaded->params[i].value;
        cr_expect_eq(memcmp(a->data, b->data, a->size * sizeof(float)), 0, "%s",
                     saved->params[i].name);
    }
    scratch_dir_remove(dir);
    language_model_free(saved);
    language_model_free(loaded);
}

/* A saved model asks for its number of heads in num_heads.npy: one above
 * LM_MAX_HEADS (the most --heads gives, and what the program's probe
 * tables on the stack hold) is refused as the files are read. */
Test(language_model, a_saved_model_with_too_many_heads_is_refused)
{
    const int bytes[3] = {10, 97, 98};
    Rng rng = rng_new(33);
    LanguageModel *m = language_model_new(bytes, 3, 4, 8, 2, 1, &rng);
    char dir[64], err[MODEL_ERR_LEN];
    scratch_dir_make(dir, sizeof dir, "language_model_heads");
    for (int heads = LM_MAX_HEADS; heads <= LM_MAX_HEADS + 1; heads++) {
        m->saved_heads = heads;   /* what num_heads.npy says; 8 hiddens split by neither */
        cr_assert_eq(model_save(dir, m->files, m->num_files, err, sizeof err), 0, "%s", err);
        err[0] = '\0';
        const LanguageLimits limits = {.min_context = 2, .max_context = 4, .min_hiddens = 2,
                                       .max_hiddens = 8};
        cr_expect_null(language_model_load_new(dir, &limits, err, sizeof err));
        char want[96];
        snprintf(want, sizeof want, "num_heads.npy: %d, expected 1 to %d", heads, LM_MAX_HEADS);
        if (heads > LM_MAX_HEADS)
            cr_expect(strstr(err, want) != NULL, "err: %s", err);
        else   /* within the limit, the split is what refuses it */
            cr_expect(strstr(err, "num_heads.npy") != NULL && strstr(err, want) == NULL,
                      "err: %s", err);
    }
    scratch_dir_remove(dir);
    language_model_free(m);
}

Test(language_model, layer_norm_grouped_is_the_plain_one_bit_for_bit)
{
    // 8 rows at a time, then the rest: row counts below, at and past a
    // group, and widths that are not a multiple of a vector; both add into
    // gradients that already hold numbers
    const int shapes[][2] = {{1, 5}, {7, 3}, {8, 16}, {13, 33}, {40, 128}};
    Rng rng = rng_new(23);
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int R = shapes[c][0], D = shapes[c][1];
        const size_t n = (size_t)R * D;
        float *x = checked_malloc(n, sizeof *x), *grad_y = checked_malloc(n, sizeof *grad_y);
        float *y[2], *grad_x[2], *stats[2], *params[2];   /* plain, grouped */
        float *weight = checked_malloc((size_t)D, sizeof *weight);
        float *bias = checked_malloc((size_t)D, sizeof *bias);
        for (size_t i = 0; i < n; i++) {
            x[i] = 3.0f + 2.0f * rng_normal(&rng);
            grad_y[i] = rng_normal(&rng);
        }
        for (int j = 0; j < D; j++) {
            weight[j] = 1.0f + 0.5f * rng_normal(&rng);
            bias[j] = 0.3f * rng_normal(&rng);
        }
        for (int v = 0; v < 2; v++) {
            y[v] = checked_malloc(n, sizeof(float));
            grad_x[v] = checked_malloc(n, sizeof(float));
            stats[v] = checked_malloc(2 * (size_t)R, sizeof(float));     /* mean, rstd */
            params[v] = checked_malloc(2 * (size_t)D, sizeof(float));    /* grad_weight, grad_bias */
            for (size_t i = 0; i < n; i++)
                grad_x[v][i] = 0.25f;
            for (int j = 0; j < 2 * D; j++)
                params[v][j] = -0.5f;
        }
        layer_norm_forward(x, weight, bias, y[0], stats[0], stats[0] + R, R, D);
        layer_norm_forward_grouped(x, weight, bias, y[1], stats[1], stats[1] + R, R, D);
        layer_norm_backward(grad_y, x, weight, stats[0], stats[0] + R, grad_x[0], params[0],
                            params[0] + D, R, D);
        layer_norm_backward_grouped(grad_y, x, weight, stats[1], stats[1] + R, grad_x[1],
                                    params[1], params[1] + D, R, D);
        cr_expect(memcmp(y[0], y[1], n * sizeof(float)) == 0, "(%d, %d): y differs", R, D);
        cr_expect(memcmp(stats[0], stats[1], 2 * (size_t)R * sizeof(float)) == 0,
                  "(%d, %d): mean or rstd differs", R, D);
        cr_expect(memcmp(grad_x[0], grad_x[1], n * sizeof(float)) == 0, "(%d, %d): grad_x differs",
                  R, D);
        cr_expect(memcmp(params[0], params[1], 2 * (size_t)D * sizeof(float)) == 0,
                  "(%d, %d): grad_weight or grad_bias differs", R, D);
        for (int v = 0; v < 2; v++) {
            free(y[v]);
            free(grad_x[v]);
            free(stats[v]);
            free(params[v]);
        }
        free(x);
        free(grad_y);
        free(weight);
        free(bias);
    }
}

/* A share of a step in memory laid out once, and the step's end in fewer
 * passes (language_step.h), against the pieces one by one on the same fast
 * kernels: the same losses, step after step, and the same parameters after,
 * bit for bit; for an odd width of head (d = 8, not whole panels), batches
 * of 1, 3 and 4 windows (shares of 1 and 0, 2 and 1, 2 and 2), steps clipped
 * and steps not, on one thread and two; with the weights packed once a
 * step for both shares (language_prepare) and by each share itself. */
Test(language_model, the_share_step_is_the_pieces_bit_for_bit)
{
    enum { V = 20, C = 33, D = 40, H = 5, N = 2, STEPS_TAKEN = 4 };
    int bytes[V];
    for (int i = 0; i < V; i++)
        bytes[i] = 40 + i;
    const int batches[] = {1, 3, 4};
    for (int b = 0; b < 3; b++)
        for (int run = 0; run < 4; run++) {
            const int B = batches[b], threads = 1 + run % 2;
            const bool prepared = run < 2;
            Rng rng = rng_new(5), again = rng_new(5), text_rng = rng_new(6);
            LanguageModel *fused = language_model_new(bytes, V, C, D, H, N, &rng);
            LanguageModel *pieces = language_model_new(bytes, V, C, D, H, N, &again);
            cr_assert(language_kernels("fast", threads, &fused->kernels));
            cr_assert(language_kernels("fast", threads, &pieces->kernels));
            cr_assert(fused->kernels.share_step == language_share_step &&
                          fused->kernels.update == language_update &&
                          fused->kernels.prepare == language_prepare,
                      "the fast kernels run the share step, the update and the packing");
            if (!prepared)
                fused->kernels.prepare = NULL;   /* each share packs its own */
            pieces->kernels.share_step = NULL;
            pieces->kernels.update = NULL;
            pieces->kernels.prepare = NULL;
            const LanguageTraining t = LANGUAGE_TRAINING;
            Adam *adam_fused = language_adamw_new(fused, &t);
            Adam *adam_pieces = language_adamw_new(pieces, &t);
            int tokens[4 * (C + 1)];
            for (int step = 0; step < STEPS_TAKEN; step++) {
                draw_tokens(tokens, B * (C + 1), V, &text_rng);
                const double max_norm = step % 2 == 0 ? 0.5 : 1e9;   /* clipped, or not */
                const double l1 = language_model_train_step(fused, adam_fused, tokens, B, max_norm);
                const double l2 =
                    language_model_train_step(pieces, adam_pieces, tokens, B, max_norm);
                cr_expect(l1 == l2, "B %d, %d threads, %s, step %d: loss %.9f in one pass, "
                          "%.9f by the pieces", B, threads, prepared ? "prepared" : "own packs",
                          step, l1, l2);
                for (int sh = 0; sh < LM_SHARES; sh++)   /* the packs: for one step only */
                    cr_assert(fused->shares[sh]->prepared == NULL, "share %d keeps its packs", sh);
            }
            for (int i = 0; i < fused->num_params; i++) {
                const Tensor *x = fused->params[i].value, *y = pieces->params[i].value;
                cr_expect(memcmp(x->data, y->data, x->size * sizeof(float)) == 0,
                          "B %d, %d threads, %s: %s differs", B, threads,
                          prepared ? "prepared" : "own packs", fused->params[i].name);
            }
            adam_free(adam_fused);
            adam_free(adam_pieces);
            language_model_free(fused);
            language_model_free(pieces);
        }
}

/* A whole model's step memory holds its packed weights, a share's its
 * activations: run on the other kind, each stops as on a bug (error.h's
 * die: one line, then abort) rather than read the memory as the wrong
 * thing. */
enum { TINY_V = 20, TINY_C = 16, TINY_B = 2 };

/* a one-block model on the fast kernels, one thread, and tokens (B, C + 1) for it */
static LanguageModel *tiny_fast_model(int *tokens)
{
    int bytes[TINY_V];
    for (int i = 0; i < TINY_V; i++)
        bytes[i] = 40 + i;
    Rng rng = rng_new(3), text_rng = rng_new(4);
    LanguageModel *m = language_model_new(bytes, TINY_V, TINY_C, 32, 4, 1, &rng);
    language_kernels("fast", 1, &m->kernels);
    draw_tokens(tokens, TINY_B * (TINY_C + 1), TINY_V, &text_rng);
    return m;
}

static void share_step_on_a_trained_whole_model(void)
{
    int tokens[TINY_B * (TINY_C + 1)];
    LanguageModel *m = tiny_fast_model(tokens);
    const LanguageTraining t = LANGUAGE_TRAINING;
    Adam *adam = language_adamw_new(m, &t);
    language_model_train_step(m, adam, tokens, TINY_B, 1.0);   /* m's memory: the packs */
    language_share_step(m, tokens, TINY_B);
}

static void prepare_on_a_share(void)
{
    int tokens[TINY_B * (TINY_C + 1)];
    LanguageModel *m = tiny_fast_model(tokens);
    language_share_step(m, tokens, TINY_B);   /* m's memory: a share's */
    language_prepare(m, 1);
}

Test(language_model, step_memory_of_the_other_kind_is_refused)
{
    void (*const calls[2])(void) = {share_step_on_a_trained_whole_model, prepare_on_a_share};
    const char *says[2] = {"language_share_step: this model's step memory is a whole model's",
                           "language_prepare: this model's step memory is a share's"};
    for (int i = 0; i < 2; i++) {
        int status;
        char *err = stderr_of(calls[i], &status);
        cr_expect(status == 128 + SIGABRT && err != NULL && strstr(err, says[i]) != NULL &&
                      is_one_line(err),
                  "call %d: status %d, stderr %s", i, status, err ? err : "(none)");
        free(err);
    }
}

/* Memory laid out once: at the default sizes on two threads, after the
 * first step (which makes the shares, their memory and the thread pool),
 * 100 more steps allocate nothing (every allocation counted, memory.h);
 * the pieces one by one allocate at every step. */
Test(language_model, a_hundred_steps_after_the_first_allocate_nothing, .timeout = 120)
{
    const LanguageTraining t = LANGUAGE_TRAINING;
    enum { V = 65, STEPS_TAKEN = 100 };
    int bytes[V];
    for (int i = 0; i < V; i++)
        bytes[i] = 32 + i;
    for (int fused = 1; fused >= 0; fused--) {
        Rng rng = rng_new(1), text_rng = rng_new(2);
        LanguageModel *m = language_model_new(bytes, V, t.context, t.num_hiddens, t.num_heads,
                                              t.num_layers, &rng);
        cr_assert(language_kernels("fast", 2, &m->kernels));
        if (!fused)
            m->kernels.share_step = NULL;
        Adam *adam = language_adamw_new(m, &t);
        int *tokens = checked_malloc((size_t)t.batch_size * (t.context + 1), sizeof *tokens);
        draw_tokens(tokens, t.batch_size * (t.context + 1), V, &text_rng);
        language_model_train_step(m, adam, tokens, t.batch_size, t.clip);
        const size_t before = memory_allocations();
        const int steps = fused ? STEPS_TAKEN : 2;
        for (int step = 0; step < steps; step++) {
            draw_tokens(tokens, t.batch_size * (t.context + 1), V, &text_rng);
            language_model_train_step(m, adam, tokens, t.batch_size, t.clip);
        }
        const size_t made = memory_allocations() - before;
        if (fused)
            cr_expect(made == 0, "%d steps in memory laid out once made %zu allocations",
                      steps, made);
        else
            cr_expect(made > 0, "the pieces one by one made no allocation: the count "
                      "counts nothing");
        free(tokens);
        adam_free(adam);
        language_model_free(m);
    }
}
