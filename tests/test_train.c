/*
 * test_train.c - the training pieces: embedding, cross-entropy, Adam and
 * SGD, the task generator, model directories, and the lookup model, whose
 * parameters after 5 Adam steps must equal PyTorch's.
 *
 * Hand values are worked out in the comments beside them. The PyTorch
 * references are in tests/fixtures/train/, made by
 * tests/fixtures/make_train_fixtures.py from the same initial parameters
 * and the same batches.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <signal.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "fast/fast_attention_layer.h"
#include "io/model.h"
#include "io/npy.h"
#include "run/saved_models.h"
#include "learn/embedding.h"
#include "learn/induction_model.h"
#include "learn/internal.h"
#include "learn/lookup_model.h"
#include "learn/loss.h"
#include "learn/optim.h"
#include "learn/reversal_model.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "ops.h"

/* ---- embedding ------------------------------------------------------------ */

Test(embedding, forward_copies_the_rows_of_the_ids)
{
    /* weight rows: word 0 = [0, 1, 2], word 1 = [3, 4, 5], word 2 = [6, 7, 8] */
    Tensor *weight = tensor_arange(SHAPE(3, 3));
    const int ids[2][2] = {{2, 0}, {1, 2}};
    Tensor *out = embedding_forward(weight, &ids[0][0], SHAPE(2, 2));
    const float want[] = {6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    Tensor *expected = tensor_from(want, SHAPE(2, 2, 3));
    cr_expect(tensor_has_shape(out, SHAPE(2, 2, 3)));
    expect_close(out, expected, 0.0f, 0.0f);
    tensor_free(expected);
    tensor_free(out);
    tensor_free(weight);
}

Test(embedding, backward_adds_each_row_into_its_word)
{
    /* ids [2, 0, 2]: word 2 appears twice and gets both rows added, word 1
     * is absent and keeps its 0.5 (the gradient accumulates) */
    Tensor *grad_weight = tensor_full(0.5f, SHAPE(4, 2));
    const int ids[3] = {2, 0, 2};
    const float grad_rows[] = {1, 2, 10, 20, 100, 200};
    Tensor *grad_out = tensor_from(grad_rows, SHAPE(3, 2));
    embedding_backward(grad_weight, ids, grad_out);
    const float want[] = {10.5f, 20.5f, 0.5f, 0.5f, 101.5f, 202.5f, 0.5f, 0.5f};
    Tensor *expected = tensor_from(want, SHAPE(4, 2));
    expect_close(grad_weight, expected, 0.0f, 0.0f);
    tensor_free(expected);
    tensor_free(grad_out);
    tensor_free(grad_weight);
}

Test(embedding, backward_is_the_transpose_of_the_forward)
{
    /* <embedding(W, ids), G> = <W, embedding_backward(ids, G)> for any W, G:
     * the backward of a linear map is its adjoint */
    Rng rng = rng_new(5);
    Tensor *weight = embedding_new(6, 4, &rng);
    const int ids[5] = {3, 1, 3, 5, 0};
    Tensor *out = embedding_forward(weight, ids, SHAPE(5));
    Tensor *grad_out = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(5, 4));
    Tensor *grad_weight = tensor_zeros(SHAPE(6, 4));
    embedding_backward(grad_weight, ids, grad_out);
    double lhs = 0.0, rhs = 0.0;
    for (size_t i = 0; i < out->size; i++)
        lhs += (double)out->data[i] * grad_out->data[i];
    for (size_t i = 0; i < weight->size; i++)
        rhs += (double)weight->data[i] * grad_weight->data[i];
    cr_expect(fabs(lhs - rhs) <= 1e-5 * fabs(lhs), "%g != %g", lhs, rhs);
    cr_expect(lhs != 0.0);
    tensor_free(grad_weight);
    tensor_free(grad_out);
    tensor_free(out);
    tensor_free(weight);
}

Test(embedding, new_draws_standard_normals)
{
    Rng rng = rng_new(1);
    Tensor *weight = embedding_new(200, 50, &rng);
    double sum = 0.0, sum_sq = 0.0;
    for (size_t i = 0; i < weight->size; i++) {
        sum += weight->data[i];
        sum_sq += (double)weight->data[i] * weight->data[i];
    }
    const double mean = sum / weight->size, var = sum_sq / weight->size - mean * mean;
    cr_expect(fabs(mean) < 0.03, "mean %g", mean);
    cr_expect(fabs(var - 1.0) < 0.05, "variance %g", var);
    tensor_free(weight);
}

static Tensor *bad_weight;
static void forward_with_a_bad_id(void)
{
    bad_weight = tensor_zeros(SHAPE(3, 2));
    const int ids[2] = {1, 3};
    embedding_forward(bad_weight, ids, SHAPE(2));
}

Test(embedding, an_id_outside_the_vocabulary_stops)
{
    expect_stops_with(forward_with_a_bad_id,
                      "check_ids: id 3 at position 1 is outside the vocabulary [0, 3)\n");
}

/* ---- cross-entropy ------------------------------------------------------- */

Test(loss, cross_entropy_by_hand)
{
    /* row 0: logsumexp([1, 2, 3]) = 3 + log(1 + e^-1 + e^-2) = 3.4076059644,
     *        target 2: loss 0.4076059644
     * row 1: [1000, 1001, 1002] is row 0 shifted by 999 (a naive exp
     *        overflows), target 0: loss 1002.4076059644 - 1000 = 2.4076059644
     * mean: 1.4076059644 */
    const float logits[] = {1, 2, 3, 1000, 1001, 1002};
    const int targets[] = {2, 0};
    Tensor *x = tensor_from(logits, SHAPE(2, 3));
    cr_expect(fabs(logsumexp_row(logits, 3) - 3.4076059644) < 1e-9);
    const double loss = cross_entropy(x, targets);
    cr_expect(fabs(loss - 1.4076059644) < 1e-6, "loss %.10f", loss);
    tensor_free(x);
}

Test(loss, gradient_by_hand)
{
    /* softmax([1, 2, 3]) = [0.0900305732, 0.2447284711, 0.6652409558], the
     * same for the shifted row; the gradient is (softmax - onehot) / N, N = 2 */
    const float logits[] = {1, 2, 3, 1000, 1001, 1002};
    const int targets[] = {2, 0};
    Tensor *x = tensor_from(logits, SHAPE(2, 3));
    Tensor *grad = cross_entropy_backward(x, targets, 1.0f);
    const float want[] = {0.0450152866f, 0.1223642356f, -0.1673795221f,
                          -0.4549847134f, 0.1223642356f, 0.3326204779f};
    Tensor *expected = tensor_from(want, SHAPE(2, 3));
    expect_close(grad, expected, 1e-6f, 1e-5f);
    /* each row of the gradient sums to 0: probabilities and the one-hot both sum to 1 */
    for (int i = 0; i < 2; i++)
        cr_expect(fabsf(AT2(grad, i, 0) + AT2(grad, i, 1) + AT2(grad, i, 2)) < 1e-7f);
    tensor_free(expected);
    tensor_free(grad);
    tensor_free(x);
}

Test(loss, gradient_against_finite_differences)
{
    /* logits (2, 3, 5): three dimensions, N = 6 rows, values not all alike */
    Rng rng = rng_new(11);
    Tensor *x = tensor_normal(&rng, 0.0f, 2.0f, SHAPE(2, 3, 5));
    const int targets[6] = {4, 0, 2, 2, 1, 3};
    Tensor *grad = cross_entropy_backward(x, targets, 0.5f);
    const float eps = 1e-2f;
    for (size_t i = 0; i < x->size; i++) {
        const float original = x->data[i];
        x->data[i] = original + eps;
        const double up = cross_entropy(x, targets);
        x->data[i] = original - eps;
        const double down = cross_entropy(x, targets);
        x->data[i] = original;
        /* the step is exact in float near these values, so (up - down) / 2eps
         * is the central difference with O(eps^2) error */
        const double numeric = 0.5 * (up - down) / (2.0 * (double)eps);
        cr_expect(fabs(grad->data[i] - numeric) < 1e-5 + 1e-3 * fabs(numeric),
                  "element %zu: %.8f, finite differences %.8f", i, (double)grad->data[i],
                  numeric);
    }
    tensor_free(grad);
    tensor_free(x);
}

Test(loss, large_logits_stay_finite)
{
    /* a confident wrong answer: loss 1e4 - (-1e4) = 2e4, not inf */
    const float logits[] = {-1e4f, 1e4f};
    const int targets[] = {0};
    Tensor *x = tensor_from(logits, SHAPE(1, 2));
    cr_expect(fabs(cross_entropy(x, targets) - 2e4) < 1e-3);
    Tensor *grad = cross_entropy_backward(x, targets, 1.0f);
    cr_expect_eq(grad->data[0], -1.0f);
    cr_expect_eq(grad->data[1], 1.0f);
    tensor_free(grad);
    tensor_free(x);
}

Test(loss, count_correct_takes_the_first_largest)
{
    /* argmaxes: row 0 -> 2, row 1 -> 0 (tie between 0 and 1), row 2 -> 1 */
    const float logits[] = {0, 1, 5, 3, 3, 1, -2, -1, -3};
    Tensor *x = tensor_from(logits, SHAPE(3, 3));
    const int right[] = {2, 0, 1}, one_wrong[] = {2, 1, 1};
    cr_expect_eq(count_correct(x, right), 3);
    cr_expect_eq(count_correct(x, one_wrong), 2);
    tensor_free(x);
}

/* ---- optimisers ------------------------------------------------------------ */

Test(optim, adam_two_steps_by_hand)
{
    /* lr 0.1, p = [1, -2].
     * step 1, g = [0.5, -0.25]: m = 0.1 g, v = 0.001 g^2, bias-corrected
     *   m / 0.1 = g and v / 0.001 = g^2, so the step is lr * g / |g| = 0.1 in
     *   the direction of the gradient's sign: p = [0.9, -1.9]
     * step 2, g = [0.5, 0.25]:
     *   m = 0.9 [0.05, -0.025] + 0.1 [0.5, 0.25] = [0.095, 0.0025]
     *   v = 0.999 [0.00025, 0.0000625] + 0.001 [0.25, 0.0625]
     *     = [0.00049975, 0.0001249375]
     *   1 - 0.9^2 = 0.19, 1 - 0.999^2 = 0.001999:
     *   m_hat = [0.5, 0.0131578947], v_hat = [0.25, 0.0625]
     *   step = 0.1 * m_hat / sqrt(v_hat) = [0.1, 0.0052631579]
     *   p = [0.8, -1.9052631579] */
    const float start[] = {1.0f, -2.0f};
    Tensor *value = tensor_from(start, SHAPE(2));
    Tensor *grad = tensor_zeros(SHAPE(2));
    const Parameter params[1] = {{"p", value, grad}};
    Adam *adam = adam_new(params, 1, 0.1f);
    grad->data[0] = 0.5f;
    grad->data[1] = -0.25f;
    adam_step(adam);
    cr_expect(fabsf(value->data[0] - 0.9f) < 1e-6f, "%.8f", (double)value->data[0]);
    cr_expect(fabsf(value->data[1] + 1.9f) < 1e-6f, "%.8f", (double)value->data[1]);
    grad->data[0] = 0.5f;
    grad->data[1] = 0.25f;
    adam_step(adam);
    cr_expect(fabsf(value->data[0] - 0.8f) < 1e-6f, "%.8f", (double)value->data[0]);
    cr_expect(fabsf(value->data[1] + 1.9052631579f) < 1e-6f, "%.8f", (double)value->data[1]);
    cr_expect_eq(adam->step, 2);
    adam_free(adam);
    tensor_free(grad);
    tensor_free(value);
}

Test(optim, adam_first_step_has_the_size_of_the_learning_rate)
{
    /* bias correction makes step 1 lr * g / (|g| + eps): lr * sign(g)
     * whatever |g| is, until |g| comes near eps = 1e-8 (1e-5 loses 0.1%) */
    const float start[] = {0, 0, 0, 0};
    const float grads[] = {1e-3f, -7.0f, 250.0f, -1e-5f};
    Tensor *value = tensor_from(start, SHAPE(4));
    Tensor *grad = tensor_from(grads, SHAPE(4));
    const Parameter params[1] = {{"p", value, grad}};
    Adam *adam = adam_new(params, 1, 0.01f);
    adam_step(adam);
    for (int i = 0; i < 4; i++) {
        const double g = grads[i], want = -0.01 * g / (fabs(g) + 1e-8);
        cr_expect(fabs(value->data[i] - want) < 1e-9 + 1e-6 * fabs(want), "element %d: %.9f", i,
                  (double)value->data[i]);
    }
    adam_free(adam);
    tensor_free(grad);
    tensor_free(value);
}

Test(optim, sgd_and_zero_grad)
{
    const float start[] = {1, 2, 3}, grads[] = {0.5f, -1.0f, 4.0f};
    Tensor *value = tensor_from(start, SHAPE(3));
    Tensor *grad = tensor_from(grads, SHAPE(3));
    const Parameter params[1] = {{"p", value, grad}};
    sgd_step(params, 1, 0.5f);
    const float want[] = {0.75f, 2.5f, 1.0f};
    Tensor *expected = tensor_from(want, SHAPE(3));
    expect_close(value, expected, 0.0f, 0.0f);
    cr_expect(parameters_grads_finite(params, 1));
    cr_expect_eq(parameters_count(params, 1), 3);
    grad->data[1] = NAN;
    cr_expect(!parameters_grads_finite(params, 1));
    parameters_zero_grad(params, 1);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(grad->data[i], 0.0f);
    tensor_free(expected);
    tensor_free(grad);
    tensor_free(value);
}

/* parameters_finite looks at every number, in chunks: an infinity or a NaN
 * anywhere (the first, inside a later chunk, the very last) is found, and
 * the largest float, the smallest subnormal and -0 are finite */
Test(train, parameters_finite_finds_every_infinity_and_nan)
{
    const size_t n = 10001;
    Tensor *value = tensor_zeros(SHAPE((int)n)), *grad = tensor_zeros(SHAPE((int)n));
    const Parameter params[2] = {{"small", grad, grad}, {"large", value, grad}};
    value->data[5] = FLT_MAX;
    value->data[6] = -FLT_MAX;
    value->data[7] = 1e-45f;
    value->data[8] = -0.0f;
    cr_expect(parameters_finite(params, 2));
    const float bad[] = {INFINITY, -INFINITY, NAN, -NAN};
    const size_t at[] = {0, 4095, 4096, 8191, 9000, n - 1};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            const float kept = value->data[at[i]];
            value->data[at[i]] = bad[b];
            cr_expect(!parameters_finite(params, 2), "%g at %zu not found", (double)bad[b],
                      at[i]);
            value->data[at[i]] = kept;
        }
    cr_expect(parameters_finite(params, 2));
    tensor_free(value);
    tensor_free(grad);
}

/* squares_sum counts every element once (whole numbers, whose sums of
 * squares are exact in double), and adds in its documented order: 2^27
 * and seven 1s give 2^54 + 4 from the eight sums, where one running sum
 * would lose every 1 against 2^54 (its spacing there is 4). */
Test(train, squares_sum_counts_every_element_in_its_order)
{
    float x[1000];
    for (int j = 0; j < 1000; j++)
        x[j] = (float)(j + 1);
    const size_t sizes[] = {0, 1, 5, 8, 13, 999, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const double n = (double)sizes[i];
        cr_expect_eq(squares_sum(x, sizes[i]), n * (n + 1) * (2 * n + 1) / 6, "n = %zu",
                     sizes[i]);
    }
    const float order[8] = {0x1p27f, 1, 1, 1, 1, 1, 1, 1};
    cr_expect_eq(squares_sum(order, 8), 0x1p54 + 4, "got 2^54 + %g",
                 squares_sum(order, 8) - 0x1p54);
}

/* ---- tasks ----------------------------------------------------------------- */

Test(tasks, dictionary_examples_are_lookups)
{
    const Task task = task_dictionary(6, 10, 12);
    TaskBatch *batch = task_batch_new(&task, 200);
    Rng rng = rng_new(3);
    task_draw(&task, batch, SPLIT_TRAIN, &rng);
    int asked_at[6] = {0};
    for (int b = 0; b < batch->batch_size; b++) {
        const int *keys = batch->keys + b * 6, *values = batch->values + b * 6;
        int found = -1;
        for (int i = 0; i < 6; i++) {
            cr_assert(keys[i] >= 0 && keys[i] < 10 && values[i] >= 0 && values[i] < 12);
            for (int j = 0; j < i; j++) {
                cr_assert_neq(keys[i], keys[j], "example %d repeats a key", b);
                cr_assert_neq(values[i], values[j], "example %d repeats a value", b);
            }
            if (keys[i] == batch->queries[b])
                found = i;
        }
        cr_assert(found >= 0, "example %d: the query is not among the keys", b);
        cr_expect_eq(batch->answers[b], values[found], "example %d: wrong answer", b);
        asked_at[found]++;
    }
    /* every entry gets asked about: the answer is not always in one place */
    for (int i = 0; i < 6; i++)
        cr_expect(asked_at[i] > 10, "entry %d asked %d times in 200", i, asked_at[i]);
    task_batch_free(batch);
}

Test(tasks, the_same_seed_draws_the_same_examples)
{
    const Task task = task_dictionary(4, 8, 8);
    TaskBatch *a = task_batch_new(&task, 16), *b = task_batch_new(&task, 16);
    Rng rng_a = rng_new(9), rng_b = rng_new(9), rng_c = rng_new(10);
    task_draw(&task, a, SPLIT_TRAIN, &rng_a);
    task_draw(&task, b, SPLIT_TRAIN, &rng_b);
    cr_expect_eq(memcmp(a->keys, b->keys, 16 * 4 * sizeof(int)), 0);
    cr_expect_eq(memcmp(a->values, b->values, 16 * 4 * sizeof(int)), 0);
    cr_expect_eq(memcmp(a->queries, b->queries, 16 * sizeof(int)), 0);
    cr_expect_eq(task_example_hash(a, 5), task_example_hash(b, 5));
    task_draw(&task, b, SPLIT_TRAIN, &rng_c);
    cr_expect_neq(memcmp(a->keys, b->keys, 16 * 4 * sizeof(int)), 0);
    /* fingerprints of different examples differ */
    cr_expect_neq(task_example_hash(a, 0), task_example_hash(a, 1));
    task_batch_free(a);
    task_batch_free(b);
}

Test(tasks, the_splits_never_meet)
{
    /* a small space (4 keys, 4 values, 2 pairs: 4 * 3 * 4 * 3 * 2 = 288
     * examples) drawn many times: each split covers about half of it and
     * they share no example */
    const Task task = task_dictionary(2, 4, 4);
    TaskBatch *train = task_batch_new(&task, 3000), *heldout = task_batch_new(&task, 3000);
    Rng rng = rng_new(2);
    task_draw(&task, train, SPLIT_TRAIN, &rng);
    task_draw(&task, heldout, SPLIT_HELDOUT, &rng);
    enum { SPACE = 4 * 4 * 4 * 4 * 4 };   /* keys, values and query as base-4 digits */
    static char seen[2][SPACE];
    memset(seen, 0, sizeof seen);
    TaskBatch *batches[2] = {train, heldout};
    for (int s = 0; s < 2; s++)
        for (int b = 0; b < 3000; b++) {
            const int *k = batches[s]->keys + 2 * b, *v = batches[s]->values + 2 * b;
            const int query = batches[s]->queries[b];
            const int code = (((k[0] * 4 + k[1]) * 4 + v[0]) * 4 + v[1]) * 4 + query;
            cr_assert_eq(task_split_of(batches[s], b), (TaskSplit)s);
            seen[s][code] = 1;
        }
    int in_train = 0, in_heldout = 0;
    for (int c = 0; c < SPACE; c++) {
        cr_expect(!(seen[0][c] && seen[1][c]), "example %d is in both splits", c);
        in_train += seen[0][c];
        in_heldout += seen[1][c];
    }
    cr_expect(in_train > 100 && in_heldout > 100, "train %d, held-out %d of 288 examples",
              in_train, in_heldout);
    cr_expect_eq(in_train + in_heldout, 288);
    task_batch_free(train);
    task_batch_free(heldout);
}

Test(tasks, an_example_prints_in_words)
{
    const Task task = task_dictionary(3, 5, 5);
    TaskBatch *batch = task_batch_new(&task, 1);
    /* countries 0, 1, 2 are Japan, France, Peru; capitals 2, 0, 1 are
     * Lima, Tokyo, Paris */
    const int keys[] = {0, 1, 2}, values[] = {2, 0, 1};
    memcpy(batch->keys, keys, sizeof keys);
    memcpy(batch->values, values, sizeof values);
    batch->queries[0] = 1;
    batch->answers[0] = 0;
    char text[256] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    task_print_example(f, &task, batch, 0);
    fclose(f);
    cr_expect_str_eq(text, "{Japan: Lima, France: Tokyo, Peru: Paris}  query France");
    task_batch_free(batch);
}

/* ---- model directories ------------------------------------------------------ */

static char scratch[64];

static void make_scratch(void)
{
    scratch_dir_make(scratch, sizeof scratch, "train_test");
    cr_assert(scratch[0] != '\0', "cannot make a scratch directory");
}

static void remove_scratch(void)
{
    scratch_dir_remove(scratch);
}

/* How many entries the directory holds (besides . and ..). */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

Test(model_io, round_trip_with_stacked_parts, .init = make_scratch, .fini = remove_scratch)
{
    Rng rng = rng_new(4);
    Tensor *a = tensor_normal(&rng, 0, 1, SHAPE(2, 3)), *b = tensor_normal(&rng, 0, 1, SHAPE(4, 3));
    Tensor *c = tensor_normal(&rng, 0, 1, SHAPE(5));
    int heads = 4;
    const ModelFile files[] = {
        {.name = "attention.in_proj_weight", .parts = {a, b}},
        {.name = "readout.bias", .parts = {c}},
        {.name = "num_heads", .ints = &heads, .num_ints = 1},
    };
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_save(scratch, files, 3, err, sizeof err), 0, "%s", err);
    cr_expect_eq(count_files(scratch), 3, "temporary files left behind");

    /* the stacked file is one (6, 3) array: a's rows, then b's */
    char path[256];
    snprintf(path, sizeof path, "%s/attention.in_proj_weight.npy", scratch);
    Tensor *stacked = npy_load(path, err, sizeof err);
    cr_assert_not_null(stacked, "%s", err);
    cr_expect(tensor_has_shape(stacked, SHAPE(6, 3)));
    cr_expect_eq(memcmp(stacked->data, a->data, 6 * sizeof(float)), 0);
    cr_expect_eq(memcmp(stacked->data + 6, b->data, 12 * sizeof(float)), 0);

    Tensor *a2 = tensor_zeros(SHAPE(2, 3)), *b2 = tensor_zeros(SHAPE(4, 3));
    Tensor *c2 = tensor_zeros(SHAPE(5));
    int heads2 = 0;
    const ModelFile back[] = {
        {.name = "attention.in_proj_weight", .parts = {a2, b2}},
        {.name = "readout.bias", .parts = {c2}},
        {.name = "num_heads", .ints = &heads2, .num_ints = 1},
    };
    cr_assert_eq(model_load(scratch, back, 3, err, sizeof err), 0, "%s", err);
    expect_close(a2, a, 0.0f, 0.0f);
    expect_close(b2, b, 0.0f, 0.0f);
    expect_close(c2, c, 0.0f, 0.0f);
    cr_expect_eq(heads2, 4);
    int read_heads = 0;
    cr_expect_eq(model_read_ints(scratch, "num_heads", &read_heads, 1, err, sizeof err), 0);
    cr_expect_eq(read_heads, 4);
    Tensor *all[] = {a, b, c, a2, b2, c2, stacked};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

Test(model_io, a_mismatched_file_changes_nothing, .init = make_scratch, .fini = remove_scratch)
{
    Tensor *x = tensor_full(1.0f, SHAPE(2, 2)), *y = tensor_full(2.0f, SHAPE(3));
    const ModelFile files[] = {{.name = "x", .parts = {x}}, {.name = "y", .parts = {y}}};
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_save(scratch, files, 2, err, sizeof err), 0, "%s", err);

    /* x fits, y does not (4 where 3 was saved): x must not be loaded either */
    Tensor *x2 = tensor_zeros(SHAPE(2, 2)), *y2 = tensor_zeros(SHAPE(4));
    const ModelFile other[] = {{.name = "x", .parts = {x2}}, {.name = "y", .parts = {y2}}};
    cr_expect_eq(model_load(scratch, other, 2, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want, "%s/y.npy: expected shape (4,), got (3,)", scratch);
    cr_expect_str_eq(err, want);
    cr_expect_eq(tensor_max_abs(x2), 0.0f, "x was loaded although y failed");

    /* a file that is not there is named */
    const ModelFile missing[] = {{.name = "z", .parts = {x2}}};
    cr_expect_eq(model_load(scratch, missing, 1, err, sizeof err), -1);
    cr_expect(strstr(err, "z.npy") != NULL, "%s", err);
    Tensor *all[] = {x, y, x2, y2};
    for (size_t i = 0; i < 4; i++)
        tensor_free(all[i]);
}

/* One listing fills both of a model's lists (learn/parameter_table.h): the
 * files are PyTorch's state_dict, named in order, and every tensor Adam
 * trains is saved in exactly one file, where PyTorch stacks it. */
static void expect_one_table(const char *model, const Parameter *params, int num_params,
                             const ModelFile *files, int num_files,
                             const char *const *names, int expected_files)
{
    cr_expect_eq(num_files, expected_files, "%s: %d files, expected %d", model, num_files,
                 expected_files);
    int saved = 0;
    for (int f = 0; f < num_files && f < expected_files; f++) {
        cr_expect_str_eq(files[f].name, names[f], "%s: file %d", model, f);
        for (int k = 0; k < MODEL_MAX_PARTS && files[f].parts[k] != NULL; k++, saved++) {
            int trained = 0;
            for (int i = 0; i < num_params; i++)
                trained += params[i].value == files[f].parts[k];
            cr_expect_eq(trained, 1, "%s: part %d of %s is %d of Adam's parameters", model, k,
                         files[f].name, trained);
        }
    }
    cr_expect_eq(saved, num_params, "%s: %d tensors saved, %d trained", model, saved,
                 num_params);
}

Test(model_io, one_listing_fills_the_optimiser_and_the_files)
{
    Rng rng = rng_new(3);
    LookupModel *lookup = lookup_new(6, 6, 8, 2, &rng);
    static const char *const lookup_names[] = {
        "embed_keys.weight", "embed_values.weight", "attention.in_proj_weight",
        "attention.in_proj_bias", "attention.out_proj.weight", "attention.out_proj.bias",
        "readout.weight", "readout.bias", "num_heads"};
    expect_one_table("lookup", lookup->params, lookup->num_params, lookup->files,
                     LOOKUP_NUM_FILES, lookup_names, 9);
    /* nn.MultiheadAttention stacks W_q, W_k, W_v in that order */
    const MultiHeadAttention *a = lookup->attention;
    cr_expect(lookup->files[2].parts[0] == a->W_q && lookup->files[2].parts[1] == a->W_k &&
              lookup->files[2].parts[2] == a->W_v && lookup->files[3].parts[0] == a->b_q &&
              lookup->files[3].parts[2] == a->b_v, "in_proj is not W_q, W_k, W_v stacked");
    cr_expect_eq(*lookup->files[8].ints, 2, "num_heads file");
    lookup_free(lookup);

    TwoKeyModel *two_key = two_key_new_mlp(6, 6, 8, 2, 5, &rng);
    static const char *const two_key_names[] = {
        "embed_keys.weight", "embed_values.weight", "attention.W_q.weight",
        "attention.W_k.weight", "attention.W_v.weight", "attention.W_o.weight",
        "readout.weight", "readout.bias", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight",
        "mlp.2.bias", "num_heads"};
    expect_one_table("two_key", two_key->params, two_key->num_params, two_key->files,
                     two_key->num_files, two_key_names, 13);
    two_key_free(two_key);

    ReversalModel *reversal = reversal_new(6, 8, 2, true, &rng);
    static const char *const reversal_names[] = {
        "embed_tokens.weight", "attention.in_proj_weight", "attention.out_proj.weight",
        "readout.weight", "readout.bias", "num_heads"};
    expect_one_table("reversal", reversal->params, REVERSAL_NUM_PARAMS, reversal->files,
                     REVERSAL_NUM_FILES, reversal_names, 6);
    reversal_free(reversal);

    /* several layers, each under its own prefix, as nn.ModuleList names them */
    const int heads[2] = {2, 1};
    InductionModel *induction = induction_new(6, 5, 8, heads, 2, &rng);
    static const char *const induction_names[] = {
        "embed_tokens.weight", "embed_positions.weight", "layers.0.in_proj_weight",
        "layers.0.out_proj.weight", "layers.1.in_proj_weight", "layers.1.out_proj.weight",
        "unembed.weight", "num_heads", "num_layers"};
    expect_one_table("induction", induction->params, induction->num_params, induction->files,
                     induction->num_files, induction_names, 9);
    cr_expect_str_eq(induction->params[7].name, "layers.1.in_proj_weight[W_k]");
    cr_expect_eq(induction->files[7].num_ints, 2, "num_heads holds one number per layer");
    induction_free(induction);
}

Test(model_io, a_failed_save_leaves_the_old_model, .init = make_scratch, .fini = remove_scratch)
{
    Tensor *old = tensor_full(1.0f, SHAPE(2)), *fresh = tensor_full(7.0f, SHAPE(2));
    const ModelFile first[] = {{.name = "w", .parts = {old}}};
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_save(scratch, first, 1, err, sizeof err), 0, "%s", err);
    /* the second file cannot be written (its name points into a directory
     * that does not exist), so w.npy must keep the old numbers */
    const ModelFile second[] = {{.name = "w", .parts = {fresh}},
                                {.name = "missing_dir/v", .parts = {fresh}}};
    cr_expect_eq(model_save(scratch, second, 2, err, sizeof err), -1);
    cr_expect(strstr(err, "missing_dir/v.npy") != NULL, "%s", err);
    cr_expect_eq(count_files(scratch), 1, "temporary files left behind");
    Tensor *back = tensor_zeros(SHAPE(2));
    const ModelFile reread[] = {{.name = "w", .parts = {back}}};
    cr_assert_eq(model_load(scratch, reread, 1, err, sizeof err), 0, "%s", err);
    expect_close(back, old, 0.0f, 0.0f);
    tensor_free(back);
    tensor_free(fresh);
    tensor_free(old);
}

/* ---- the lookup model ---------------------------------------------------------- */

#define TRAIN_FIXTURES "tests/fixtures/train/"

/* The fixture's sizes (make_train_fixtures.py, FIXTURE). */
enum { FIX_KEY_VOCAB = 10, FIX_VALUE_VOCAB = 12, FIX_HIDDENS = 16, FIX_HEADS = 4,
       FIX_PAIRS = 5, FIX_BATCH = 6, FIX_STEPS = 5 };

/* The batch of one step, read from the fixture's int32 files. */
static TaskBatch *fixture_batch(const Task *task, int step)
{
    TaskBatch *batch = task_batch_new(task, FIX_BATCH);
    const char *names[4] = {"keys", "values", "queries", "answers"};
    int *targets[4] = {batch->keys, batch->values, batch->queries, batch->answers};
    const size_t counts[4] = {FIX_BATCH * FIX_PAIRS, FIX_BATCH * FIX_PAIRS, FIX_BATCH, FIX_BATCH};
    for (int i = 0; i < 4; i++) {
        char path[256], err[NPY_ERR_LEN];
        snprintf(path, sizeof path, TRAIN_FIXTURES "batches/step%d_%s.npy", step, names[i]);
        NpyInts ints;
        cr_assert_eq(npy_load_ints(path, &ints, err, sizeof err), 0, "%s", err);
        cr_assert_eq(ints.size, counts[i], "%s: %zu values", path, ints.size);
        memcpy(targets[i], ints.data, counts[i] * sizeof(int));
        npy_ints_free(&ints);
    }
    return batch;
}

static LookupModel *fixture_model(const char *folder)
{
    Rng rng = rng_new(0);
    LookupModel *model = lookup_new(FIX_KEY_VOCAB, FIX_VALUE_VOCAB, FIX_HIDDENS, FIX_HEADS, &rng);
    char err[MODEL_ERR_LEN];
    cr_assert_eq(lookup_load(model, folder, err, sizeof err), 0, "%s", err);
    return model;
}

/* The same start, the same 5 batches, lr 0.05, the attention run by
 * attend: every parameter after the 5 steps within 1e-4 relative of
 * PyTorch's. */
static void five_adam_steps_against_pytorch(AttentionLayer attend)
{
    const Task task = task_dictionary(FIX_PAIRS, FIX_KEY_VOCAB, FIX_VALUE_VOCAB);
    LookupModel *model = fixture_model(TRAIN_FIXTURES "initial");
    model->attend = attend;
    LookupModel *expected = fixture_model(TRAIN_FIXTURES "after_5_steps");
    char err[NPY_ERR_LEN];
    Tensor *losses = npy_load(TRAIN_FIXTURES "losses.npy", err, sizeof err);
    cr_assert_not_null(losses, "%s", err);
    Adam *adam = adam_new(model->params, model->num_params, 0.05f);
    for (int step = 1; step <= FIX_STEPS; step++) {
        TaskBatch *batch = fixture_batch(&task, step);
        const double loss = lookup_train_step(model, adam, batch, NULL);
        cr_expect(fabs(loss - losses->data[step - 1]) <= 1e-4 * fabs(losses->data[step - 1]),
                  "step %d: loss %.7f, PyTorch %.7f", step, loss,
                  (double)losses->data[step - 1]);
        /* b_k's gradient is 0 in exact arithmetic: q . (k_j + b_k) adds the
         * same q . b_k to every key's score, and softmax ignores a shift
         * shared by the whole row. What is left is rounding: below 1e-5 of
         * b_q's (about 100 float32 spacings; the fast layer's fused
         * multiply-adds round differently from the clear layer's) */
        cr_expect(tensor_max_abs(model->grad_attention->b_k) <=
                      1e-5f * tensor_max_abs(model->grad_attention->b_q),
                  "step %d: b_k's gradient %g is not rounding next to b_q's %g", step,
                  (double)tensor_max_abs(model->grad_attention->b_k),
                  (double)tensor_max_abs(model->grad_attention->b_q));
        task_batch_free(batch);
    }
    for (int i = 0; i < model->num_params; i++) {
        const Parameter *mine = &model->params[i], *torch = &expected->params[i];
        /* Adam divides a gradient by its own size, so it turns b_k's
         * rounding, different in every program, into steps of up to lr:
         * b_k is compared nowhere (nor can it change any output) */
        if (mine->value == model->attention->b_k)
            continue;
        /* atol: a parameter that starts at 0 and moves by about lr has
         * rounding of its own size; 1e-6 is far below any step of 0.05 */
        cr_expect(tensor_allclose(mine->value, torch->value, 1e-6f, 1e-4f, stderr),
                  "%s after 5 steps differs from PyTorch's", mine->name);
    }
    adam_free(adam);
    tensor_free(losses);
    lookup_free(expected);
    lookup_free(model);
}

Test(lookup_model, five_adam_steps_equal_pytorch)
{
    five_adam_steps_against_pytorch(CLEAR_ATTENTION);
}

Test(lookup_model, five_adam_steps_on_the_fast_layer_equal_pytorch)
{
    five_adam_steps_against_pytorch(fast_attention_layer(2));
}

/* A model large enough for the fast layer to use 2 threads, trained for
 * a few steps through attend; its parameters are left in *trained. */
enum { BIG_VOCAB = 24, BIG_HIDDENS = 64, BIG_HEADS = 4, BIG_PAIRS = 16, BIG_BATCH = 64,
       BIG_STEPS = 4 };
static LookupModel *train_a_few_steps(AttentionLayer attend, double *losses)
{
    const Task task = task_dictionary(BIG_PAIRS, BIG_VOCAB, BIG_VOCAB);
    Rng rng = rng_new(7);
    LookupModel *model = lookup_new(BIG_VOCAB, BIG_VOCAB, BIG_HIDDENS, BIG_HEADS, &rng);
    model->attend = attend;
    Adam *adam = adam_new(model->params, model->num_params, 0.01f);
    TaskBatch *batch = task_batch_new(&task, BIG_BATCH);
    for (int step = 0; step < BIG_STEPS; step++) {
        task_draw(&task, batch, SPLIT_TRAIN, &rng);
        losses[step] = lookup_train_step(model, adam, batch, NULL);
    }
    task_batch_free(batch);
    adam_free(adam);
    return model;
}

Test(lookup_model, the_fast_layer_trains_to_the_clear_layers_numbers)
{
    double clear_losses[BIG_STEPS], fast_losses[BIG_STEPS];
    LookupModel *clear = train_a_few_steps(CLEAR_ATTENTION, clear_losses);
    LookupModel *fast = train_a_few_steps(fast_attention_layer(2), fast_losses);
    for (int step = 0; step < BIG_STEPS; step++)
        cr_expect(fabs(fast_losses[step] - clear_losses[step]) <= 1e-5 * clear_losses[step],
                  "step %d: loss %.8f on the fast layer, %.8f on the clear one", step,
                  fast_losses[step], clear_losses[step]);
    for (int i = 0; i < clear->num_params; i++) {
        /* b_k's gradient is rounding alone (five_adam_steps_equal_pytorch),
         * which Adam turns into steps of up to lr */
        if (clear->params[i].value == clear->attention->b_k)
            continue;
        cr_expect(tensor_allclose(fast->params[i].value, clear->params[i].value, 1e-6f, 1e-4f,
                                  stderr),
                  "%s after %d steps on the fast layer differs from the clear layer's",
                  clear->params[i].name, BIG_STEPS);
    }
    lookup_free(clear);
    lookup_free(fast);
}

Test(lookup_model, the_fast_layer_trains_to_the_same_bits_every_run)
{
    double first_losses[BIG_STEPS], again_losses[BIG_STEPS];
    LookupModel *first = train_a_few_steps(fast_attention_layer(2), first_losses);
    LookupModel *again = train_a_few_steps(fast_attention_layer(2), again_losses);
    cr_expect_arr_eq(first_losses, again_losses, sizeof first_losses);
    for (int i = 0; i < first->num_params; i++) {
        const Tensor *a = first->params[i].value, *b = again->params[i].value;
        cr_expect(memcmp(a->data, b->data, a->size * sizeof(float)) == 0,
                  "%s differs between two runs on 2 threads", first->params[i].name);
    }
    lookup_free(first);
    lookup_free(again);
}

/* The model's loss on one batch, for finite differences. */
typedef struct {
    LookupModel *model;
    TaskBatch *batch;
} LossContext;

static double batch_loss(const LossContext *ctx)
{
    return lookup_evaluate(ctx->model, ctx->batch, NULL);
}

Test(lookup_model, equals_the_multihead_layer_on_embedded_entries)
{
    /* the model embeds the words and runs the layer it holds: the same
     * numbers and gradients as multihead_forward_cache and
     * multihead_backward run here on the embedded words */
    const Task task = task_dictionary(FIX_PAIRS, FIX_KEY_VOCAB, FIX_VALUE_VOCAB);
    LookupModel *model = fixture_model(TRAIN_FIXTURES "initial");
    TaskBatch *batch = fixture_batch(&task, 2);
    const int B = FIX_BATCH, P = FIX_PAIRS;

    // the layer as a black box on the embedded words
    Tensor *q = embedding_forward(model->embed_keys, batch->queries, SHAPE(B, 1));
    Tensor *k = embedding_forward(model->embed_keys, batch->keys, SHAPE(B, P));
    Tensor *v = embedding_forward(model->embed_values, batch->values, SHAPE(B, P));
    MultiHeadCache layer_cache;
    Tensor *out = multihead_forward_cache(model->attention, q, k, v, NULL, false, NULL,
                                         &layer_cache);
    Tensor *want_logits = linear(out, model->readout_weight, model->readout_bias);
    Tensor *grad_logits = cross_entropy_backward(want_logits, batch->answers, 1.0f);
    Tensor *grad_out = linear_backward(out, model->readout_weight, grad_logits, NULL, NULL);
    MultiHeadGrads *want = multihead_grads_new(model->attention);
    Tensor *want_grad_concat;
    multihead_backward(model->attention, &layer_cache, grad_out, want, NULL, NULL, NULL,
                       &want_grad_concat);

    // the model
    parameters_zero_grad(model->params, model->num_params);
    LookupCache cache;
    Tensor *logits = lookup_forward(model, batch, NULL, &cache);
    expect_close(logits, want_logits, 1e-6f, 1e-5f);
    Tensor *grad_concat;
    lookup_backward(model, &cache, grad_logits, &grad_concat);
    expect_close(grad_concat, want_grad_concat, 1e-7f, 1e-4f);
    const MultiHeadGrads *got = model->grad_attention;
    expect_close(got->W_q, want->W_q, 1e-7f, 1e-4f);
    expect_close(got->W_k, want->W_k, 1e-7f, 1e-4f);
    expect_close(got->W_v, want->W_v, 1e-7f, 1e-4f);
    expect_close(got->W_o, want->W_o, 1e-7f, 1e-4f);
    expect_close(got->b_q, want->b_q, 1e-7f, 1e-4f);
    expect_close(got->b_v, want->b_v, 1e-7f, 1e-4f);
    expect_close(got->b_o, want->b_o, 1e-7f, 1e-4f);

    Tensor *all[] = {q, k, v, out, want_logits, grad_logits, grad_out, want_grad_concat, logits,
                     grad_concat};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    multihead_grads_free(want);
    multihead_cache_free(&layer_cache);
    lookup_cache_free(&cache);
    task_batch_free(batch);
    lookup_free(model);
}

/* A layer that halves the clear one's output and its gradient: what a
 * model computes must follow whichever pair it holds. */
static int halved_calls;
static Tensor *halved_forward(const MultiHeadAttention *layer, const Tensor *queries,
                              const Tensor *keys, const Tensor *values,
                              const ValidLens *valid_lens, bool training, Rng *rng,
                              int num_threads, LayerCache *cache)
{
    halved_calls++;
    Tensor *out = clear_attention_forward(layer, queries, keys, values, valid_lens, training,
                                          rng, num_threads, cache);
    for (size_t i = 0; i < out->size; i++)
        out->data[i] *= 0.5f;
    return out;
}
static void halved_backward(const MultiHeadAttention *layer, const LayerCache *cache,
                            const Tensor *grad_output, MultiHeadGrads *grads,
                            Tensor **grad_queries, Tensor **grad_keys, Tensor **grad_values,
                            Tensor **grad_concat, int num_threads)
{
    halved_calls += 100;
    Tensor *half = tensor_copy(grad_output);
    for (size_t i = 0; i < half->size; i++)
        half->data[i] *= 0.5f;
    clear_attention_backward(layer, cache, half, grads, grad_queries, grad_keys, grad_values,
                             grad_concat, num_threads);
    tensor_free(half);
}

/* the clear linear layer, counted: the readout must run through the
 * layer's own linear functions */
static Tensor *counted_linear(const Tensor *x, const Tensor *weight, const Tensor *bias,
                              int num_threads)
{
    (void)num_threads;
    halved_calls += 1000;
    return linear(x, weight, bias);
}
static Tensor *counted_linear_backward(const Tensor *x, const Tensor *weight,
                                       const Tensor *grad_y, Tensor *grad_weight,
                                       Tensor *grad_bias, int num_threads)
{
    (void)num_threads;
    halved_calls += 10000;
    return linear_backward(x, weight, grad_y, grad_weight, grad_bias);
}

Test(lookup_model, runs_the_attention_layer_it_holds)
{
    const Task task = task_dictionary(FIX_PAIRS, FIX_KEY_VOCAB, FIX_VALUE_VOCAB);
    LookupModel *model = fixture_model(TRAIN_FIXTURES "initial");
    TaskBatch *batch = fixture_batch(&task, 2);
    // the clear layer: the readout's input, and W_q's gradient
    LookupCache clear;
    Tensor *logits = lookup_forward(model, batch, NULL, &clear);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    parameters_zero_grad(model->params, model->num_params);
    lookup_backward(model, &clear, grad_logits, NULL);
    Tensor *clear_grad_W_q = tensor_copy(model->grad_attention->W_q);
    // the halved layer: half the output and, from the same grad_logits,
    // half of W_q's gradient (halving is exact in floating point)
    model->attend = (AttentionLayer){halved_forward, halved_backward, 1, counted_linear,
                                     counted_linear_backward};
    halved_calls = 0;
    LookupCache halved;
    Tensor *halved_logits = lookup_forward(model, batch, NULL, &halved);
    parameters_zero_grad(model->params, model->num_params);
    lookup_backward(model, &halved, grad_logits, NULL);
    cr_expect_eq(halved_calls, 11101, "the layer's forward, backward, linear and its "
                 "backward once each (1, 100, 1000, 10000), got %d", halved_calls);
    for (size_t i = 0; i < clear.out->size; i++)
        cr_expect_eq(halved.out->data[i], 0.5f * clear.out->data[i], "out[%zu]", i);
    for (size_t i = 0; i < clear_grad_W_q->size; i++)
        cr_expect_eq(model->grad_attention->W_q->data[i], 0.5f * clear_grad_W_q->data[i],
                     "grad W_q[%zu]", i);
    TENSOR_FREE(logits, grad_logits, clear_grad_W_q, halved_logits);
    lookup_cache_free(&clear);
    lookup_cache_free(&halved);
    task_batch_free(batch);
    lookup_free(model);
}

Test(lookup_model, gradients_against_finite_differences)
{
    /* a country that is both a query and a key gets both gradients in its
     * embed_keys row: the finite differences see the sum */
    const Task task = task_dictionary(FIX_PAIRS, FIX_KEY_VOCAB, FIX_VALUE_VOCAB);
    LookupModel *model = fixture_model(TRAIN_FIXTURES "initial");
    TaskBatch *batch = fixture_batch(&task, 1);
    parameters_zero_grad(model->params, model->num_params);
    LookupCache cache;
    Tensor *logits = lookup_forward(model, batch, NULL, &cache);
    Tensor *grad_logits = cross_entropy_backward(logits, batch->answers, 1.0f);
    lookup_backward(model, &cache, grad_logits, NULL);
    const LossContext ctx = {model, batch};
    const double eps = 1e-2;
    for (int i = 0; i < model->num_params; i++) {
        Tensor *value = model->params[i].value, *grad = model->params[i].grad;
        const float scale = tensor_max_abs(grad);
        /* every 7th element: all parameters, a spread of their elements */
        for (size_t j = 0; j < value->size; j += 7) {
            const float saved_value = value->data[j];
            value->data[j] = saved_value + (float)eps;
            const double up = batch_loss(&ctx);
            value->data[j] = saved_value - (float)eps;
            const double down = batch_loss(&ctx);
            value->data[j] = saved_value;
            const double numeric = (up - down) / (2 * eps);
            cr_expect(fabs(grad->data[j] - numeric) <= 2e-3 * scale + 1e-5,
                      "%s[%zu]: backward %.6g, finite differences %.6g", model->params[i].name,
                      j, (double)grad->data[j], numeric);
        }
    }
    tensor_free(grad_logits);
    tensor_free(logits);
    lookup_cache_free(&cache);
    task_batch_free(batch);
    lookup_free(model);
}

Test(lookup_model, save_and_load_round_trip, .init = make_scratch, .fini = remove_scratch)
{
    Rng rng = rng_new(8);
    LookupModel *model = lookup_new(7, 9, 12, 3, &rng);
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_save(scratch, model->files, LOOKUP_NUM_FILES, err, sizeof err), 0, "%s", err);
    cr_expect_eq(count_files(scratch), LOOKUP_NUM_FILES);
    /* nn.MultiheadAttention's layout: W_q, W_k, W_v stacked, (3D, D) */
    char path[256];
    snprintf(path, sizeof path, "%s/attention.in_proj_weight.npy", scratch);
    Tensor *in_proj = npy_load(path, err, sizeof err);
    cr_assert_not_null(in_proj, "%s", err);
    cr_expect(tensor_has_shape(in_proj, SHAPE(36, 12)));
    cr_expect_eq(memcmp(in_proj->data + 12 * 12, model->attention->W_k->data,
                        12 * 12 * sizeof(float)), 0);

    Rng other_rng = rng_new(9);
    LookupModel *other = lookup_new(7, 9, 12, 3, &other_rng);
    cr_assert_eq(lookup_load(other, scratch, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < model->num_params; i++)
        expect_close(other->params[i].value, model->params[i].value, 0.0f, 0.0f);

    /* another number of heads, same shapes: refused, nothing changed */
    Rng third_rng = rng_new(10);
    LookupModel *four_heads = lookup_new(7, 9, 12, 4, &third_rng);
    Tensor *before = tensor_copy(four_heads->embed_keys);
    cr_expect_eq(lookup_load(four_heads, scratch, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want, "%s/num_heads.npy: the model has 4 heads, the file says 3",
             scratch);
    cr_expect_str_eq(err, want);
    expect_close(four_heads->embed_keys, before, 0.0f, 0.0f);
    tensor_free(before);
    tensor_free(in_proj);
    lookup_free(four_heads);
    lookup_free(other);
    lookup_free(model);
}

/* ---- the program ------------------------------------------------------------------ */

#define TRAIN "05_multihead/train"

/* The number after word (as "accuracy ") in Part 3's line. */
static double heldout_number(const char *out, const char *word)
{
    const char *line = strstr(out, "never trained on:");
    cr_assert_not_null(line, "no held-out line in:\n%s", out);
    const char *at = strstr(line, word);
    cr_assert_not_null(at);
    return strtod(at + strlen(word), NULL);
}

/* The output without the line that holds a timing ("steps in ... s"). */
static char *without_timing(const char *out)
{
    char *copy = strdup(out);
    char *line = strstr(copy, " steps in ");
    cr_assert_not_null(line, "no timing line in:\n%s", out);
    while (line > copy && line[-1] != '\n')
        line--;
    char *end = strchr(line, '\n');
    memmove(line, end + 1, strlen(end + 1) + 1);
    return copy;
}

Test(train_program, defaults_reach_99_percent_held_out)
{
    RunResult r = run_program(TRAIN, "");
    cr_assert_eq(r.status, 0, "%s", r.err);
    const double accuracy = heldout_number(r.out, "accuracy ");
    cr_expect(accuracy >= 99.0, "held-out accuracy %.2f%%", accuracy);
    /* the query's weight sits on its key, over all the held-out examples:
     * each head's largest weight is there in at least 95% of them, and its
     * mean weight there is well above an even spread over 8 entries (0.125) */
    const char *table = strstr(r.out, "   mean weight on it\n");
    cr_assert_not_null(table, "%s", r.out);
    table = strchr(table, '\n') + 1;
    for (int h = 0; h < 4; h++) {
        int head = -1;
        double largest = 0.0, mean = 0.0;
        cr_assert_eq(sscanf(table, " %d %lf%% %lf", &head, &largest, &mean), 3, "%s", table);
        cr_expect_eq(head, h);
        cr_expect(largest >= 95.0, "head %d: largest weight on the key in %.1f%%", h, largest);
        cr_expect(mean > 0.5, "head %d: mean weight on the key %.3f", h, mean);
        table = strchr(table, '\n') + 1;
    }
    run_result_free(&r);
}

Test(train_program, the_same_seed_prints_the_same_numbers)
{
    RunResult a = run_program(TRAIN, "--steps 30 --seed 4");
    RunResult b = run_program(TRAIN, "--steps 30 --seed 4");
    RunResult c = run_program(TRAIN, "--steps 30 --seed 5");
    cr_assert_eq(a.status, 0, "%s", a.err);
    char *a_text = without_timing(a.out), *b_text = without_timing(b.out);
    char *c_text = without_timing(c.out);
    cr_expect_str_eq(a_text, b_text);
    cr_expect_str_neq(a_text, c_text);
    free(a_text);
    free(b_text);
    free(c_text);
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&c);
}

Test(train_program, a_saved_model_loads_with_the_same_results, .init = make_scratch,
     .fini = remove_scratch)
{
    /* a half-trained model (60 steps), so that the held-out numbers are not
     * simply 100% and a wrong load would show */
    char args[256];
    snprintf(args, sizeof args, "--steps 60 --pairs 5 --heads 2 --to %s --plot %s", scratch,
             scratch);
    RunResult trained = run_program(TRAIN, args);
    cr_assert_eq(trained.status, 0, "%s", trained.err);
    snprintf(args, sizeof args, "--pairs 5 --from %s", scratch);
    RunResult loaded = run_program(TRAIN, args);
    cr_assert_eq(loaded.status, 0, "%s", loaded.err);
    const char *parts[2] = {strstr(trained.out, "Part 3."), strstr(loaded.out, "Part 3.")};
    cr_assert(parts[0] && parts[1]);
    char *plots_line = strstr(trained.out, "\nwrote ");   /* only the first run plots */
    cr_assert_not_null(plots_line);
    plots_line[0] = '\0';
    /* Parts 3 and 4 (accuracy, loss, weights) agree to the last digit */
    cr_expect_str_eq(parts[0], parts[1]);
    const double accuracy = heldout_number(trained.out, "accuracy ");
    cr_expect(accuracy > 20.0 && accuracy < 99.0, "60 steps gave %.2f%%", accuracy);
    /* the model's 9 files with its training state, vocabulary.json, and the loss curve and
     * heatmap */
    const char *files[] = {"embed_keys.weight.npy", "attention.in_proj_weight.npy",
                           "num_heads.npy", "train_loss.dat", "train_loss.gp",
                           "train_attention.dat", "train_attention.gp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", scratch, files[i]);
        struct stat st;
        cr_expect_eq(stat(path, &st), 0, "%s was not written", files[i]);
    }
    cr_expect_eq(count_files(scratch), LOOKUP_NUM_SAVED_FILES + 1 + 4);
    run_result_free(&trained);
    run_result_free(&loaded);
}

Test(train_program, help_lists_every_option)
{
    const char *const options[] = {"--seed", "--steps", "--batch", "--lr", "--pairs",
                                   "--countries", "--hiddens", "--heads", "--examples", "--to",
                                   "--from", "--plot", "--threads", "--bench"};
    expect_help_lists(TRAIN, options, sizeof options / sizeof options[0]);
}

/* ---- stopping and going on --------------------------------------------------------- */

/* true when the two directories hold the same files, byte for byte */
static bool same_files(const char *a, const char *b)
{
    DIR *d = opendir(a);
    cr_assert_not_null(d);
    bool same = count_files(a) == count_files(b);
    for (struct dirent *e; same && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path_a[512], path_b[512];
        snprintf(path_a, sizeof path_a, "%s/%s", a, e->d_name);
        snprintf(path_b, sizeof path_b, "%s/%s", b, e->d_name);
        size_t len_a, len_b;
        char *bytes_a = read_text_file(path_a, &len_a), *bytes_b = read_text_file(path_b, &len_b);
        same = bytes_a && bytes_b && len_a == len_b && memcmp(bytes_a, bytes_b, len_a) == 0;
        if (!same)
            cr_log_error("%s differs from %s", path_a, path_b);
        free(bytes_a);
        free(bytes_b);
    }
    closedir(d);
    return same;
}

/* The number after "at step " (the loss) or "of step " (the update) in a line. */
static int step_in(const char *line)
{
    const char *at = line ? strstr(line, "at step ") : NULL;
    if (at == NULL && line != NULL)
        at = strstr(line, "of step ");
    cr_assert_not_null(at, "no step named in: %s", line ? line : "");
    return atoi(at + strlen("at step "));
}

/* The saved step count, read as the program reads it. */
static int saved_step(const char *dir)
{
    int step = -1;
    char err[MODEL_ERR_LEN];
    cr_assert_eq(model_read_ints(dir, "optimizer.step", &step, 1, err, sizeof err), 0, "%s",
                 err);
    return step;
}

/* --lr 5e8 overflows a few steps in: the run stops naming the step s, and
 * --to holds the model after step s - 2 when the loss of step s is not a
 * number (the last whose loss, taken at step s - 1, was one), or after
 * step s - 1 when the update of step s made a parameter overflow: the very
 * files a run of that many steps saves. */
Test(train_program, a_diverging_loss_keeps_the_last_good_model, .init = make_scratch,
     .fini = remove_scratch)
{
    char other[64], args[256];
    scratch_dir_make(other, sizeof other, "train_test");
    snprintf(args, sizeof args, "--lr 5e8 --steps 50 --to %s", scratch);
    RunResult r = run_program(TRAIN, args);
    cr_expect_eq(r.status, 1);
    const int step = step_in(r.err);
    cr_assert(step >= 2 && step <= 50, "the loss overflowed at step %d", step);
    const int kept = saved_step(scratch);
    cr_expect(kept == step - 2 || kept == step - 1, "stopped at step %d, kept %d", step, kept);
    snprintf(args, sizeof args, "--lr 5e8 --steps %d --to %s", kept, other);
    RunResult shorter = run_program(TRAIN, args);
    cr_expect_eq(shorter.status, 0, "%s", shorter.err);
    cr_expect(same_files(scratch, other));
    run_result_free(&r);
    run_result_free(&shorter);
    scratch_dir_remove(other);
}

/* Whether training diverges depends on the step, never on --steps: a run of
 * n steps agrees with a longer one about its first n steps. The longer run
 * keeps the model after step `kept`; a run of n <= kept steps trains all n
 * and saves step n, a run of n > kept stops and saves step kept, the very
 * files the longer run saved. (--lr 1e10 --seed 3 --batch 1: the update of
 * step 1 overflows the forward on step 1's batch but not on step 2's; a
 * check after the last step on its own batch stopped a run of 1 step where
 * a run of 5 went on.) */
Test(train_program, divergence_depends_on_the_step_not_the_run_length, .init = make_scratch,
     .fini = remove_scratch)
{
    const char *const settings[] = {"--lr 1e10 --seed 3 --batch 1", "--lr 5e8 --seed 0",
                                    "--lr 3e9 --seed 6 --batch 1"};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        char other[64], args[256];
        scratch_dir_make(other, sizeof other, "train_test");
        snprintf(args, sizeof args, "%s --steps 30 --examples 10 --to %s", settings[i], scratch);
        RunResult longer = run_program(TRAIN, args);
        cr_assert_eq(longer.status, 1, "%s: %s", settings[i], longer.err);
        const int kept = saved_step(scratch);
        for (int n = 1; n <= kept + 1; n++) {
            snprintf(args, sizeof args, "%s --steps %d --examples 10 --to %s", settings[i], n,
                     other);
            RunResult r = run_program(TRAIN, args);
            const bool diverged = strstr(r.err, "--to keeps the model after step") != NULL;
            cr_expect_eq(diverged, n > kept, "%s --steps %d (the longer run kept step %d): %s",
                         settings[i], n, kept, r.err);
            cr_expect_eq(saved_step(other), n <= kept ? n : kept, "%s --steps %d",
                         settings[i], n);
            if (n > kept)
                cr_expect(same_files(scratch, other), "%s --steps %d", settings[i], n);
            run_result_free(&r);
        }
        run_result_free(&longer);
        scratch_dir_remove(other);
    }
}

/* --lr 1e30: step 1's loss is a number, but its update leaves parameters
 * (finite, near 1e27) whose forward overflows; no later loss would say
 * so. The run stops with one line naming step 1, --to holds the model
 * before it (step 0), and that model runs with a held-out loss that is a
 * number. */
Test(train_program, a_last_update_that_overflows_is_not_kept, .init = make_scratch,
     .fini = remove_scratch)
{
    char args[256];
    snprintf(args, sizeof args, "--lr 1e30 --steps 1 --to %s", scratch);
    RunResult r = run_program(TRAIN, args);
    cr_expect_eq(r.status, 1);
    cr_expect(is_one_line(r.err), "stderr: %s", r.err);
    cr_expect_not_null(strstr(r.err, "step 1"), "%s", r.err);
    cr_expect_null(strstr(r.out, "nan"), "%s", r.out);
    cr_expect_eq(saved_step(scratch), 0);
    snprintf(args, sizeof args, "--from %s", scratch);
    RunResult loaded = run_program(TRAIN, args);
    cr_expect_eq(loaded.status, 0, "%s", loaded.err);
    cr_expect(isfinite(heldout_number(loaded.out, "loss ")), "%s", loaded.out);
    run_result_free(&r);
    run_result_free(&loaded);
}

/* A saved model whose parameters are finite but overflow in the forward
 * (embeddings of 1e30): Part 3 stops with one line, exit 1, and no NaN
 * reaches the output. */
Test(train_program, a_model_that_overflows_stops_before_its_numbers, .init = make_scratch,
     .fini = remove_scratch)
{
    char args[256], path[256];
    snprintf(args, sizeof args, "--steps 1 --to %s", scratch);
    RunResult trained = run_program(TRAIN, args);
    cr_assert_eq(trained.status, 0, "%s", trained.err);
    snprintf(path, sizeof path, "%s/embed_keys.weight.npy", scratch);
    npy_fill_alternating(path, 1e30f);
    snprintf(args, sizeof args, "--from %s", scratch);
    RunResult loaded = run_program(TRAIN, args);
    cr_expect_eq(loaded.status, 1);
    cr_expect(is_one_line(loaded.err), "stderr: %s", loaded.err);
    cr_expect_null(strstr(loaded.out, "nan"), "%s", loaded.out);
    run_result_free(&trained);
    run_result_free(&loaded);
}

/* train with args in the background; after delay_ms, sig; its exit status */
static int run_and_signal(const char *const *args, int delay_ms, int sig)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execv(BIN_DIR "/" TRAIN, (char *const *)args);
        _exit(127);
    }
    struct timespec delay = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    nanosleep(&delay, NULL);
    kill(pid, sig);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* SIGTERM and SIGINT partway: the run saves the model of the last step it
 * finished, complete and without temporary files, and exits 128 + the
 * signal. Going on from it to step s + 20 gives the files an
 * uninterrupted run of s + 20 steps saves, byte for byte. */
Test(train_program, a_signal_saves_a_model_that_goes_on_to_the_same_numbers,
     .init = make_scratch, .fini = remove_scratch)
{
    const int signals[2] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        char other[64], args[256];
        scratch_dir_make(other, sizeof other, "train_test");
        const char *argv[] = {TRAIN, "--steps", "1000000", "--seed", "5", "--to", scratch,
                              NULL};
        cr_expect_eq(run_and_signal(argv, 300, signals[i]), 128 + signals[i]);
        cr_expect_eq(count_files(scratch), LOOKUP_NUM_SAVED_FILES + 1, "temporary files left?");
        const int step = saved_step(scratch);
        cr_assert(step >= 0 && step < 1000000);
        snprintf(args, sizeof args, "--from %s --steps %d --to %s", scratch, step + 20,
                 scratch);
        RunResult resumed = run_program(TRAIN, args);
        cr_expect_eq(resumed.status, 0, "%s", resumed.err);
        snprintf(args, sizeof args, "--seed 5 --steps %d --to %s", step + 20, other);
        RunResult straight = run_program(TRAIN, args);
        cr_expect_eq(straight.status, 0, "%s", straight.err);
        cr_expect(same_files(scratch, other), "stopped at step %d and went on", step);
        run_result_free(&resumed);
        run_result_free(&straight);
        scratch_dir_remove(other);
        scratch_dir_remove(scratch);
        make_scratch();
    }
}

/* 40 steps, then 40 more from the saved model, equal 80 straight: the
 * files byte for byte, the loss lines of steps 41 to 80, and what Parts 3
 * and 4 print. */
Test(train_program, going_on_equals_an_uninterrupted_run, .init = make_scratch,
     .fini = remove_scratch)
{
    char other[64], args[256];
    scratch_dir_make(other, sizeof other, "train_test");
    snprintf(args, sizeof args, "--steps 40 --seed 7 --batch 16 --pairs 6 --to %s", scratch);
    RunResult first = run_program(TRAIN, args);
    cr_assert_eq(first.status, 0, "%s", first.err);
    snprintf(args, sizeof args, "--from %s --steps 80 --to %s", scratch, scratch);
    RunResult resumed = run_program(TRAIN, args);
    cr_assert_eq(resumed.status, 0, "%s", resumed.err);
    snprintf(args, sizeof args, "--steps 80 --seed 7 --batch 16 --pairs 6 --to %s", other);
    RunResult straight = run_program(TRAIN, args);
    cr_assert_eq(straight.status, 0, "%s", straight.err);
    cr_expect(same_files(scratch, other));
    /* the loss lines from step 48 on (every 8 steps), up to the timing line */
    const char *lines[2] = {strstr(resumed.out, "  step    48/80"),
                            strstr(straight.out, "  step    48/80")};
    cr_assert(lines[0] && lines[1]);
    const size_t len = (size_t)(strstr(lines[0], "  (") - lines[0]);
    cr_expect(strstr(lines[1], "  (") - lines[1] == (ptrdiff_t)len &&
              strncmp(lines[0], lines[1], len) == 0, "the loss lines differ:\n%s\n%s",
              lines[0], lines[1]);
    /* and what Parts 3 and 4 print */
    cr_expect_str_eq(strstr(resumed.out, "Part 3."), strstr(straight.out, "Part 3."));
    run_result_free(&first);
    run_result_free(&resumed);
    run_result_free(&straight);
    scratch_dir_remove(other);
}

Test(train_program, the_fast_layer_saves_the_same_bits_for_a_seed_and_threads,
     .init = make_scratch, .fini = remove_scratch)
{
    /* num_hiddens 64 and batches of 64: enough work for the fast layer to
     * share it between 2 threads */
    char other[64], args[256];
    scratch_dir_make(other, sizeof other, "train_test");
    const char *sizes = "--steps 20 --seed 3 --hiddens 64 --batch 64 --pairs 16 --examples 50 "
                        "--threads 2";
    snprintf(args, sizeof args, "%s --to %s", sizes, scratch);
    RunResult first = run_program(TRAIN, args);
    cr_assert_eq(first.status, 0, "%s", first.err);
    snprintf(args, sizeof args, "%s --to %s", sizes, other);
    RunResult again = run_program(TRAIN, args);
    cr_assert_eq(again.status, 0, "%s", again.err);
    cr_expect(same_files(scratch, other));
    cr_expect_not_null(strstr(first.out, "the fast layer runs the attention, on 2 threads"),
                       "%s", first.out);
    run_result_free(&first);
    run_result_free(&again);
    scratch_dir_remove(other);
}

/* A model of fewer countries than --pairs' default (8) goes on training:
 * its pairs are the saved ones, not the default. */
Test(train_program, a_small_dictionary_goes_on_training, .init = make_scratch,
     .fini = remove_scratch)
{
    char args[256];
    snprintf(args, sizeof args, "--steps 3 --countries 5 --pairs 3 --hiddens 4 --heads 2 "
             "--examples 10 --to %s", scratch);
    RunResult first = run_program(TRAIN, args);
    cr_assert_eq(first.status, 0, "%s", first.err);
    snprintf(args, sizeof args, "--from %s --steps 5 --examples 10 --to %s", scratch, scratch);
    RunResult resumed = run_program(TRAIN, args);
    cr_expect_eq(resumed.status, 0, "%s", resumed.err);
    cr_expect_eq(saved_step(scratch), 5);
    run_result_free(&first);
    run_result_free(&resumed);
}

/* train --bench runs the tool train_bench's code with the same arguments. */
Test(train_program, bench_is_the_train_bench_tool)
{
    expect_same_as_tool("05_multihead/train", "05_multihead/train_bench",
                      "--bench --hiddens 30 --heads 4");
    expect_same_as_tool("05_multihead/train", "05_multihead/train_bench",
                      "--bench --pairs 10 --countries 8");
    expect_same_as_tool("05_multihead/train", "05_multihead/train_bench", "--bench --steps 5");
}

/* ---- the loop's end ------------------------------------------------------------------ */

/* A toy trainee for the loop itself: step s's loss is losses[s - 1]; the
 * watch counts its calls and stops where it is told. */
typedef struct {
    const double *losses;
    int steps_taken, evaluations, stop_before, last_looks;
} LoopToy;

static void toy_draw(void *state, Rng *rng) { (void)state; (void)rng; }
static double toy_step(void *model, Adam *adam, const void *batch, int *correct)
{
    (void)adam; (void)batch; (void)correct;
    LoopToy *t = model;
    return t->losses[t->steps_taken++];
}
static double toy_evaluate(const void *model, const void *batch, int *correct)
{
    (void)batch; (void)correct;
    ((LoopToy *)model)->evaluations++;
    return 1.0;
}
static bool toy_before(void *state, int step) { return step != ((LoopToy *)state)->stop_before; }
static TrainingStatus toy_after(void *state, int step, double loss, int correct)
{
    (void)state; (void)step; (void)correct;
    return isfinite(loss) ? TRAINING_GOES_ON : TRAINING_DIVERGED;
}
static bool toy_last(void *state, double loss) { ((LoopToy *)state)->last_looks++; return loss < 2.0; }

static TrainingStatus toy_run(LoopToy *t, bool can_evaluate)
{
    const BatchDraw draw = {t, toy_draw, t};
    const TrainingPlan plan = {.first_step = 1, .last_step = 4, .draw = &draw};
    const Trainee trainee = {t, NULL, toy_step, can_evaluate ? toy_evaluate : NULL};
    const TrainingWatch watch = {t, toy_before, toy_after, toy_last};
    return training_loop(&trainee, &plan, &watch);
}

Test(training_loop, says_how_the_run_ended)
{
    const double fine[4] = {4, 3, 2, 1}, broken[4] = {4, NAN, 2, 1};
    LoopToy done = {fine, .stop_before = -1};
    cr_expect_eq(toy_run(&done, true), TRAINING_DONE);
    cr_expect(done.steps_taken == 4 && done.evaluations == 1 && done.last_looks == 1);
    /* a trainee that cannot evaluate: no last look, and no call through NULL */
    LoopToy blind = {fine, .stop_before = -1};
    cr_expect_eq(toy_run(&blind, false), TRAINING_DONE);
    cr_expect(blind.steps_taken == 4 && blind.last_looks == 0);
    /* a signal before step 3: two steps, no evaluation after it */
    LoopToy signalled = {fine, .stop_before = 3};
    cr_expect_eq(toy_run(&signalled, true), TRAINING_STOPPED);
    cr_expect(signalled.steps_taken == 2 && signalled.evaluations == 0);
    /* a loss that is not a number at step 2 */
    LoopToy diverged = {broken, .stop_before = -1};
    cr_expect_eq(toy_run(&diverged, true), TRAINING_DIVERGED);
    cr_expect(diverged.steps_taken == 2 && diverged.evaluations == 0);
}
