/*
 * test_head_experiments.c - chapter 05's heads experiment and head
 * importance: the two-key task (common/learn/tasks.c), its model
 * (common/learn/two_key_model.c), the head gates (common/learn/head_gates.c), and the
 * programs heads_experiment and head_importance.
 *
 * Legend: B = batch_size, P = entries of a dictionary, H = num_heads,
 * D = num_hiddens, d = D / H.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "helpers.h"
#include "run/saved_models.h"
#include "learn/head_gates.h"
#include "learn/loss.h"
#include "learn/optim.h"
#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "tensor.h"

enum { PAIRS = 5, COUNTRIES = 9, HIDDENS = 12, HEADS = 3, BATCH = 4 };

static TaskBatch *draw_batch(const Task *task, int batch_size, uint64_t seed)
{
    TaskBatch *batch = task_batch_new(task, batch_size);
    Rng rng = rng_new(seed);
    task_draw(task, batch, SPLIT_TRAIN, &rng);
    return batch;
}

/* ---- the task ------------------------------------------------------------------ */

Test(two_keys, examples_ask_two_entries_in_order)
{
    Task task = task_two_keys(PAIRS, COUNTRIES, COUNTRIES);
    cr_assert_eq(task.num_queries, 2);
    cr_assert_eq(task.num_answers, 2);
    TaskBatch *batch = task_batch_new(&task, 200);
    Rng rng = rng_new(4);
    int asked_first[PAIRS] = {0};
    for (int split = 0; split < 2; split++) {
        task_draw(&task, batch, (TaskSplit)split, &rng);
        for (int b = 0; b < 200; b++) {
            const int *keys = batch->keys + b * PAIRS, *values = batch->values + b * PAIRS;
            const int *query = batch->queries + b * 2, *answer = batch->answers + b * 2;
            cr_expect_eq(task_split_of(batch, b), (TaskSplit)split);
            cr_expect_neq(query[0], query[1], "example %d names one country twice", b);
            for (int i = 0; i < 2; i++) {
                int entry = -1;
                for (int j = 0; j < PAIRS; j++)
                    if (keys[j] == query[i])
                        entry = j;
                cr_assert_geq(entry, 0, "example %d: query %d is not in the dictionary", b, i);
                cr_expect_eq(answer[i], values[entry], "example %d: answer %d", b, i);
                if (i == 0)
                    asked_first[entry]++;
            }
            for (int j = 0; j < PAIRS; j++)
                for (int k = 0; k < j; k++) {
                    cr_expect_neq(keys[j], keys[k]);
                    cr_expect_neq(values[j], values[k]);
                }
        }
    }
    /* every entry gets asked first: the order of the query is random */
    for (int j = 0; j < PAIRS; j++)
        cr_expect_gt(asked_first[j], 40, "entry %d asked first %d times of 400", j,
                     asked_first[j]);
    task_batch_free(batch);
}

/* ---- the model's backward ---------------------------------------------------- */

typedef struct {
    TwoKeyModel *model;
    const TaskBatch *batch;
    float gates[HEADS];
} LossContext;

static double model_loss(void *ctx)
{
    LossContext *c = ctx;
    return two_key_evaluate(c->model, c->batch, c->gates, NULL);
}

/* Every parameter's gradient, with the MLP (mlp_hiddens > 0) or without,
 * against central differences of the loss. */
static void check_backward(int mlp_hiddens)
{
    Rng rng = rng_new(6);
    TwoKeyModel *model = two_key_new_mlp(COUNTRIES, COUNTRIES, HIDDENS, HEADS, mlp_hiddens,
                                         &rng);
    cr_assert_eq(model->num_params, mlp_hiddens > 0 ? 12 : 8);
    /* a central difference across a ReLU's kink measures neither side: the
     * MLP's units start far from it, every other one on (bias +3) and the
     * others off (bias -3), whose rows of W1 must then get no gradient */
    for (int i = 0; i < mlp_hiddens; i++)
        model->mlp_bias1->data[i] = i % 2 ? -3.0f : 3.0f;
    Task task = task_two_keys(PAIRS, COUNTRIES, COUNTRIES);
    TaskBatch *batch = draw_batch(&task, BATCH, 7);

    parameters_zero_grad(model->params, model->num_params);
    TwoKeyCache cache = {0};
    Tensor *logits = two_key_forward(model, batch, NULL, NULL, &cache);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    two_key_backward(model, &cache, grad_logits, NULL);

    for (int i = 1; i < mlp_hiddens; i += 2)
        for (int j = 0; j < HIDDENS; j++)
            cr_expect_eq(AT2(model->grad_mlp_weight1, i, j), 0.0f, "unit %d is off", i);
    LossContext ctx = {model, batch, {1.0f, 1.0f, 1.0f}};
    for (int i = 0; i < model->num_params; i++) {
        Tensor *numeric = gradcheck_numeric(model_loss, &ctx, model->params[i].value, 1e-2);
        const double error = gradcheck_rel_error(model->params[i].grad, numeric);
        cr_expect(error < 1e-3, "%s: relative error %.2e", model->params[i].name, error);
        cr_expect_gt(tensor_max_abs(model->params[i].grad), 0.0f, "%s: no gradient",
                     model->params[i].name);
        tensor_free(numeric);
    }
    tensor_free(grad_logits);
    tensor_free(logits);
    two_key_cache_free(&cache);
    task_batch_free(batch);
    two_key_free(model);
}

Test(two_key_model, backward_equals_finite_differences) { check_backward(0); }
Test(two_key_model, backward_with_the_mlp_equals_finite_differences) { check_backward(5); }

/* The MLP is a residual branch: with its second layer zero, the model with
 * it gives the logits of the model without it (the same seed draws the
 * same other parameters, the MLP's after them). */
Test(two_key_model, a_zero_mlp_changes_nothing)
{
    Rng a = rng_new(21), b = rng_new(21);
    TwoKeyModel *plain = two_key_new(COUNTRIES, COUNTRIES, HIDDENS, HEADS, &a);
    TwoKeyModel *with = two_key_new_mlp(COUNTRIES, COUNTRIES, HIDDENS, HEADS, 5, &b);
    Task task = task_two_keys(PAIRS, COUNTRIES, COUNTRIES);
    TaskBatch *batch = draw_batch(&task, BATCH, 8);
    Tensor *expected = two_key_forward(plain, batch, NULL, NULL, NULL);
    Tensor *before = two_key_forward(with, batch, NULL, NULL, NULL);
    cr_expect_gt(tensor_max_abs_diff(before, expected), 1e-3f, "the MLP should change them");
    for (size_t i = 0; i < with->mlp_weight2->size; i++)
        with->mlp_weight2->data[i] = 0.0f;
    for (size_t i = 0; i < with->mlp_bias2->size; i++)
        with->mlp_bias2->data[i] = 0.0f;
    Tensor *after = two_key_forward(with, batch, NULL, NULL, NULL);
    cr_expect_eq(tensor_max_abs_diff(after, expected), 0.0f);
    TENSOR_FREE(expected, before, after);
    task_batch_free(batch);
    two_key_free(plain);
    two_key_free(with);
}

/* One head set by hand (equal weight on the two named entries, ties broken
 * by a fixed order of capitals) is right about half the time, where
 * trained single heads stay near 7%: held-out examples of the chapter's
 * sizes (6 entries, 16 countries, num_hiddens 32). */
Test(two_key_model, one_head_set_by_hand_is_right_half_the_time)
{
    Rng rng = rng_new(0);
    TwoKeyModel *model = two_key_new(16, 16, 32, 1, &rng);
    two_key_set_by_hand(model);
    Task task = task_two_keys(6, 16, 16);
    TaskBatch *held_out = task_batch_new(&task, 2000);
    Rng draw = rng_use(0, RNG_HELDOUT);
    task_draw(&task, held_out, SPLIT_HELDOUT, &draw);
    TwoKeyCorrect c;
    two_key_evaluate(model, held_out, NULL, &c);
    /* both right exactly when the query's order is the capitals' order */
    int in_order = 0;
    for (int b = 0; b < 2000; b++)
        in_order += held_out->answers[2 * b] < held_out->answers[2 * b + 1];
    cr_expect_eq(c.pairs, in_order);
    cr_expect_eq(c.first, in_order);
    cr_expect_geq(c.pairs, 900, "both right in %d of 2000", c.pairs);
    cr_expect_leq(c.pairs, 1100, "both right in %d of 2000", c.pairs);
    task_batch_free(held_out);
    two_key_free(model);
}

/* The gate's slope is one dot product of concat and grad_concat: equal to
 * a central difference of the loss along the gate, head by head. */
Test(head_gates, gate_gradient_equals_finite_differences)
{
    Rng rng = rng_new(8);
    TwoKeyModel *model = two_key_new(COUNTRIES, COUNTRIES, HIDDENS, HEADS, &rng);
    Task task = task_two_keys(PAIRS, COUNTRIES, COUNTRIES);
    TaskBatch *batch = draw_batch(&task, BATCH, 9);

    TwoKeyCache cache = {0};
    Tensor *logits = two_key_forward(model, batch, NULL, NULL, &cache);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    Tensor *grad_concat = NULL;
    two_key_backward(model, &cache, grad_logits, &grad_concat);
    Tensor *gate_grads = head_gate_grads(cache.attention.clear.concat, grad_concat, HEADS);
    cr_assert(tensor_has_shape(gate_grads, SHAPE(BATCH, HEADS)));

    Tensor *gates = tensor_ones(SHAPE(HEADS));
    LossContext ctx = {model, batch, {1.0f, 1.0f, 1.0f}};
    for (int h = 0; h < HEADS; h++) {
        double analytic = 0.0;   /* the batch loss's slope: the sum over examples */
        for (int b = 0; b < BATCH; b++)
            analytic += AT2(gate_grads, b, h);
        const float eps = 1e-2f, above = 1.0f + eps, below = 1.0f - eps;
        ctx.gates[h] = above;
        const double up = model_loss(&ctx);
        ctx.gates[h] = below;
        const double down = model_loss(&ctx);
        ctx.gates[h] = 1.0f;
        const double numeric = (up - down) / ((double)above - (double)below);
        cr_expect(fabs(analytic - numeric) <= 1e-3 * fabs(numeric) + 1e-6,
                  "head %d: dot product %.7f, finite difference %.7f", h, analytic, numeric);
        cr_expect(fabs(numeric) > 1e-4, "head %d: a slope of 0 would test nothing", h);
    }
    tensor_free(gates);
    tensor_free(gate_grads);
    tensor_free(grad_concat);
    tensor_free(grad_logits);
    tensor_free(logits);
    two_key_cache_free(&cache);
    task_batch_free(batch);
    two_key_free(model);
}

/* I_h is the mean over examples of |each example's own slope|: the same
 * as finite differences taken one example at a time. */
Test(head_gates, importance_is_the_mean_absolute_slope_per_example)
{
    Rng rng = rng_new(10);
    TwoKeyModel *model = two_key_new(COUNTRIES, COUNTRIES, HIDDENS, HEADS, &rng);
    Task task = task_two_keys(PAIRS, COUNTRIES, COUNTRIES);
    TaskBatch *batch = draw_batch(&task, BATCH, 11);
    double importance[HEADS];
    two_key_head_importance(model, batch, importance);
    /* the gradients are left zero */
    for (int i = 0; i < TWO_KEY_NUM_PARAMS; i++)
        cr_expect_eq(tensor_max_abs(model->params[i].grad), 0.0f, "%s", model->params[i].name);

    double expected[HEADS] = {0};
    TaskBatch *one = task_batch_new(&task, 1);
    for (int b = 0; b < BATCH; b++) {
        memcpy(one->keys, batch->keys + b * PAIRS, PAIRS * sizeof(int));
        memcpy(one->values, batch->values + b * PAIRS, PAIRS * sizeof(int));
        memcpy(one->queries, batch->queries + b * 2, 2 * sizeof(int));
        memcpy(one->answers, batch->answers + b * 2, 2 * sizeof(int));
        LossContext ctx = {model, one, {1.0f, 1.0f, 1.0f}};
        for (int h = 0; h < HEADS; h++) {
            ctx.gates[h] = 1.01f;
            const double up = model_loss(&ctx);
            ctx.gates[h] = 0.99f;
            const double down = model_loss(&ctx);
            ctx.gates[h] = 1.0f;
            expected[h] += fabs((up - down) / ((double)1.01f - (double)0.99f)) / BATCH;
        }
    }
    for (int h = 0; h < HEADS; h++)
        cr_expect(fabs(importance[h] - expected[h]) <= 1e-3 * expected[h],
                  "head %d: importance %.7f, from finite differences %.7f", h, importance[h],
                  expected[h]);
    task_batch_free(one);
    task_batch_free(batch);
    two_key_free(model);
}

/* A gate of 0 is the head's columns of W_o set to 0; gates of 1 change
 * nothing; all gates 0 leave only the readout's bias. */
Test(head_gates, gates_scale_each_heads_columns_of_W_o)
{
    Rng rng = rng_new(12);
    TwoKeyModel *model = two_key_new(COUNTRIES, COUNTRIES, HIDDENS, HEADS, &rng);
    const int d = HIDDENS / HEADS;
    const float gates[HEADS] = {1.0f, 0.0f, 0.5f};
    Tensor *W_o = head_gated_W_o(model->attention, gates);
    for (int i = 0; i < HIDDENS; i++)
        for (int c = 0; c < HIDDENS; c++)
            cr_expect_eq(AT2(W_o, i, c), AT2(model->attention->W_o, i, c) * gates[c / d]);
    tensor_free(W_o);

    Task task = task_two_keys(PAIRS, COUNTRIES, COUNTRIES);
    TaskBatch *batch = draw_batch(&task, BATCH, 13);
    const float ones[HEADS] = {1.0f, 1.0f, 1.0f}, zeros[HEADS] = {0.0f, 0.0f, 0.0f};
    Tensor *plain = two_key_forward(model, batch, NULL, NULL, NULL);
    Tensor *gated = two_key_forward(model, batch, ones, NULL, NULL);
    Tensor *off = two_key_forward(model, batch, zeros, NULL, NULL);
    cr_expect_eq(tensor_max_abs_diff(plain, gated), 0.0f);
    for (int b = 0; b < BATCH; b++)
        for (int i = 0; i < 2 * COUNTRIES; i++)
            cr_expect_float_eq(off->data[b * 2 * COUNTRIES + i], model->readout_bias->data[i],
                               1e-6f);
    /* evaluating from the heads computed once gives the same loss and counts */
    Tensor *heads = two_key_heads(model, batch);
    const float some[HEADS] = {1.0f, 0.0f, 0.7f};
    const float *settings[] = {NULL, ones, zeros, some};
    for (int i = 0; i < 4; i++) {
        TwoKeyCorrect a, b;
        const double full = two_key_evaluate(model, batch, settings[i], &a);
        const double from_heads = two_key_evaluate_heads(model, batch, heads, settings[i], &b);
        cr_expect(fabs(full - from_heads) <= 1e-6 * fabs(full), "setting %d: loss %.8f and %.8f",
                  i, full, from_heads);
        cr_expect(a.first == b.first && a.second == b.second && a.pairs == b.pairs);
    }
    TENSOR_FREE(heads, plain, gated, off);
    task_batch_free(batch);
    two_key_free(model);
}

/* ---- saving and loading -------------------------------------------------------- */

Test(two_key_model, save_and_load_round_trip)
{
    char dir[64];
    scratch_dir_make(dir, sizeof dir, "two_key");
    Rng rng = rng_new(14);
    TwoKeyModel *model = two_key_new(COUNTRIES, COUNTRIES + 2, HIDDENS, HEADS, &rng);
    char err[MODEL_ERR_LEN];
    cr_assert_eq(two_key_save(model, dir, err, sizeof err), 0, "%s", err);
    TwoKeyModel *loaded = two_key_from_dir(dir, err, sizeof err);
    cr_assert(loaded, "%s", err);
    cr_expect_eq(loaded->key_vocab, COUNTRIES);
    cr_expect_eq(loaded->value_vocab, COUNTRIES + 2);
    cr_expect_eq(loaded->num_hiddens, HIDDENS);
    cr_expect_eq(loaded->num_heads, HEADS);
    for (int i = 0; i < TWO_KEY_NUM_PARAMS; i++)
        cr_expect_eq(tensor_max_abs_diff(loaded->params[i].value, model->params[i].value), 0.0f,
                     "%s", model->params[i].name);
    /* a model with the MLP comes back with it */
    Rng mlp_rng = rng_new(16);
    TwoKeyModel *mlp = two_key_new_mlp(COUNTRIES, COUNTRIES, HIDDENS, HEADS, 6, &mlp_rng);
    cr_assert_eq(two_key_save(mlp, dir, err, sizeof err), 0, "%s", err);
    TwoKeyModel *mlp_loaded = two_key_from_dir(dir, err, sizeof err);
    cr_assert(mlp_loaded, "%s", err);
    cr_expect_eq(mlp_loaded->mlp_hiddens, 6);
    for (int i = 0; i < mlp->num_params; i++)
        cr_expect_eq(tensor_max_abs_diff(mlp_loaded->params[i].value, mlp->params[i].value),
                     0.0f, "%s", mlp->params[i].name);
    two_key_free(mlp_loaded);
    two_key_free(mlp);
    cr_assert_eq(two_key_save(model, dir, err, sizeof err), 0, "%s", err);
    /* a model of another number of heads is refused, and left as it was */
    Rng other_rng = rng_new(15);
    TwoKeyModel *other = two_key_new(COUNTRIES, COUNTRIES + 2, HIDDENS, 2, &other_rng);
    Tensor *before = tensor_copy(other->embed_keys);
    cr_expect_eq(two_key_load(other, dir, err, sizeof err), -1);
    cr_expect(strstr(err, "num_heads.npy: the model has 2 heads, the file says 3"), "%s", err);
    cr_expect_eq(tensor_max_abs_diff(other->embed_keys, before), 0.0f);
    tensor_free(before);
    two_key_free(other);
    two_key_free(loaded);
    two_key_free(model);
    scratch_dir_remove(dir);
}

/* ---- the programs -------------------------------------------------------------- */

/* The row of a table that starts with label, read as up to n numbers after
 * the label (percent signs skipped); returns how many were read. */
static int read_row(const char *text, const char *label, double *numbers, int n)
{
    const char *row = strstr(text, label);
    if (row == NULL)
        return 0;
    row += strlen(label);
    int count = 0;
    while (count < n) {
        char *end;
        double x = strtod(row, &end);
        if (end == row)
            break;
        numbers[count++] = x;
        row = end;
        while (*row == '%' || *row == ' ')
            row++;
        if (*row == '\n')
            break;
    }
    return count;
}

/* A row of heads_experiment's table: successes out of seeds, the median,
 * the range, the better answer and the other one (medians). */
typedef struct {
    int succeeded, seeds;
    double median, lowest, highest, better, other;
} HeadsRow;

static HeadsRow read_heads_row(const char *out, int heads, int head_size)
{
    char label[64];
    snprintf(label, sizeof label, "\n  %5d  %9d  ", heads, head_size);
    const char *row = strstr(out, label);
    cr_assert(row, "no row for %d heads in\n%s", heads, out);
    HeadsRow r;
    cr_assert_eq(sscanf(row + strlen(label), " %d of %d %lf%% %lf%% to %lf%% %lf%% %lf%%",
                        &r.succeeded, &r.seeds, &r.median, &r.lowest, &r.highest, &r.better,
                        &r.other), 7, "%s", row);
    return r;
}

Test(programs, heads_experiment_one_head_fails_where_four_succeed)
{
    /* the default sizes and steps, fewer seeds and held-out examples (the
     * chapter's quotes are checked by test_readmes.c) */
    RunResult r = run_program("05_multihead/heads_experiment", "--heads 1,4 --seeds 3 "
                              "--examples 400");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    const HeadsRow one = read_heads_row(r.out, 1, 32), four = read_heads_row(r.out, 4, 8);
    cr_expect_eq(one.seeds, 3);
    cr_expect_eq(one.succeeded, 0);
    cr_expect_eq(four.succeeded, 3);
    cr_expect_lt(one.highest, 20.0, "one head: at best %.1f%% of pairs right", one.highest);
    cr_expect_geq(four.lowest, 99.0, "four heads: at worst %.1f%% of pairs right", four.lowest);
    cr_expect(one.lowest <= one.median && one.median <= one.highest);
    /* one head answers one capital and guesses the other */
    cr_expect_geq(one.better, 90.0, "%.1f%%", one.better);
    cr_expect_lt(one.other, 20.0, "%.1f%%", one.other);
    /* both right is never more than the other answer alone */
    cr_expect(one.median <= one.other + 0.05);
    /* the chance line: 2 of the 6 entries in order, 1 in 30 */
    cr_expect(strstr(r.out, "right 1 time in 30 (3.3%); one capital 1 time in 6 (16.7%)"),
              "%s", r.out);
    /* and the hand-set head: about half */
    double both = 0.0;
    const char *hand = strstr(r.out, "held-out examples:\n  both capitals right ");
    cr_assert(hand, "%s", r.out);
    cr_assert_eq(sscanf(hand, "held-out examples: both capitals right %lf%%", &both), 1);
    cr_expect_geq(both, 45.0);
    run_result_free(&r);
}

/* The same numbers whatever the number of threads. */
Test(programs, heads_experiment_threads_do_not_change_the_numbers)
{
    const char *args = "--heads 1,2 --seeds 3 --steps 40 --examples 100 --mlp 8";
    char one[128], three[128];
    snprintf(one, sizeof one, "%s --threads 1", args);
    snprintf(three, sizeof three, "%s --threads 3", args);
    RunResult a = run_program("05_multihead/heads_experiment", one);
    RunResult b = run_program("05_multihead/heads_experiment", three);
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_expect_str_eq(a.out, b.out);
    cr_expect(strstr(a.out, "a residual MLP of 8 ReLU units"), "%s", a.out);
    run_result_free(&a);
    run_result_free(&b);
}

Test(programs, positions_only_with_the_encoding)
{
    RunResult r = run_program("06_permutation_invariance/positions", "--seeds 2 --examples 400");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    /* succeeded of 2, median, lowest, highest: near the 1 in 7 of a guess
     * among the other letters without; at least 99% with */
    static const char *const rows[2] = {"\n  without positions", "\n  with positions"};
    for (int with = 0; with < 2; with++) {
        const char *row = strstr(r.out, rows[with]);
        cr_assert(row, "%s", r.out);
        int succeeded = -1, seeds = -1;
        double median, lowest, highest;
        cr_assert_eq(sscanf(row + strlen(rows[with]), " %d of %d %lf%% %lf%% to %lf%%",
                            &succeeded, &seeds, &median, &lowest, &highest), 5, "%s", row);
        cr_expect_eq(seeds, 2);
        cr_expect_eq(succeeded, with ? 2 : 0);
        cr_expect(lowest <= median && median <= highest);
        if (with)
            cr_expect_geq(lowest, 99.0, "with: %.1f%%", lowest);
        else
            cr_expect(fabs(lowest - 100.0 / 7.0) < 3.0 && fabs(highest - 100.0 / 7.0) < 3.0,
                      "without: %.1f%% to %.1f%%", lowest, highest);
    }
    run_result_free(&r);
}

Test(programs, head_importance_ranks_and_prunes)
{
    RunResult r = run_program("05_multihead/head_importance", "--examples 400 --orders 5");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    const char *table = strstr(r.out, "   heads kept");
    cr_assert(table, "%s", r.out);
    /* heads kept 8 down to 0: least first, most first, random. With every
     * head, and with none, the order does not matter; in between, pruning
     * the least important first keeps more accuracy over the whole curve
     * than the random orders, and they more than the most important first */
    double area[3] = {0};
    for (int kept = 8; kept >= 0; kept--) {
        char label[32];
        snprintf(label, sizeof label, "\n   %10d", kept);
        double row[3];
        cr_assert_eq(read_row(table, label, row, 3), 3, "row %d of\n%s", kept, table);
        for (int i = 0; i < 3; i++)
            area[i] += row[i];
        if (kept == 8 || kept == 0)
            cr_expect(row[0] == row[1] && row[1] == row[2], "%d heads kept", kept);
    }
    cr_expect(area[0] >= area[2] && area[2] >= area[1], "areas: least first %.1f, most first "
              "%.1f, random %.1f", area[0], area[1], area[2]);
    run_result_free(&r);
}

/* --seeds: part 4 over several models; the best subset bounds every
 * curve at every number of heads kept. */
Test(programs, head_importance_over_seeds)
{
    RunResult r = run_program("05_multihead/head_importance", "--seeds 3 --steps 300 "
                              "--examples 300 --orders 3 --heads 4 --hiddens 16");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    const char *part3 = strstr(r.out, "Part 3."), *part4 = strstr(r.out, "Part 4. Over 3 seeds");
    cr_assert(part3 && part4, "%s", r.out);
    for (int kept = 4; kept >= 0; kept--) {
        char label[32];
        snprintf(label, sizeof label, "\n   %10d", kept);
        double row[4];
        cr_assert_eq(read_row(part3, label, row, 4), 4, "%s", part3);
        for (int i = 0; i < 3; i++)
            cr_expect_leq(row[i], row[3] + 1e-9, "%d kept: %.1f above the best %.1f", kept,
                          row[i], row[3]);
    }
    cr_expect(strstr(part4, "of area"), "%s", part4);
    run_result_free(&r);
}

/* The same seed prints the same numbers, every time. */
Test(programs, the_same_seed_prints_the_same)
{
    static const char *const runs[][2] = {
        {"05_multihead/heads_experiment", "--steps 30 --seeds 2 --examples 100 --seed 3"},
        {"06_permutation_invariance/positions", "--steps 30 --seeds 2 --examples 100 --seed 3"},
        {"05_multihead/head_importance", "--steps 30 --examples 100 --orders 3 --seed 3"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        RunResult a = run_program(runs[i][0], runs[i][1]);
        RunResult b = run_program(runs[i][0], runs[i][1]);
        cr_expect_eq(a.status, 0, "%s: %s", runs[i][0], a.err);
        cr_expect_str_eq(a.out, b.out, "%s %s", runs[i][0], runs[i][1]);
        run_result_free(&a);
        run_result_free(&b);
    }
    /* and another seed other numbers */
    RunResult c = run_program(runs[0][0], "--steps 30 --seeds 2 --examples 100 --seed 4");
    RunResult d = run_program(runs[0][0], runs[0][1]);
    cr_expect_str_neq(c.out, d.out);
    run_result_free(&c);
    run_result_free(&d);
}

/* A model saved with --to and read back with --from gives the same parts 2
 * and 3. */
Test(programs, head_importance_to_then_from)
{
    char dir[64], args[256];
    scratch_dir_make(dir, sizeof dir, "head_importance");
    snprintf(args, sizeof args, "--steps 40 --examples 200 --orders 3 --to %s", dir);
    RunResult trained = run_program("05_multihead/head_importance", args);
    cr_assert_eq(trained.status, 0, "%s", trained.err);
    snprintf(args, sizeof args, "--examples 200 --orders 3 --from %s", dir);
    RunResult loaded = run_program("05_multihead/head_importance", args);
    cr_assert_eq(loaded.status, 0, "%s", loaded.err);
    const char *a = strstr(trained.out, "Part 2."), *b = strstr(loaded.out, "Part 2.");
    cr_assert(a && b);
    cr_expect_str_eq(a, b);
    run_result_free(&trained);
    run_result_free(&loaded);
    scratch_dir_remove(dir);
}

/* A saved model whose parameters are finite but overflow in the forward
 * (embeddings of 1e30): --from stops with one line, exit 1, before any
 * part prints a NaN accuracy, slope or curve. */
Test(programs, head_importance_from_a_model_that_overflows)
{
    char dir[64], args[256], path[128];
    scratch_dir_make(dir, sizeof dir, "head_importance");
    snprintf(args, sizeof args, "--steps 1 --examples 20 --orders 1 --to %s", dir);
    RunResult trained = run_program("05_multihead/head_importance", args);
    cr_assert_eq(trained.status, 0, "%s", trained.err);
    snprintf(path, sizeof path, "%s/embed_keys.weight.npy", dir);
    npy_fill_alternating(path, 1e30f);
    snprintf(args, sizeof args, "--examples 20 --orders 1 --from %s", dir);
    RunResult loaded = run_program("05_multihead/head_importance", args);
    cr_expect_eq(loaded.status, 1);
    cr_expect(is_one_line(loaded.err), "stderr: %s", loaded.err);
    cr_expect_null(strstr(loaded.out, "nan"), "%s", loaded.out);
    run_result_free(&trained);
    run_result_free(&loaded);
    scratch_dir_remove(dir);
}

/* --help lists every option of each program's table. */
Test(programs, help_lists_every_option)
{
    static const char *const heads[] = {"--heads", "--hiddens", "--pairs", "--countries",
                                        "--mlp", "--steps", "--batch", "--lr", "--seeds",
                                        "--seed", "--examples", "--threads", "--plot"};
    static const char *const importance[] = {"--from", "--to", "--heads", "--hiddens",
                                             "--countries", "--steps", "--batch", "--lr",
                                             "--pairs", "--examples", "--orders", "--seed",
                                             "--seeds", "--threads", "--plot"};
    static const char *const positions[] = {"--length", "--letters", "--hiddens", "--heads",
                                            "--steps", "--batch", "--lr", "--seeds", "--seed",
                                            "--examples", "--plot"};
    expect_help_lists("05_multihead/heads_experiment", heads, sizeof heads / sizeof heads[0]);
    expect_help_lists("05_multihead/head_importance", importance,
                      sizeof importance / sizeof importance[0]);
    expect_help_lists("06_permutation_invariance/positions", positions,
                      sizeof positions / sizeof positions[0]);
}
