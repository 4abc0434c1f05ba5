/*
 * test_layer_files.c - a multi-head layer as a directory of .npy files
 * (common/run/layer_files.c): loading with every shape check, saving a set
 * whole or not at all, comparing with expected files.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, Dq, Dk, Dv = query, key and value sizes.
 *
 * The directories are tests/fixtures/multihead/<case>/ (their README lists
 * the cases), or copies of them changed by one file.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "run/layer_files.h"
#include "io/npy.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

#define FIXTURES "tests/fixtures/multihead"

static bool file_there(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    return access(path, F_OK) == 0;
}

static void copy_fixture(const char *name, const char *to)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cp %s/%s/*.npy '%s'/", FIXTURES, name, to);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void save_or_fail(const char *dir, const char *name, const Tensor *x)
{
    char path[600], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(npy_save(path, x, err, sizeof err), 0, "%s", err);
}

/* ---- loading ---------------------------------------------------------------- */

Test(layer_files, loads_each_fixture_with_its_sizes)
{
    /* case, H, B, T, K, D, Dq, Dk, Dv, biases, valid_lens ndim (0: none) */
    static const struct { const char *name; int H, B, T, K, D, Dq, Dk, Dv; bool bias; int lens; }
        cases[] = {
            {"self_bias_nomask", 2, 2, 4, 4, 8, 8, 8, 8, true, 0},
            {"nobias_1d", 3, 2, 4, 5, 12, 12, 12, 12, false, 1},
            {"bias_2d", 4, 2, 3, 5, 8, 8, 8, 8, true, 2},
            {"cross_kdim_vdim", 4, 3, 2, 6, 12, 12, 5, 7, true, 1},
            {"one_head_2d", 1, 2, 3, 4, 6, 6, 6, 6, false, 2},
            {"query_size", 2, 2, 3, 4, 8, 3, 4, 5, true, 2},
        };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[256], err[LAYER_FILES_ERR_LEN];
        snprintf(dir, sizeof dir, "%s/%s", FIXTURES, cases[i].name);
        LayerFiles files;
        cr_assert_eq(layer_files_load(dir, cases[i].H, &files, err, sizeof err), 0, "%s", err);
        const MultiHeadAttention *layer = &files.layer;
        cr_expect(tensor_has_shape(files.queries, SHAPE(cases[i].B, cases[i].T, cases[i].Dq)),
                  "%s", cases[i].name);
        cr_expect(tensor_has_shape(files.values, SHAPE(cases[i].B, cases[i].K, cases[i].Dv)));
        cr_expect_eq(layer->query_size, cases[i].Dq, "%s", cases[i].name);
        cr_expect_eq(layer->key_size, cases[i].Dk, "%s", cases[i].name);
        cr_expect_eq(layer->value_size, cases[i].Dv, "%s", cases[i].name);
        cr_expect_eq(layer->num_hiddens, cases[i].D, "%s", cases[i].name);
        cr_expect_eq(layer->num_heads, cases[i].H);
        cr_expect_eq(layer->bias, cases[i].bias, "%s", cases[i].name);
        cr_expect_eq(layer->b_o != NULL, cases[i].bias, "%s", cases[i].name);
        cr_expect(layer->W_k == files.W_k, "the layer borrows the loaded weights");
        cr_expect_eq(files.valid_lens ? files.valid_lens->ndim : 0, cases[i].lens, "%s",
                     cases[i].name);
        cr_expect_eq(layer->dropout, 0.0f);
        layer_files_free(&files);
        cr_expect(files.queries == NULL && files.W_q == NULL && files.valid_lens == NULL);
    }
}

Test(layer_files, the_layer_loaded_gives_pytorchs_numbers)
{
    char err[LAYER_FILES_ERR_LEN];
    LayerFiles files;
    cr_assert_eq(layer_files_load(FIXTURES "/bias_2d", 4, &files, err, sizeof err), 0, "%s", err);
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(&files.layer, files.queries, files.keys, files.values,
                                       files.valid_lens, false, NULL, &weights);
    Comparison c;
    cr_assert_eq(layer_files_compare(FIXTURES "/bias_2d", "output", output, 1e-5f, 1e-5f, &c,
                                     err, sizeof err), 0, "%s", err);
    cr_expect(c.present && c.same_shape && c.close);
    cr_expect_lt(c.max_diff, 1e-5f);
    cr_expect_gt(tensor_max_abs(output), 0.1f);   /* a comparison that could fail */
    /* valid_lens (B, T) = [[1, ...]]: query 0 of sequence 0 sees key 0 only */
    cr_expect_eq(AT4(weights, 0, 2, 0, 0), 1.0f);
    tensor_free(output);
    tensor_free(weights);
    layer_files_free(&files);
}

/* A copy of bias_2d (B 2, T 3, K 5, D 8, H 4) with one file changed: the
 * load fails with err containing message, and frees cleanly. */
static void expect_load_error(const char *dir, int num_heads, const char *message)
{
    LayerFiles files;
    char err[LAYER_FILES_ERR_LEN] = "";
    cr_expect_eq(layer_files_load(dir, num_heads, &files, err, sizeof err), -1, "%s loaded",
                 dir);
    cr_expect(strstr(err, message) != NULL, "err '%s' does not contain '%s'", err, message);
    cr_expect(strchr(err, '\n') == NULL, "err is more than one line: %s", err);
    layer_files_free(&files);
    copy_fixture("bias_2d", dir);
}

Test(layer_files, names_the_file_that_does_not_fit)
{
    char dir[64];
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    copy_fixture("bias_2d", dir);

    expect_load_error(dir, 3, "/W_q.npy: num_hiddens 8 does not divide by --heads 3: every "
                      "head needs the same size");
    /* the shapes: what the file has, and what the earlier files fix */
    Tensor *bad = tensor_zeros(SHAPE(8, 5));
    save_or_fail(dir, "W_k", bad);
    expect_load_error(dir, 4,
                      "W_k.npy has shape (8, 5), expected (8, 8) = (num_hiddens, key_size)");
    tensor_free(bad);
    bad = tensor_zeros(SHAPE(2, 4, 8));
    save_or_fail(dir, "values", bad);
    expect_load_error(dir, 4, "values.npy has shape (2, 4, 8), expected (2, 5, *)");
    tensor_free(bad);
    bad = tensor_zeros(SHAPE(3, 3, 8));
    save_or_fail(dir, "keys", bad);
    expect_load_error(dir, 4, "keys.npy has shape (3, 3, 8), expected (2, *, *)");
    tensor_free(bad);
    bad = tensor_zeros(SHAPE(7));
    save_or_fail(dir, "b_v", bad);
    expect_load_error(dir, 4, "b_v.npy has shape (7,), expected (8,)");
    tensor_free(bad);
    bad = tensor_zeros(SHAPE(8, 9));
    save_or_fail(dir, "W_o", bad);
    expect_load_error(dir, 4, "W_o.npy has shape (8, 9), expected (8, 8)");
    tensor_free(bad);

    /* the data: a NaN is named with its index */
    char path[600], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/queries.npy", dir);
    Tensor *queries = npy_load(path, err, sizeof err);
    cr_assert(queries, "%s", err);
    AT3(queries, 1, 2, 3) = NAN;
    save_or_fail(dir, "queries", queries);
    tensor_free(queries);
    expect_load_error(dir, 4, "queries.npy: element 43 (index [1, 2, 3]) is NaN");

    /* the mask: lengths from 0 to K = 5, shape (B,) or (B, T) */
    snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
    cr_assert_eq(npy_save_ints(path, (const int[]){5, 6}, SHAPE(2), err, sizeof err), 0);
    expect_load_error(dir, 4, "valid_lens.npy: element 1 is 6");
    cr_assert_eq(npy_save_ints(path, (const int[]){1, -1}, SHAPE(2), err, sizeof err), 0);
    expect_load_error(dir, 4, "valid_lens.npy: element 1 is -1");
    cr_assert_eq(npy_save_ints(path, (const int[]){1, 2, 3, 4}, SHAPE(2, 2), err, sizeof err), 0);
    expect_load_error(dir, 4, "valid_lens.npy has shape (2, 2), expected (2,) or (2, 3)");

    /* a required file missing; an optional one missing is no error */
    snprintf(path, sizeof path, "%s/W_o.npy", dir);
    cr_assert_eq(remove(path), 0);
    expect_load_error(dir, 4, "W_o.npy: cannot open");
    /* some biases but not all: the missing ones are named */
    snprintf(path, sizeof path, "%s/b_k.npy", dir);
    cr_assert_eq(remove(path), 0);
    expect_load_error(dir, 4, "b_k.npy is missing: the layer has 3 of the four biases");
    /* none of the four: a layer without biases */
    static const char *const biases[] = {"b_q", "b_k", "b_v", "b_o"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, biases[i]);
        cr_assert_eq(remove(path), 0);
    }
    LayerFiles files;
    cr_expect_eq(layer_files_load(dir, 4, &files, err, sizeof err), 0, "%s", err);
    cr_expect(files.b_k == NULL && files.b_q == NULL && !files.layer.bias);
    layer_files_free(&files);
    /* a link that leads nowhere where the mask should be is not "no mask" */
    snprintf(path, sizeof path, "%s/valid_lens.npy", dir);
    cr_assert_eq(remove(path), 0);
    cr_assert_eq(symlink("nowhere.npy", path), 0);
    cr_expect_eq(layer_files_load(dir, 4, &files, err, sizeof err), -1);
    cr_expect(strstr(err, "valid_lens.npy is a symbolic link to 'nowhere.npy'") != NULL, "%s",
              err);
    layer_files_free(&files);
    cr_assert_eq(unlink(path), 0);
    scratch_dir_remove(dir);
}

/* ---- saving ------------------------------------------------------------------- */

Test(layer_files, a_saved_layer_loads_back_bit_for_bit)
{
    Rng rng = rng_new(7);
    MultiHeadAttention *layer = multihead_new(6, 5, 7, 8, 2, 0.0f, true, &rng);
    Tensor *queries = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 3, 6));
    Tensor *keys = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 4, 5));
    Tensor *values = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(2, 4, 7));
    ValidLens *valid_lens = valid_lens_2d((const int[]){4, 1, 0, 2, 3, 4}, 2, 3);
    NamedTensor set[16] = {{"queries", queries, NULL}, {"keys", keys, NULL},
                           {"values", values, NULL}};
    int count = 3 + layer_files_parameters(layer, set + 3);
    cr_expect_eq(count, 11);
    cr_expect_str_eq(set[3].name, "W_q");
    cr_expect_str_eq(set[10].name, "b_o");
    set[count++] = (NamedTensor){"valid_lens", NULL, valid_lens};

    char dir[64], err[LAYER_FILES_ERR_LEN];
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    cr_assert_eq(layer_files_save(dir, set, count, err, sizeof err), 0, "%s", err);
    LayerFiles files;
    cr_assert_eq(layer_files_load(dir, 2, &files, err, sizeof err), 0, "%s", err);
    expect_close(files.queries, queries, 0.0f, 0.0f);
    expect_close(files.values, values, 0.0f, 0.0f);
    expect_close(files.W_k, layer->W_k, 0.0f, 0.0f);
    expect_close(files.b_v, layer->b_v, 0.0f, 0.0f);
    cr_expect_eq(files.layer.key_size, 5);
    cr_assert(files.valid_lens && files.valid_lens->ndim == 2);
    cr_expect_arr_eq(files.valid_lens->data, valid_lens->data, 6 * sizeof(int));
    /* the same layer, the same numbers */
    Tensor *a = multihead_forward(layer, queries, keys, values, valid_lens, false, NULL, NULL);
    Tensor *b = multihead_forward(&files.layer, files.queries, files.keys, files.values,
                                  files.valid_lens, false, NULL, NULL);
    expect_close(b, a, 0.0f, 0.0f);
    tensor_free(a);
    tensor_free(b);
    layer_files_free(&files);

    /* saved again without biases and mask: the old files go */
    for (int i = 7; i < 11; i++)
        set[i].tensor = NULL;
    set[11].lengths = NULL;
    cr_assert_eq(layer_files_save(dir, set, count, err, sizeof err), 0, "%s", err);
    cr_expect(!file_there(dir, "b_q") && !file_there(dir, "b_o") &&
              !file_there(dir, "valid_lens"));
    cr_expect(file_there(dir, "W_o"));

    scratch_dir_remove(dir);
    tensor_free(queries);
    tensor_free(keys);
    tensor_free(values);
    valid_lens_free(valid_lens);
    multihead_free(layer);
}

Test(layer_files, a_set_is_written_whole_or_not_at_all)
{
    char dir[64], path[600], err[LAYER_FILES_ERR_LEN] = "";
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    /* the third file's name is taken by a directory: it cannot be written */
    snprintf(path, sizeof path, "%s/third.npy", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    Tensor *x = tensor_arange(SHAPE(2, 3));
    const NamedTensor set[] = {{"first", x, NULL}, {"second", x, NULL}, {"third", x, NULL},
                               {"fourth", x, NULL}};
    cr_expect_eq(layer_files_save(dir, set, 4, err, sizeof err), -1);
    cr_expect(strstr(err, "third.npy") != NULL, "%s", err);
    cr_expect(!file_there(dir, "first") && !file_there(dir, "second") &&
              !file_there(dir, "fourth"), "part of the set was left behind");
    cr_assert_eq(rmdir(path), 0);
    tensor_free(x);
    scratch_dir_remove(dir);
}

/* The first element of DIR/NAME.npy, or NAN when it cannot be read. */
static float first_value(const char *dir, const char *name)
{
    char path[600], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    Tensor *x = npy_load(path, err, sizeof err);
    const float v = x ? x->data[0] : NAN;
    tensor_free(x);
    return v;
}

Test(layer_files, a_failed_save_keeps_the_previous_set)
{
    char dir[64], path[600], err[LAYER_FILES_ERR_LEN] = "";
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    Tensor *one = tensor_full(1.0f, SHAPE(2, 3)), *two = tensor_full(2.0f, SHAPE(2, 3));
    const NamedTensor first[] = {{"a", one, NULL}, {"b", one, NULL}, {"c", one, NULL}};
    cr_assert_eq(layer_files_save(dir, first, 3, err, sizeof err), 0, "%s", err);
    /* the second run has one more file, whose name a directory holds */
    snprintf(path, sizeof path, "%s/d.npy", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    const NamedTensor second[] = {{"a", two, NULL}, {"b", two, NULL}, {"c", NULL, NULL},
                                  {"d", two, NULL}};
    cr_expect_eq(layer_files_save(dir, second, 4, err, sizeof err), -1);
    cr_expect(strstr(err, "d.npy: cannot write") != NULL, "%s", err);
    /* every file of the first run is there, with its numbers */
    cr_expect(first_value(dir, "a") == 1.0f && first_value(dir, "b") == 1.0f &&
              first_value(dir, "c") == 1.0f, "the first run's set was touched");
    cr_expect_eq(set_leftovers(dir), 0, "temporary files left behind");
    /* and once the name is free, the second run replaces it whole */
    cr_assert_eq(rmdir(path), 0);
    cr_assert_eq(layer_files_save(dir, second, 4, err, sizeof err), 0, "%s", err);
    cr_expect(first_value(dir, "a") == 2.0f && first_value(dir, "d") == 2.0f);
    cr_expect(!file_there(dir, "c"), "c.npy is not part of the second run");
    TENSOR_FREE(one, two);
    scratch_dir_remove(dir);
}

/* A writer killed while it builds its set (SIGKILL: nothing of it can
 * clean up) leaves the previous set whole; the next writer into the
 * directory removes what the killed one left beside it. */
Test(layer_files, a_killed_writer_leaves_the_previous_set)
{
    char dir[64], err[LAYER_FILES_ERR_LEN];
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    Tensor *one = tensor_full(1.0f, SHAPE(4, 4)), *two = tensor_full(2.0f, SHAPE(4, 4));
    const NamedTensor first[] = {{"first", one, NULL}, {"second", one, NULL}};
    cr_assert_eq(layer_files_save(dir, first, 2, err, sizeof err), 0, "%s", err);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        FileSet *set = fileset_begin(dir, err, sizeof err);
        if (set == NULL || npy_save_into(set, dir, "first", two, err, sizeof err) != 0)
            _exit(3);
        raise(SIGKILL);   /* one file of two written, beside the directory */
        _exit(4);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %d", status);
    cr_expect_eq(set_leftovers(dir), 1, "the killed writer's directory is not beside DIR");
    cr_expect(first_value(dir, "first") == 1.0f && first_value(dir, "second") == 1.0f,
              "the previous set was touched");
    const NamedTensor second[] = {{"first", two, NULL}, {"second", two, NULL}};
    cr_assert_eq(layer_files_save(dir, second, 2, err, sizeof err), 0, "%s", err);
    cr_expect_eq(set_leftovers(dir), 0, "the next writer left the killed one's files");
    cr_expect(first_value(dir, "first") == 2.0f && first_value(dir, "second") == 2.0f);
    TENSOR_FREE(one, two);
    scratch_dir_remove(dir);
}

/* A writer puts its set in place only while it holds the lock: with a
 * reader holding it, the set waits, then appears whole. */
Test(layer_files, a_writer_waits_for_the_lock)
{
    char dir[64];
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    const int lock = fileset_read_lock(dir);   /* as a reader loading the directory */
    cr_assert(lock >= 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* a lock belongs to the open file, which the child shares: let go of it */
        close(lock);
        char err[LAYER_FILES_ERR_LEN];
        Tensor *x = tensor_arange(SHAPE(2, 2));
        const NamedTensor set[] = {{"a", x, NULL}, {"b", x, NULL}};
        _exit(layer_files_save(dir, set, 2, err, sizeof err) == 0 ? 0 : 1);
    }
    nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    /* whatever the child has done by now, no file of the set is in place */
    cr_expect(!file_there(dir, "a") && !file_there(dir, "b"),
              "a file appeared while the directory was locked");
    fileset_read_unlock(lock);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_expect(file_there(dir, "a") && file_there(dir, "b"));
    cr_expect_eq(set_leftovers(dir), 0);
    scratch_dir_remove(dir);
}

/* ---- running the layer ----------------------------------------------------------- */

/* A layer of D = 4, 2 heads, every weight 1, on queries and keys filled
 * with q and k: what overflows where can be worked out by hand. */
static void run_filled(float q, float k, float g, int expect, const char *message)
{
    Rng rng = rng_new(1);
    MultiHeadAttention *layer = multihead_new(4, 4, 4, 4, 2, 0.0f, false, &rng);
    Tensor *weights[] = {layer->W_q, layer->W_k, layer->W_v, layer->W_o};
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < weights[i]->size; j++)
            weights[i]->data[j] = 1.0f;
    Tensor *queries = tensor_full(q, SHAPE(2, 3, 4)), *keys = tensor_full(k, SHAPE(2, 5, 4));
    Tensor *grad_output = g != 0.0f ? tensor_full(g, SHAPE(2, 3, 4)) : NULL;
    LayerFiles files = layer_files_borrow(layer, queries, keys, keys, NULL);
    files.grad_output = grad_output;
    LayerResults results;
    char err[LAYER_FILES_ERR_LEN] = "";
    cr_expect_eq(multihead_checked_run(&files.layer, files.queries, files.keys, files.values,
                                       files.valid_lens, files.grad_output, &results, err,
                                       sizeof err), expect, "%s", err);
    if (message)
        cr_expect(strstr(err, message) != NULL, "err '%s' does not contain '%s'", err, message);
    if (expect == 0) {
        /* every key alike: the output is V's row times W_o, 4 * 4 * k */
        cr_expect_float_eq(results.output->data[0], 16.0f * k, 1e-3f * 16.0f * k);
        cr_expect_float_eq(results.attention_weights->data[0], 0.2f, 1e-6f);
        cr_expect_eq(results.attention_weights->ndim, 4);
    } else {
        cr_expect(results.output == NULL && results.attention_weights == NULL);
    }
    layer_results_free(&results);
    TENSOR_FREE(queries, keys, grad_output);
    multihead_free(layer);
}

Test(layer_files, a_run_names_the_stage_that_overflows)
{
    run_filled(1.0f, 2.0f, 1.0f, 0, NULL);
    /* 4 * 1e38 per projected entry: the first of (B, T, D) */
    run_filled(1e38f, 1.0f, 0.0f, -1, "the query projection overflows float32 at [0, 0, 0]");
    run_filled(1.0f, 1e38f, 0.0f, -1, "the key projection overflows float32 at [0, 0, 0]");
    /* Q and K entries of 4e20, finite; their dot product over d = 2 is not */
    run_filled(1e20f, 1e20f, 0.0f, -1, "the attention scores overflow float32 at [0, 0, 0, 0]");
    /* zero queries keep the scores at 0; the values' 1.2e38 are finite, the
     * output's 4 * 1.2e38 is not */
    run_filled(0.0f, 3e37f, 0.0f, -1, "the output (the heads times W_o) overflows float32 at "
               "[0, 0, 0]");
    /* a finite forward, a gradient that is not */
    run_filled(1.0f, 1.0f, 1e38f, -1, "the gradient grad_");
}

Test(layer_files, the_memory_a_run_needs)
{
    Rng rng = rng_new(1);
    MultiHeadAttention *layer = multihead_new(1, 1, 1, 1, 1, 0.0f, false, &rng);
    /* inputs 3, parameters 4 + 4, projections 3 twice, weights 1 twice,
     * heads, concat and output 3: 22 floats; the backward doubles it */
    cr_expect_float_eq(multihead_bytes_needed(layer, 1, 1, 1, false), 88.0, 1e-9);
    cr_expect_float_eq(multihead_bytes_needed(layer, 1, 1, 1, true), 176.0, 1e-9);
    char err[LAYER_FILES_ERR_LEN] = "";
    cr_expect_eq(multihead_check_memory(layer, 1, 1, 1, true, err, sizeof err), 0);
    /* (64, 1, 2^20, 2^20) weights: 2^48 bytes, on no machine we run */
    cr_expect_eq(multihead_check_memory(layer, 64, 1 << 20, 1 << 20, false, err, sizeof err),
                 -1);
    cr_expect(strstr(err, "this run needs about 563.0 TB of memory") != NULL, "%s", err);
    multihead_free(layer);
}

/* ---- comparing ---------------------------------------------------------------- */

/* layer_files_check_expected prints its verdicts for the program's reader;
 * the tests below expect results that differ on purpose, so its lines go
 * to /dev/null here, where a passing make test would show DIFFERENT. */
static int check_expected_quietly(const char *dir, const NamedTensor *results, int count,
                                  char *err, size_t err_len)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null_fd = open("/dev/null", O_WRONLY);
    cr_assert(saved >= 0 && null_fd >= 0);
    dup2(null_fd, STDOUT_FILENO);
    close(null_fd);
    int verdict = layer_files_check_expected(dir, results, count, 1e-5f, 1e-5f, err, err_len);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    return verdict;
}

Test(layer_files, compares_with_the_expected_file)
{
    char dir[64], err[LAYER_FILES_ERR_LEN];
    scratch_dir_make(dir, sizeof dir, "attn_layer_files");
    cr_assert(dir[0]);
    Tensor *actual = tensor_arange(SHAPE(2, 3));
    Comparison c;
    /* no expected file: nothing compared */
    cr_assert_eq(layer_files_compare(dir, "output", actual, 1e-5f, 1e-5f, &c, err, sizeof err), 0);
    cr_expect(!c.present);

    /* equal, then one element off by 1e-3 */
    Tensor *expected = tensor_copy(actual);
    save_or_fail(dir, "expected_output", expected);
    cr_assert_eq(layer_files_compare(dir, "output", actual, 1e-5f, 1e-5f, &c, err, sizeof err), 0);
    cr_expect(c.present && c.same_shape && c.close && c.max_diff == 0.0f);
    expected->data[4] += 1e-3f;
    save_or_fail(dir, "expected_output", expected);
    cr_assert_eq(layer_files_compare(dir, "output", actual, 1e-5f, 1e-5f, &c, err, sizeof err), 0);
    cr_expect(c.present && c.same_shape && !c.close);
    cr_expect_float_eq(c.max_diff, 1e-3f, 1e-6f);
    /* a looser tolerance accepts it */
    cr_assert_eq(layer_files_compare(dir, "output", actual, 2e-3f, 0.0f, &c, err, sizeof err), 0);
    cr_expect(c.close);

    /* the whole set: 1 when one result differs, 0 when all agree */
    const NamedTensor results[] = {{"output", actual, NULL}, {"other", actual, NULL}};
    cr_expect_eq(check_expected_quietly(dir, results, 2, err, sizeof err), 1);
    cr_expect_eq(check_expected_quietly(dir, results + 1, 1, err, sizeof err), 0);

    /* another shape is a difference, not an error */
    Tensor *wrong = tensor_zeros(SHAPE(3, 2));
    save_or_fail(dir, "expected_output", wrong);
    cr_assert_eq(layer_files_compare(dir, "output", actual, 1e-5f, 1e-5f, &c, err, sizeof err), 0);
    cr_expect(c.present && !c.same_shape && !c.close);
    cr_expect(c.expected_ndim == 2 && c.expected_shape[0] == 3 && c.expected_shape[1] == 2);
    cr_expect_eq(check_expected_quietly(dir, results, 1, err, sizeof err), 1);

    /* an expected file that cannot be read is an error */
    char path[600];
    snprintf(path, sizeof path, "%s/expected_output.npy", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("not numpy", f);
    fclose(f);
    cr_expect_eq(layer_files_compare(dir, "output", actual, 1e-5f, 1e-5f, &c, err, sizeof err), -1);
    cr_expect(strstr(err, "expected_output.npy") != NULL, "%s", err);
    cr_expect_eq(check_expected_quietly(dir, results, 2, err, sizeof err), -1);

    tensor_free(actual);
    tensor_free(expected);
    tensor_free(wrong);
    scratch_dir_remove(dir);
}
