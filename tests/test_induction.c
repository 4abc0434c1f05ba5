/*
 * test_induction.c - chapter 06's induction-heads model
 * (common/learn/induction_model.c) and its task: the gradients and three
 * Adam steps against PyTorch autograd, the backward against finite
 * differences for one and two layers, the fast layer against the clear
 * one, head ablation, the repeated sequences, and the program
 * 06_permutation_invariance/induction_heads.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, V = vocabulary.
 *
 * The PyTorch reference is in tests/fixtures/induction/, made by
 * tests/fixtures/make_induction_fixtures.py.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_attention_layer.h"
#include "gradcheck.h"
#include "helpers.h"
#include "io/model.h"
#include "io/npy.h"
#include "../06_permutation_invariance/induction_experiment.h"
#include "learn/induction_model.h"
#include "learn/loss.h"
#include "learn/optim.h"
#include "tensor.h"

#define FIXTURE "tests/fixtures/induction"

/* The fixture's sizes, as make_induction_fixtures.py sets them: two heads
 * in the first layer, one in the second. */
enum { VOCAB = 11, LENGTH = 8, HIDDENS = 8, LAYERS = 2, BATCH = 3, STEPS = 3 };
static const int HEADS[LAYERS] = {2, 1};
static const float LR = 0.01f;

static InductionModel *load_model(const char *dir)
{
    Rng rng = rng_new(0);
    InductionModel *model = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, LAYERS, &rng);
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_load(dir, model->files, model->num_files, err, sizeof err), 0, "%s", err);
    cr_assert_eq(model->num_heads[0], HEADS[0]);
    cr_assert_eq(model->num_heads[1], HEADS[1]);
    cr_assert_eq(model->saved_layers, LAYERS);
    return model;
}

/* Zero, forward, cross-entropy, backward, without a step; returns the loss. */
static double gradients(InductionModel *model, const int *tokens, int B)
{
    const int T = model->length;
    int *inputs = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
    cr_assert(inputs && targets);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tokens[b * (T + 1) + t];
            targets[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
    parameters_zero_grad(model->params, model->num_params);
    InductionCache cache;
    Tensor *logits = induction_forward(model, inputs, B, NULL, &cache);
    const double loss = cross_entropy(logits, targets);
    Tensor *grad_logits = cross_entropy_backward(logits, targets, 1.0f);
    induction_backward(model, &cache, grad_logits);
    TENSOR_FREE(grad_logits, logits);
    induction_cache_free(&cache);
    free(inputs);
    free(targets);
    return loss;
}

Test(induction, gradients_equal_pytorch_autograd)
{
    InductionModel *model = load_model(FIXTURE "/initial");
    InductionModel *expected = load_model(FIXTURE "/grads");   /* gradients as values */
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, LENGTH + 1);
    char err[NPY_ERR_LEN];
    Tensor *losses = npy_load(FIXTURE "/losses.npy", err, sizeof err);
    cr_assert(losses, "%s", err);

    const double loss = gradients(model, tokens, BATCH);
    cr_expect(fabs(loss - losses->data[0]) <= 1e-5 * fabs(losses->data[0]),
              "loss %.7f, PyTorch %.7f", loss, (double)losses->data[0]);
    cr_assert_eq(model->num_params, 2 + 4 * LAYERS + 1);
    for (int i = 0; i < model->num_params; i++) {
        const double error = gradcheck_rel_error(model->params[i].grad,
                                                 expected->params[i].value);
        cr_expect(error <= 1e-5, "%s: relative error %.2e", model->params[i].name, error);
        /* and the gradient is not all zeros: the comparison compares something */
        cr_expect_gt(tensor_max_abs(expected->params[i].value), 1e-4f, "%s",
                     model->params[i].name);
    }
    tensor_free(losses);
    free(tokens);
    induction_free(expected);
    induction_free(model);
}

Test(induction, three_adam_steps_equal_pytorch)
{
    InductionModel *model = load_model(FIXTURE "/initial");
    InductionModel *expected = load_model(FIXTURE "/after_3_steps");
    int *tokens = fixture_ints3(FIXTURE "/tokens.npy", STEPS, BATCH, LENGTH + 1);
    char err[NPY_ERR_LEN];
    Tensor *losses = npy_load(FIXTURE "/losses.npy", err, sizeof err);
    cr_assert(losses, "%s", err);
    Adam *adam = adam_new(model->params, model->num_params, LR);
    for (int step = 0; step < STEPS; step++) {
        const double loss = induction_train_step(
            model, adam, tokens + (size_t)step * BATCH * (LENGTH + 1), BATCH, NULL);
        cr_expect(fabs(loss - losses->data[step]) <= 1e-5 * fabs(losses->data[step]),
                  "step %d: loss %.7f, PyTorch %.7f", step, loss, (double)losses->data[step]);
    }
    for (int i = 0; i < model->num_params; i++) {
        const double error = gradcheck_rel_error(model->params[i].value,
                                                 expected->params[i].value);
        cr_expect(error <= 1e-4, "%s: relative error %.2e", model->params[i].name, error);
    }
    adam_free(adam);
    tensor_free(losses);
    free(tokens);
    induction_free(expected);
    induction_free(model);
}

/* ---- the backward against finite differences -------------------------------- */

typedef struct {
    InductionModel *model;
    const int *tokens;
    int batch;
    float *losses;
} LossContext;

static double model_loss(void *ctx)
{
    LossContext *c = ctx;
    return induction_losses(c->model, c->tokens, c->batch, c->losses);
}

static void check_finite_differences(int num_layers)
{
    Rng rng = rng_new(7);
    InductionModel *model = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, num_layers, &rng);
    int tokens[2 * (LENGTH + 1)], periods[2];
    repeats_draw(tokens, periods, 2, LENGTH, VOCAB, 2, 4, &rng);
    gradients(model, tokens, 2);
    float losses[2 * LENGTH];
    LossContext ctx = {model, tokens, 2, losses};
    for (int i = 0; i < model->num_params; i++) {
        Tensor *numeric = gradcheck_numeric(model_loss, &ctx, model->params[i].value, 1e-2);
        const double error = gradcheck_rel_error(model->params[i].grad, numeric);
        cr_expect(error < 1e-3, "%s (%d layers): relative error %.2e", model->params[i].name,
                  num_layers, error);
        tensor_free(numeric);
    }
    induction_free(model);
}

Test(induction, backward_equals_finite_differences)
{
    check_finite_differences(1);
    check_finite_differences(2);
}

/* The fast layer gives the clear layer's gradients, through both layers
 * and the residual stream. */
Test(induction, fast_layer_gradients_equal_clear)
{
    Rng rng = rng_new(9), again = rng_new(9);
    InductionModel *clear = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, LAYERS, &rng);
    InductionModel *fast = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, LAYERS, &again);
    fast->attend = fast_attention_layer(2);
    int tokens[4 * (LENGTH + 1)], periods[4];
    repeats_draw(tokens, periods, 4, LENGTH, VOCAB, 2, 4, &rng);
    const double loss_clear = gradients(clear, tokens, 4), loss_fast = gradients(fast, tokens, 4);
    cr_expect(fabs(loss_clear - loss_fast) <= 1e-5 * loss_clear, "loss %.7f, fast %.7f",
              loss_clear, loss_fast);
    for (int i = 0; i < clear->num_params; i++) {
        const double error = gradcheck_rel_error(fast->params[i].grad, clear->params[i].grad);
        cr_expect(error <= 1e-4, "%s: relative error %.2e", clear->params[i].name, error);
    }
    induction_free(clear);
    induction_free(fast);
}

/* Silencing a head changes only what passes through it. */
Test(induction, ablating_a_head_zeroes_its_output)
{
    Rng rng = rng_new(3);
    InductionModel *model = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, 1, &rng);   /* 2 heads */
    int tokens[LENGTH + 1], periods[1];
    repeats_draw(tokens, periods, 1, LENGTH, VOCAB, 2, 4, &rng);
    Tensor *before = induction_forward(model, tokens, 1, NULL, NULL);
    float saved[HIDDENS * HIDDENS];
    induction_ablate_head(model, 0, 1, saved);
    /* with the only layer's head 1 silent, W_o's columns for head 1 no
     * longer matter: zeroing them changes nothing */
    Tensor *ablated = induction_forward(model, tokens, 1, NULL, NULL);
    const int d = HIDDENS / HEADS[0];
    for (int i = 0; i < HIDDENS; i++)
        for (int j = d; j < 2 * d; j++)
            AT2(model->layers[0]->W_o, i, j) = 0.0f;
    Tensor *no_w_o = induction_forward(model, tokens, 1, NULL, NULL);
    cr_expect_lt(tensor_max_abs_diff(ablated, no_w_o), 1e-6f);
    cr_expect_gt(tensor_max_abs_diff(ablated, before), 1e-3f);
    TENSOR_FREE(before, ablated, no_w_o);
    induction_free(model);
}

/* ---- the task ------------------------------------------------------------------ */

Test(induction, sequences_repeat_a_period_of_different_tokens)
{
    enum { B = 200, T = 32, V = 20 };
    int *tokens = malloc(sizeof(int) * B * (T + 1)), periods[B];
    cr_assert(tokens);
    Rng rng = rng_new(1);
    repeats_draw(tokens, periods, B, T, V, 8, 16, &rng);
    int seen[17] = {0};
    for (int b = 0; b < B; b++) {
        const int P = periods[b], *row = tokens + b * (T + 1);
        cr_assert(P >= 8 && P <= 16, "period %d", P);
        seen[P] = 1;
        for (int t = 0; t <= T; t++) {
            cr_expect(row[t] >= 0 && row[t] < V);
            if (t >= P)
                cr_expect_eq(row[t], row[t - P]);
            else
                for (int s = 0; s < t; s++)
                    cr_expect_neq(row[s], row[t], "sequence %d repeats a token early", b);
        }
    }
    for (int P = 8; P <= 16; P++)
        cr_expect(seen[P], "period %d never drawn", P);
    free(tokens);
}

/* The predictor that knows only the tokens seen: uniform over the P
 * distinct tokens once the repeat has begun, log P, averaged over the
 * repeated part's predictions of every sequence. */
Test(induction, seen_tokens_loss_is_log_of_the_tokens_seen)
{
    enum { T = 8 };
    int tokens[2 * (T + 1)] = {5, 1, 7, 5, 1, 7, 5, 1, 7,     /* P = 3: t = 3 .. 7 */
                               2, 9, 4, 6, 2, 9, 4, 6, 2};   /* P = 4: t = 4 .. 7 */
    int periods[2] = {3, 4};
    const InductionHeldOut held_out = {2, tokens, periods};
    const double expected = (5 * log(3.0) + 4 * log(4.0)) / 9;
    cr_expect(fabs(induction_seen_tokens_loss(&held_out, T) - expected) < 1e-12, "%.6f, not %.6f",
              induction_seen_tokens_loss(&held_out, T), expected);
}

/* The bag that counts: in round k of the repeat, at offset r of the
 * period, the tokens at offsets r + 1 .. P - 1 are seen once less than the
 * others, the next one among them: P - 1 - r of them, or P - 1 (every
 * token but the current) at r = P - 1. P = 3, t = 3 .. 7 (r = 0, 1, 2, 0,
 * 1): 2, 1, 2, 2, 1 tokens; P = 4, t = 4 .. 7 (r = 0 .. 3): 3, 2, 1, 3. */
Test(induction, least_seen_loss_counts_the_tokens_not_yet_repeated)
{
    enum { T = 8 };
    int tokens[2 * (T + 1)] = {5, 1, 7, 5, 1, 7, 5, 1, 7,
                               2, 9, 4, 6, 2, 9, 4, 6, 2};
    int periods[2] = {3, 4};
    const InductionHeldOut held_out = {2, tokens, periods};
    const double expected = (3 * log(2.0) + 2 * log(3.0) + log(2.0)) / 9;
    const double got = induction_least_seen_loss(&held_out, T);
    cr_expect(fabs(got - expected) < 1e-12, "%.6f, not %.6f", got, expected);
    cr_expect_lt(got, induction_seen_tokens_loss(&held_out, T));
}

/* Mean ablation of a head already silent (its W_v rows zero, so its mean
 * output is 0) is zero ablation; of a live head it differs from zero
 * ablation; either way the model is left as it was. */
Test(induction, mean_ablation_puts_in_the_mean_and_restores_the_model)
{
    Rng rng = rng_new(5);
    InductionModel *model = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, 2, &rng);
    const InductionSetup setup = {.seed = 2, .vocab = VOCAB, .length = LENGTH, .examples = 6};
    InductionHeldOut held_out = induction_held_out_new(&setup);
    float losses[6 * LENGTH];
    const double before = induction_losses(model, held_out.tokens, 6, losses);
    const InductionMeasures m = induction_measure(model, &held_out);
    const double live = induction_mean_ablated(model, &held_out, 1, 0);
    cr_expect_gt(fabs(live - m.ablated[1][0]), 1e-4, "mean %.6f, zero %.6f", live,
                 m.ablated[1][0]);
    cr_expect_eq(induction_losses(model, held_out.tokens, 6, losses), before);
    cr_expect(model->layer_offsets[1] == NULL);

    float saved[HIDDENS * HIDDENS];
    induction_ablate_head(model, 0, 1, saved);
    const double zero = induction_measure(model, &held_out).repeated;
    const double mean = induction_mean_ablated(model, &held_out, 0, 1);
    induction_restore_head(model, 0, 1, saved);
    cr_expect(fabs(mean - zero) < 1e-6, "mean-ablating a silent head: %.6f, not %.6f", mean,
              zero);
    cr_expect_eq(induction_losses(model, held_out.tokens, 6, losses), before);
    induction_held_out_free(&held_out);
    induction_free(model);
}

/* The weight on key t - 1 query by query averages to the previous-token
 * score over every query. */
Test(induction, previous_by_query_averages_to_the_score)
{
    Rng rng = rng_new(6);
    InductionModel *model = induction_new(VOCAB, LENGTH, HIDDENS, HEADS, 2, &rng);
    const InductionSetup setup = {.seed = 3, .vocab = VOCAB, .length = LENGTH, .examples = 5};
    InductionHeldOut held_out = induction_held_out_new(&setup);
    const InductionMeasures m = induction_measure(model, &held_out);
    for (int h = 0; h < HEADS[0]; h++) {
        double by_query[LENGTH], mean = 0.0;
        induction_previous_by_query(model, &held_out, 0, h, by_query);
        for (int t = 1; t < LENGTH; t++)
            mean += by_query[t] / (LENGTH - 1);
        cr_expect(fabs(mean - m.previous[0][h]) < 1e-6, "head %d: %.6f, score %.6f", h, mean,
                  m.previous[0][h]);
    }
    induction_held_out_free(&held_out);
    induction_free(model);
}

/* ---- the program ------------------------------------------------------------------ */

#define PROGRAM "06_permutation_invariance/induction_heads"
#define SMALL "--seeds 2 --steps 30 --examples 20 --batch 8"

Test(induction, program_runs_small_and_saves_a_model_it_reads_back)
{
    char dir[64];
    scratch_dir_make(dir, sizeof dir, "induction");
    char args[256];
    snprintf(args, sizeof args, SMALL " --to %s", dir);
    RunResult r = run_program(PROGRAM, args);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "Part 5. Over 2 seeds"), "%s", r.out);
    cr_expect(strstr(r.out, "saved seed 0's two-layer model"), "%s", r.out);
    run_result_free(&r);

    snprintf(args, sizeof args, "--examples 20 --from %s", dir);
    r = run_program(PROGRAM, args);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "Part 3. The heads"), "%s", r.out);
    run_result_free(&r);
    scratch_dir_remove(dir);
}

Test(induction, bad_options_get_one_line)
{
    static const char *const cases[][2] = {
        {"--hiddens 30 --heads1 4", "does not divide"},
        {"--hiddens 30 --heads2 4", "--heads2 4"},
        {"--vocab 8 --length 32", "fewer than 16"},
        {"--from /nonexistent/dir", "/nonexistent/dir"},
        {"--steps 0", "--steps"},
    };
    expect_bad_options(PROGRAM, cases, sizeof cases / sizeof cases[0]);
}
