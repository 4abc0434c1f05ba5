/*
 * test_reversal.c - chapter 06's reversal model (common/learn/reversal_model.c)
 * and its task (common/learn/tasks.c): five Adam steps against PyTorch's,
 * the backward against finite differences, the task's examples, and the
 * program 06_permutation_invariance/positions.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, V = vocabulary.
 *
 * The PyTorch reference is in tests/fixtures/reversal/, made by
 * tests/fixtures/make_reversal_fixtures.py.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "helpers.h"
#include "io/model.h"
#include "io/npy.h"
#include "learn/loss.h"
#include "learn/optim.h"
#include "learn/reversal_model.h"
#include "learn/tasks.h"
#include "permute_tokens.h"
#include "tensor.h"

#define FIXTURE "tests/fixtures/reversal"

/* The fixture's sizes, as make_reversal_fixtures.py sets them. */
enum { VOCAB = 10, LENGTH = 6, HIDDENS = 8, HEADS = 2, BATCH = 4, STEPS = 5 };
static const float LR = 0.01f;

/* batch <- tokens (B, T): the sequences, and their reversals as answers. */
static void fill_reversal(TaskBatch *batch, const int *tokens)
{
    const int B = batch->batch_size, T = batch->num_pairs;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int token = tokens[b * T + t];
            batch->keys[b * T + t] = batch->values[b * T + t] = token;
            batch->queries[b * T + t] = token;
            batch->answers[b * T + (T - 1 - t)] = token;
        }
}

static ReversalModel *load_model(const char *dir, bool positions)
{
    Rng rng = rng_new(0);
    ReversalModel *model = reversal_new(VOCAB, HIDDENS, HEADS, positions, &rng);
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_load(dir, model->files, REVERSAL_NUM_FILES, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(model->saved_num_heads, HEADS);
    return model;
}

Test(reversal, five_adam_steps_equal_pytorch)
{
    ReversalModel *model = load_model(FIXTURE "/initial", true);
    ReversalModel *expected = load_model(FIXTURE "/after_5_steps", true);
    NpyInts tokens;
    char err[NPY_ERR_LEN];
    cr_assert_eq(npy_load_ints(FIXTURE "/tokens.npy", &tokens, err, sizeof err), 0, "%s", err);
    cr_assert(tokens.ndim == 3 && tokens.shape[0] == STEPS && tokens.shape[1] == BATCH &&
              tokens.shape[2] == LENGTH);
    Tensor *losses = npy_load(FIXTURE "/losses.npy", err, sizeof err);
    cr_assert(losses, "%s", err);

    Task task = task_reversal(LENGTH, VOCAB);
    TaskBatch *batch = task_batch_new(&task, BATCH);
    Adam *adam = adam_new(model->params, REVERSAL_NUM_PARAMS, LR);
    for (int step = 0; step < STEPS; step++) {
        fill_reversal(batch, tokens.data + (size_t)step * BATCH * LENGTH);
        const double loss = reversal_train_step(model, adam, batch);
        cr_expect(fabs(loss - losses->data[step]) <= 1e-5 * fabs(losses->data[step]),
                  "step %d: loss %.7f, PyTorch %.7f", step, loss, (double)losses->data[step]);
    }
    /* every parameter within 1e-4 of PyTorch's, relative to its largest entry */
    for (int i = 0; i < REVERSAL_NUM_PARAMS; i++) {
        const double error = gradcheck_rel_error(model->params[i].value,
                                                 expected->params[i].value);
        cr_expect(error <= 1e-4, "%s: relative error %.2e", model->params[i].name, error);
    }
    /* and the steps moved them: the test compares something */
    ReversalModel *initial = load_model(FIXTURE "/initial", true);
    cr_expect(gradcheck_rel_error(initial->params[0].value, expected->params[0].value) > 1e-3);

    reversal_free(initial);
    adam_free(adam);
    task_batch_free(batch);
    tensor_free(losses);
    npy_ints_free(&tokens);
    reversal_free(expected);
    reversal_free(model);
}

/* ---- the backward against finite differences -------------------------------- */

typedef struct {
    ReversalModel *model;
    TaskBatch *batch;
} LossContext;

static double model_loss(void *ctx)
{
    LossContext *c = ctx;
    return reversal_evaluate(c->model, c->batch, NULL);
}

static void check_gradients(bool positions)
{
    Rng rng = rng_new(5);
    ReversalModel *model = reversal_new(VOCAB, HIDDENS, HEADS, positions, &rng);
    Task task = task_reversal(LENGTH, VOCAB);
    TaskBatch *batch = task_batch_new(&task, 3);
    task_draw(&task, batch, SPLIT_TRAIN, &rng);

    parameters_zero_grad(model->params, REVERSAL_NUM_PARAMS);
    ReversalCache cache = {0};
    Tensor *logits = reversal_forward(model, batch, NULL, &cache);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    reversal_backward(model, &cache, grad_logits);

    LossContext ctx = {model, batch};
    for (int i = 0; i < REVERSAL_NUM_PARAMS; i++) {
        Tensor *numeric = gradcheck_numeric(model_loss, &ctx, model->params[i].value, 1e-2);
        const double error = gradcheck_rel_error(model->params[i].grad, numeric);
        cr_expect(error < 1e-3, "%s (positions %d): relative error %.2e",
                  model->params[i].name, positions, error);
        tensor_free(numeric);
    }
    tensor_free(grad_logits);
    tensor_free(logits);
    reversal_cache_free(&cache);
    task_batch_free(batch);
    reversal_free(model);
}

Test(reversal, backward_equals_finite_differences)
{
    check_gradients(false);
    check_gradients(true);
}

/* ---- the task ------------------------------------------------------------------ */

Test(reversal, examples_are_distinct_tokens_reversed)
{
    Task task = task_reversal(8, 16);
    TaskBatch *batch = task_batch_new(&task, 50);
    Rng rng = rng_new(1);
    for (int split = 0; split < 2; split++) {
        task_draw(&task, batch, (TaskSplit)split, &rng);
        for (int b = 0; b < 50; b++) {
            const int *tokens = batch->keys + b * 8, *answers = batch->answers + b * 8;
            cr_expect_eq(task_split_of(batch, b), (TaskSplit)split);
            for (int t = 0; t < 8; t++) {
                cr_expect(tokens[t] >= 0 && tokens[t] < 16);
                cr_expect_eq(answers[t], tokens[7 - t]);
                cr_expect_eq(batch->queries[b * 8 + t], tokens[t]);
                for (int s = 0; s < t; s++)
                    cr_expect_neq(tokens[s], tokens[t], "example %d repeats a token", b);
            }
        }
    }
    task_batch_free(batch);
}

/* Without positions the model is permutation equivariant (chapter 06):
 * permuting a sequence permutes its logits, so no training can make
 * position t find the token at T-1-t. */
Test(reversal, without_positions_logits_are_equivariant)
{
    Rng rng = rng_new(3);
    ReversalModel *model = reversal_new(16, 16, 2, false, &rng);
    Task task = task_reversal(8, 16);
    TaskBatch *batch = task_batch_new(&task, 1), *moved = task_batch_new(&task, 1);
    task_draw(&task, batch, SPLIT_TRAIN, &rng);
    const int perm[8] = {3, 0, 7, 5, 1, 6, 2, 4};   /* moved[t] = batch[perm[t]] */
    for (int t = 0; t < 8; t++)
        moved->keys[t] = moved->values[t] = moved->queries[t] = batch->keys[perm[t]];
    Tensor *logits = reversal_forward(model, batch, NULL, NULL);
    Tensor *moved_logits = reversal_forward(model, moved, NULL, NULL);
    for (int t = 0; t < 8; t++)
        for (int v = 0; v < 16; v++)
            cr_expect_float_eq(AT3(moved_logits, 0, t, v), AT3(logits, 0, perm[t], v), 1e-5f);

    /* with positions the same permutation changes more than the order */
    model->positions = true;
    Tensor *with = reversal_forward(model, batch, NULL, NULL);
    Tensor *with_moved = reversal_forward(model, moved, NULL, NULL);
    float largest = 0.0f;
    for (int t = 0; t < 8; t++)
        for (int v = 0; v < 16; v++)
            largest = fmaxf(largest, fabsf(AT3(with_moved, 0, t, v) - AT3(with, 0, perm[t], v)));
    cr_expect_gt(largest, 1e-2f);
    tensor_free(with);
    tensor_free(with_moved);
    tensor_free(logits);
    tensor_free(moved_logits);
    task_batch_free(batch);
    task_batch_free(moved);
    reversal_free(model);
}
