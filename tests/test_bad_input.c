/*
 * test_bad_input.c - every wrong input gets one clear line and a non-zero
 * exit, never a crash, a hang, a NaN or a half-written file.
 *
 * One row per case: the program, its arguments, the exit status expected
 * (2 for a usage error, 1 for a runtime error), words that stderr must
 * contain, and optionally a file that must not exist afterwards. Every row
 * runs in a fresh scratch directory; '@' in the arguments and in the file
 * stands for it. A row may also
 *   - build files there first (setup): .npy inputs for 05's --from, made
 *     byte by byte here so that they can hold what numpy.save would never
 *     write, or an output name already taken by a directory;
 *   - cap the memory the program may take (memory_mb), so that a size that
 *     cannot be allocated fails at once instead of filling the machine;
 *   - run the program as an ordinary user (unprivileged), for a directory
 *     that cannot be written: root may write into any directory.
 * After every run no temporary file (*.tmp*) may be left in the scratch
 * directory.
 *
 * Runs of the sanitizer build keep checking memory errors here, but not
 * leaks: a program that stops on an error does not free what it holds.
 */
#include "platform_names.h"   /* first: nftw (XSI), and on macOS the rest */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "memory.h"
#include "run/layer_files.h"
#include "run/saved_models.h"
#include "learn/lookup_model.h"
#include "multihead.h"
#include "tensor.h"

/* A sanitizer build reserves terabytes of shadow memory, so an address-space
 * limit would stop it before main (UNDER_ASAN, helpers.h); its allocator is
 * capped instead. */

typedef void (*Setup)(const char *dir);

typedef struct {
    const char *program;
    const char *args;             /* '@' is the scratch directory */
    int status;
    const char *message;
    const char *must_not_exist;   /* '@' is the scratch directory */
    Setup setup;                  /* NULL: an empty scratch directory */
    int memory_mb;                /* 0: no limit */
    bool unprivileged;
} BadInput;

/* ---- .npy files written by hand ------------------------------------------ */

/* "(2, 3, 4)", or "(5,)" for one dimension, as NumPy writes a shape. */
static void shape_text(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
                                 (long long)shape[i]);
    snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
}

/* DIR/in/NAME.npy: version 1.0, the header padded with spaces to a multiple
 * of 64 bytes and ended by '\n', as numpy.save writes it, then the bytes.
 * The numbers are this machine's, little-endian on every machine we run. */
static void write_npy(const char *dir, const char *name, const char *descr, int ndim,
                      const int64_t *shape, const void *data, size_t bytes)
{
    char path[512], shape_buf[160], dict[256];
    snprintf(path, sizeof path, "%s/in/%s.npy", dir, name);
    shape_text(shape_buf, sizeof shape_buf, ndim, shape);
    int dict_len = snprintf(dict, sizeof dict,
                            "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                            shape_buf);
    int header_len = dict_len + 1;
    header_len += (64 - (10 + header_len) % 64) % 64;
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write the fixture %s", path);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(header_len & 0xff, f);
    fputc(header_len >> 8, f);
    fputs(dict, f);
    for (int i = dict_len; i < header_len - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, bytes, f);
    cr_assert_eq(fclose(f), 0, "cannot write the fixture %s", path);
}

/* '<f4' data of the given shape; element poison_at (if not -1) is poison. */
static void write_floats_poisoned(const char *dir, const char *name, int ndim, const int *shape,
                                  long poison_at, float poison)
{
    int64_t shape64[TENSOR_MAX_DIMS];
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        shape64[i] = shape[i];
        count *= (size_t)shape[i];
    }
    float *data = malloc(count * sizeof *data);
    cr_assert(data != NULL);
    /* not all ones, and different in every file */
    for (size_t i = 0; i < count; i++)
        data[i] = sinf(0.7f * (float)i + (float)strlen(name));
    if (poison_at >= 0)
        data[poison_at] = poison;
    write_npy(dir, name, "<f4", ndim, shape64, data, count * sizeof *data);
    free(data);
}

static void write_floats(const char *dir, const char *name, int ndim, const int *shape)
{
    write_floats_poisoned(dir, name, ndim, shape, -1, 0.0f);
}

static void write_ints(const char *dir, const char *name, const char *descr, int ndim,
                       const int *shape, const long long *values)
{
    int64_t shape64[TENSOR_MAX_DIMS];
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        shape64[i] = shape[i];
        count *= (size_t)shape[i];
    }
    bool wide = strcmp(descr, "<i8") == 0;
    unsigned char bytes[256];
    for (size_t i = 0; i < count; i++) {
        if (wide) {
            int64_t v = values[i];
            memcpy(bytes + 8 * i, &v, 8);
        } else {
            int32_t v = (int32_t)values[i];
            memcpy(bytes + 4 * i, &v, 4);
        }
    }
    write_npy(dir, name, descr, ndim, shape64, bytes, count * (wide ? 8 : 4));
}

static void remove_input(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/in/%s.npy", dir, name);
    cr_assert_eq(unlink(path), 0, "cannot remove %s", path);
}

static void make_dir(const char *dir, const char *sub)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    cr_assert_eq(mkdir(path, 0755), 0, "cannot make %s", path);
}

/* ---- fixtures -------------------------------------------------------------- */

/* @/in: a layer that runs: B = 2, T = 3, K = 4, D = Dq = Dk = Dv = 4, so
 * --heads 1, 2 or 4 fit. Each setup below spoils one thing. */
static void from_good(const char *dir)
{
    make_dir(dir, "in");
    write_floats(dir, "queries", SHAPE(2, 3, 4));
    write_floats(dir, "keys", SHAPE(2, 4, 4));
    write_floats(dir, "values", SHAPE(2, 4, 4));
    write_floats(dir, "W_q", SHAPE(4, 4));
    write_floats(dir, "W_k", SHAPE(4, 4));
    write_floats(dir, "W_v", SHAPE(4, 4));
    write_floats(dir, "W_o", SHAPE(4, 4));
}

static void from_no_keys(const char *dir)
{
    from_good(dir);
    remove_input(dir, "keys");
}

static void from_keys_batch(const char *dir)
{
    from_good(dir);
    write_floats(dir, "keys", SHAPE(3, 4, 4));
}

static void from_values_count(const char *dir)
{
    from_good(dir);
    write_floats(dir, "values", SHAPE(2, 5, 4));
}

static void from_w_k_in(const char *dir)
{
    from_good(dir);
    write_floats(dir, "W_k", SHAPE(4, 3));
}

static void from_w_o_not_square(const char *dir)
{
    from_good(dir);
    write_floats(dir, "W_o", SHAPE(4, 5));
}

static void from_bias_size(const char *dir)
{
    from_good(dir);
    write_floats(dir, "b_q", SHAPE(5));
}

static void from_queries_2d(const char *dir)
{
    from_good(dir);
    write_floats(dir, "queries", SHAPE(3, 4));
}

static void from_hiddens_6(const char *dir)
{
    from_good(dir);
    write_floats(dir, "W_q", SHAPE(6, 4));
    write_floats(dir, "W_k", SHAPE(6, 4));
    write_floats(dir, "W_v", SHAPE(6, 4));
    write_floats(dir, "W_o", SHAPE(6, 6));
}

static void from_nan(const char *dir)
{
    from_good(dir);
    /* element 27 of (2, 4, 4) is [1, 2, 3] */
    write_floats_poisoned(dir, "values", SHAPE(2, 4, 4), 27, NAN);
}

static void from_inf(const char *dir)
{
    from_good(dir);
    write_floats_poisoned(dir, "W_v", SHAPE(4, 4), 1, -INFINITY);
}

static void from_f8_too_large(const char *dir)
{
    from_good(dir);
    double data[24];
    for (int i = 0; i < 24; i++)
        data[i] = 0.25 * i;
    data[5] = 1e300;   /* a fine double, but no float */
    write_npy(dir, "queries", "<f8", 3, (const int64_t[]){2, 3, 4}, data, sizeof data);
}

static void from_big_endian(const char *dir)
{
    from_good(dir);
    float data[16] = {0};
    write_npy(dir, "W_q", ">f4", 2, (const int64_t[]){4, 4}, data, sizeof data);
}

static void from_not_npy(const char *dir)
{
    from_good(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/in/keys.npy", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fputs("0.1,0.2,0.3\n", f);
    fclose(f);
}

/* A header that promises 10^15 floats (4 PB) over 64 bytes of data: the
 * reader must refuse before it tries to allocate. */
static void from_huge_shape(const char *dir)
{
    from_good(dir);
    char data[64] = {0};
    write_npy(dir, "queries", "<f4", 3, (const int64_t[]){100000, 100000, 100000}, data,
              sizeof data);
}

/* B * T * D does not fit in 64 bits. */
static void from_overflow_shape(const char *dir)
{
    from_good(dir);
    char data[64] = {0};
    write_npy(dir, "queries", "<f4", 3, (const int64_t[]){2147483647, 2147483647, 8}, data,
              sizeof data);
}

/* A dimension that does not fit in an int. */
static void from_dimension_too_large(const char *dir)
{
    from_good(dir);
    char data[64] = {0};
    write_npy(dir, "keys", "<f4", 3, (const int64_t[]){2, 4294967296LL, 4}, data, sizeof data);
}

static void from_valid_lens_above(const char *dir)
{
    from_good(dir);
    write_ints(dir, "valid_lens", "<i8", SHAPE(2), (const long long[]){2, 5});
}

static void from_valid_lens_negative(const char *dir)
{
    from_good(dir);
    write_ints(dir, "valid_lens", "<i4", SHAPE(2, 3), (const long long[]){1, 2, 3, 0, -1, 2});
}

static void from_valid_lens_shape(const char *dir)
{
    from_good(dir);
    write_ints(dir, "valid_lens", "<i4", SHAPE(3), (const long long[]){1, 2, 3});
}

static void from_valid_lens_huge(const char *dir)
{
    from_good(dir);
    write_ints(dir, "valid_lens", "<i8", SHAPE(2), (const long long[]){1, 4294967298LL});
}

static void from_valid_lens_float(const char *dir)
{
    from_good(dir);
    write_floats(dir, "valid_lens", SHAPE(2));
}

/* Rows of 2^20 keys: the (1, 1, 2^20, 2^20) weights need 4.4 TB, refused
 * before anything is allocated, on any machine. */
static void from_long_rows(const char *dir)
{
    make_dir(dir, "in");
    write_floats(dir, "queries", SHAPE(1, 1 << 20, 1));
    write_floats(dir, "keys", SHAPE(1, 1 << 20, 1));
    write_floats(dir, "values", SHAPE(1, 1 << 20, 1));
    write_floats(dir, "W_q", SHAPE(1, 1));
    write_floats(dir, "W_k", SHAPE(1, 1));
    write_floats(dir, "W_v", SHAPE(1, 1));
    write_floats(dir, "W_o", SHAPE(1, 1));
}

/* '<f4' data of the given shape, every element value. */
static void write_filled(const char *dir, const char *name, int ndim, const int *shape,
                         float value)
{
    int64_t shape64[TENSOR_MAX_DIMS];
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        shape64[i] = shape[i];
        count *= (size_t)shape[i];
    }
    float data[256];
    cr_assert(count <= 256);
    for (size_t i = 0; i < count; i++)
        data[i] = value;
    write_npy(dir, name, "<f4", ndim, shape64, data, count * sizeof *data);
}

/* Finite inputs whose results are not: every weight 1, so that a projected
 * entry is the sum of 4 inputs; @/out receives nothing. */
static void from_weights_ones(const char *dir)
{
    from_good(dir);
    make_dir(dir, "out");
    const char *names[] = {"W_q", "W_k", "W_v", "W_o"};
    for (int i = 0; i < 4; i++)
        write_filled(dir, names[i], SHAPE(4, 4), 1.0f);
}

static void overflow_queries(const char *dir)
{
    from_weights_ones(dir);
    write_filled(dir, "queries", SHAPE(2, 3, 4), 1e38f);   /* 4e38 after W_q */
}

static void overflow_scores(const char *dir)
{
    from_weights_ones(dir);
    write_filled(dir, "queries", SHAPE(2, 3, 4), 1e20f);   /* 4e20 * 4e20 * d */
    write_filled(dir, "keys", SHAPE(2, 4, 4), 1e20f);
}

static void overflow_gradients(const char *dir)
{
    from_weights_ones(dir);
    write_filled(dir, "grad_output", SHAPE(2, 3, 4), 1e38f);
}

/* three of the four biases */
static void from_bias_missing(const char *dir)
{
    from_good(dir);
    write_floats(dir, "b_q", SHAPE(4));
    write_floats(dir, "b_v", SHAPE(4));
    write_floats(dir, "b_o", SHAPE(4));
}

static void from_one_bias(const char *dir)
{
    from_good(dir);
    write_floats(dir, "b_v", SHAPE(4));
}

static void link_nowhere(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/in/%s.npy", dir, name);
    cr_assert_eq(symlink("gone.npy", path), 0);
}

static void from_valid_lens_link(const char *dir)
{
    from_good(dir);
    link_nowhere(dir, "valid_lens");
}

static void from_bias_links(const char *dir)
{
    from_good(dir);
    const char *names[] = {"b_q", "b_k", "b_v", "b_o"};
    for (int i = 0; i < 4; i++)
        link_nowhere(dir, names[i]);
}

/* Output names already taken by a directory: the write fails half way. */
/* grad_output.npy asks for the backward; @/out receives the results */
static void grad_output_wrong_shape(const char *dir)
{
    from_good(dir);
    make_dir(dir, "out");
    write_floats(dir, "grad_output", SHAPE(2, 3, 5));
}

static void grad_output_nan(const char *dir)
{
    from_good(dir);
    make_dir(dir, "out");
    /* element 7 of (2, 3, 4) is [0, 1, 3] */
    write_floats_poisoned(dir, "grad_output", SHAPE(2, 3, 4), 7, NAN);
}

/* the results and the first gradients are written, then grad_W_k.npy fails */
static void grad_w_k_taken(const char *dir)
{
    from_good(dir);
    write_floats(dir, "grad_output", SHAPE(2, 3, 4));
    make_dir(dir, "out");
    make_dir(dir, "out/grad_W_k.npy");
}

static void out_results_taken(const char *dir)
{
    from_good(dir);
    make_dir(dir, "out");
    make_dir(dir, "out/attention_weights.npy");
}

static void out_output_taken(const char *dir)
{
    from_good(dir);
    make_dir(dir, "out");
    make_dir(dir, "out/output.npy");
}

static void out_w_v_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/W_v.npy");
}

static void plot_softmax_gp_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/masked_softmax.gp");
}

static void plot_self_attention_dat_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/self_attention.dat");
}

static void plot_head_grid_gp_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/head_grid_random.gp");
}

static void plot_permutation_gp_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/permutation_weights.gp");
}

/* @/in: a model 05_multihead/train can load: 8 countries, num_hiddens 8,
 * 2 heads, under the parameter names of nn.MultiheadAttention. Each setup
 * below spoils one thing. */
static void train_model_good(const char *dir)
{
    make_dir(dir, "in");
    write_floats(dir, "embed_keys.weight", SHAPE(8, 8));
    write_floats(dir, "embed_values.weight", SHAPE(8, 8));
    write_floats(dir, "attention.in_proj_weight", SHAPE(24, 8));
    write_floats(dir, "attention.in_proj_bias", SHAPE(24));
    write_floats(dir, "attention.out_proj.weight", SHAPE(8, 8));
    write_floats(dir, "attention.out_proj.bias", SHAPE(8));
    write_floats(dir, "readout.weight", SHAPE(8, 8));
    write_floats(dir, "readout.bias", SHAPE(8));
    write_ints(dir, "num_heads", "<i4", SHAPE(1), (const long long[]){2});
}

static void train_model_no_heads(const char *dir)
{
    train_model_good(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/in/num_heads.npy", dir);
    cr_assert_eq(unlink(path), 0);
}

static void train_model_three_heads(const char *dir)
{
    train_model_good(dir);
    write_ints(dir, "num_heads", "<i4", SHAPE(1), (const long long[]){3});
}

static void train_model_readout_rows(const char *dir)
{
    train_model_good(dir);
    write_floats(dir, "readout.weight", SHAPE(9, 8));
}

static void train_model_in_proj_2d_bias(const char *dir)
{
    train_model_good(dir);
    write_floats(dir, "attention.in_proj_bias", SHAPE(3, 8));
}

static void train_model_nan(const char *dir)
{
    train_model_good(dir);
    write_floats_poisoned(dir, "attention.out_proj.weight", SHAPE(8, 8), 9, NAN);
}

static void train_model_few_countries(const char *dir)
{
    train_model_good(dir);
    write_floats(dir, "embed_keys.weight", SHAPE(3, 8));
}

/* @/in with the training state beside the model: Adam's moments, stacked as
 * the model's files, 5 steps taken, 4 examples of 8 pairs a batch, seed 0.
 * Each setup below spoils one thing. */
static void train_model_resumable(const char *dir)
{
    train_model_good(dir);
    const char *names[] = {"embed_keys.weight", "embed_values.weight", "attention.in_proj_weight",
                           "attention.in_proj_bias", "attention.out_proj.weight",
                           "attention.out_proj.bias", "readout.weight", "readout.bias"};
    const int rows[] = {8, 8, 24, 24, 8, 8, 8, 8}, matrix[] = {1, 1, 1, 0, 1, 0, 1, 0};
    for (int i = 0; i < 8; i++)
        for (int moment = 0; moment < 2; moment++) {
            char name[96];
            snprintf(name, sizeof name, "optimizer.%s.%s", moment ? "exp_avg_sq" : "exp_avg",
                     names[i]);
            /* exp_avg_sq holds squares: 0.01 everywhere */
            if (matrix[i] && moment)
                write_filled(dir, name, SHAPE(rows[i], 8), 0.01f);
            else if (moment)
                write_filled(dir, name, SHAPE(rows[i]), 0.01f);
            else if (matrix[i])
                write_floats(dir, name, SHAPE(rows[i], 8));
            else
                write_floats(dir, name, SHAPE(rows[i]));
        }
    write_ints(dir, "optimizer.step", "<i4", SHAPE(1), (const long long[]){5});
    write_floats_poisoned(dir, "optimizer.lr", SHAPE(1), 0, 0.001f);
    write_ints(dir, "training", "<i4", SHAPE(6), (const long long[]){4, 8, 0, 0, 0, 0});
}

/* a second moment below 0: no mean of squares is */
static void train_state_negative_square(const char *dir)
{
    train_model_resumable(dir);
    float squares[64];
    for (int i = 0; i < 64; i++)
        squares[i] = i == 9 ? -0.5f : 0.01f;
    write_npy(dir, "optimizer.exp_avg_sq.readout.weight", "<f4", 2, (const int64_t[]){8, 8},
              squares, sizeof squares);
}

/* first moments of 3e38 over second moments of 0: the update is infinite */
static void train_state_update_overflows(const char *dir)
{
    train_model_resumable(dir);
    write_filled(dir, "optimizer.exp_avg.readout.bias", SHAPE(8), 3e38f);
    write_filled(dir, "optimizer.exp_avg_sq.readout.bias", SHAPE(8), 0.0f);
}

static void train_state_missing_moment(const char *dir)
{
    train_model_resumable(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/in/optimizer.exp_avg_sq.readout.bias.npy", dir);
    cr_assert_eq(unlink(path), 0);
}

/* a moment saved for another vocabulary (9 countries) */
static void train_state_other_vocabulary(const char *dir)
{
    train_model_resumable(dir);
    write_floats(dir, "optimizer.exp_avg.embed_keys.weight", SHAPE(9, 8));
}

static void train_state_batch_zero(const char *dir)
{
    train_model_resumable(dir);
    write_ints(dir, "training", "<i4", SHAPE(6), (const long long[]){0, 8, 0, 0, 0, 0});
}

static void train_state_step_negative(const char *dir)
{
    train_model_resumable(dir);
    write_ints(dir, "optimizer.step", "<i4", SHAPE(1), (const long long[]){-3});
}

static void train_state_lr_not_npy(const char *dir)
{
    train_model_resumable(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/in/optimizer.lr.npy", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fputs("0.001\n", f);
    fclose(f);
}

static void train_out_bias_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/readout.bias.npy");
}

/* A two-key model (05_multihead/head_importance --to): 8 countries and
 * capitals, num_hiddens 8, 2 heads. */
static void two_key_good(const char *dir)
{
    make_dir(dir, "in");
    write_floats(dir, "embed_keys.weight", SHAPE(8, 8));
    write_floats(dir, "embed_values.weight", SHAPE(8, 8));
    write_floats(dir, "attention.W_q.weight", SHAPE(8, 16));
    write_floats(dir, "attention.W_k.weight", SHAPE(8, 8));
    write_floats(dir, "attention.W_v.weight", SHAPE(8, 8));
    write_floats(dir, "attention.W_o.weight", SHAPE(8, 8));
    write_floats(dir, "readout.weight", SHAPE(16, 8));
    write_floats(dir, "readout.bias", SHAPE(16));
    write_ints(dir, "num_heads", "<i4", SHAPE(1), (const long long[]){2});
}

static void two_key_no_heads(const char *dir)
{
    two_key_good(dir);
    remove_input(dir, "num_heads");
}

static void two_key_three_heads(const char *dir)
{
    two_key_good(dir);
    write_ints(dir, "num_heads", "<i4", SHAPE(1), (const long long[]){3});
}

static void two_key_readout_rows(const char *dir)
{
    two_key_good(dir);
    write_floats(dir, "readout.weight", SHAPE(9, 8));
}

static void two_key_nan(const char *dir)
{
    two_key_good(dir);
    write_floats_poisoned(dir, "attention.W_v.weight", SHAPE(8, 8), 10, NAN);
}

static void two_key_many_countries(const char *dir)
{
    two_key_good(dir);
    write_floats(dir, "embed_keys.weight", SHAPE(41, 8));
}

static void two_key_few_countries(const char *dir)
{
    two_key_good(dir);
    write_floats(dir, "embed_keys.weight", SHAPE(5, 8));
}

static void two_key_other_hiddens(const char *dir)
{
    two_key_good(dir);
    write_floats(dir, "embed_values.weight", SHAPE(8, 6));
}

static void importance_plot_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/head_pruning.gp");
}

static void heads_plot_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/two_keys_2_heads.gp");
}

/* Finite parameters whose forward is not: readout.weight all 1e38, so
 * that a logit is 1e38 times a sum of hidden values */
static void train_model_overflowing(const char *dir)
{
    train_model_good(dir);
    write_filled(dir, "readout.weight", SHAPE(8, 8), 1e38f);
}

static void two_key_overflowing(const char *dir)
{
    two_key_good(dir);
    write_filled(dir, "readout.weight", SHAPE(16, 8), 1e38f);
}

/* @/in: a two-layer model for induction_heads --from --vocab 4 --length 8
 * --hiddens 4, one head per layer, its unembedding all 1e38 */
static void induction_overflowing(const char *dir)
{
    make_dir(dir, "in");
    write_floats(dir, "embed_tokens.weight", SHAPE(4, 4));
    write_floats(dir, "embed_positions.weight", SHAPE(8, 4));
    write_floats(dir, "layers.0.in_proj_weight", SHAPE(12, 4));
    write_floats(dir, "layers.0.out_proj.weight", SHAPE(4, 4));
    write_floats(dir, "layers.1.in_proj_weight", SHAPE(12, 4));
    write_floats(dir, "layers.1.out_proj.weight", SHAPE(4, 4));
    write_filled(dir, "unembed.weight", SHAPE(4, 4), 1e38f);
    write_ints(dir, "num_heads", "<i4", SHAPE(2), (const long long[]){1, 1});
    write_ints(dir, "num_layers", "<i4", SHAPE(1), (const long long[]){2});
}

/* @/in for relative_positions --from: queries, keys, values (B, H, T, d) */
static void relpos_inputs(const char *dir, int d, int num_keys)
{
    make_dir(dir, "out");
    make_dir(dir, "in");
    write_floats(dir, "queries", SHAPE(1, 2, 3, d));
    write_floats(dir, "keys", SHAPE(1, 2, num_keys, d));
    write_floats(dir, "values", SHAPE(1, 2, 3, d));
}
static void relpos_good(const char *dir) { relpos_inputs(dir, 4, 3); }
static void relpos_odd_head(const char *dir) { relpos_inputs(dir, 3, 3); }
static void relpos_keys_longer(const char *dir) { relpos_inputs(dir, 4, 5); }
static void relpos_overflow(const char *dir)
{
    relpos_good(dir);
    write_floats_poisoned(dir, "queries", SHAPE(1, 2, 3, 4), 2, 3e38f);
    write_floats_poisoned(dir, "keys", SHAPE(1, 2, 3, 4), 2, 3e38f);
}
static void relpos_empty(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "in");
}

static void positions_plot_taken(const char *dir)
{
    make_dir(dir, "out");
    make_dir(dir, "out/positions_attention.gp");
}

static void out_dir(const char *dir)
{
    make_dir(dir, "out");
}

static void a_file(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/file", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fclose(f);
}

/* For the child of a run as an ordinary user (unprivileged): root would
 * write into the read-only directory anyway. The group first, then the
 * user, after which the process may change neither. Root's supplementary
 * groups stay (setgroups is not POSIX) and change nothing here: the
 * directories below are closed to every group. 0, or -1 with errno. */
static int become_user(uid_t uid, gid_t gid)
{
    return setgid(gid) == 0 && setuid(uid) == 0 ? 0 : -1;
}

static void read_only_dir(const char *dir)
{
    from_good(dir);
    make_dir(dir, "readonly");
    char path[512];
    snprintf(path, sizeof path, "%s/readonly", dir);
    cr_assert_eq(chmod(path, 0555), 0);
}

/* DIR/nosearch: writable, not searchable (a file in it cannot be opened) */
static void unsearchable_dir(const char *dir)
{
    from_good(dir);
    make_dir(dir, "nosearch");
    char path[512];
    snprintf(path, sizeof path, "%s/nosearch", dir);
    cr_assert_eq(chmod(path, 0666), 0);
}

/* DIR/loop: a symbolic link to itself */
static void symlink_loop(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/loop", dir);
    cr_assert_eq(symlink("loop", path), 0);
}

/* ---- the table --------------------------------------------------------------- */

#define DOT "01_dot_product/dot_product"
#define NOISY "01_dot_product/noisy_query"
#define SOFTMAX "02_softmax_mask/softmax_mask"
#define CAUSAL "02_softmax_mask/exercise_causal_mask"
#define SELF "03_self_attention/self_attention"
#define COST "03_self_attention/cost"
#define DROPOUT "03_self_attention/exercise_dropout_average"
#define STREAMING "03_self_attention/streaming"
#define BACKWARD "03_self_attention/backward"
#define ADDITIVE "03_self_attention/additive"
#define TRANSPOSE "04_transpose_qkv/transpose_qkv"
#define SPLIT "04_transpose_qkv/exercise_head_split"
#define MULTI "05_multihead/multihead"
#define GRID "05_multihead/head_grid"
#define IMPORTANCE "05_multihead/head_importance"
#define HEADS "05_multihead/heads_experiment"
#define POSITIONS "06_permutation_invariance/positions"
#define RELPOS "06_permutation_invariance/relative_positions"
#define INDUCTION "06_permutation_invariance/induction_heads"
#define BENCH "05_multihead/bench"
#define TRAIN "05_multihead/train"
#define LAYER_BACKWARD "05_multihead/backward"
#define PERMUTATION "06_permutation_invariance/permutation_invariance"
#define ORDER "06_permutation_invariance/exercise_causal_order"

/* @/in: a decoder layer for 05_multihead/decode --heads 4 --kv-heads 2:
 * tokens (2, 5, 8), W_q and W_o (8, 8), W_k and W_v (4, 8) (G * d = 2 * 2),
 * and @/out for --to. Each setup below spoils one thing. */
static void decode_good(const char *dir)
{
    make_dir(dir, "in");
    make_dir(dir, "out");
    write_floats(dir, "tokens", SHAPE(2, 5, 8));
    write_floats(dir, "W_q", SHAPE(8, 8));
    write_floats(dir, "W_k", SHAPE(4, 8));
    write_floats(dir, "W_v", SHAPE(4, 8));
    write_floats(dir, "W_o", SHAPE(8, 8));
}

static void decode_w_k_of_every_head(const char *dir)
{
    decode_good(dir);
    write_floats(dir, "W_k", SHAPE(8, 8));   /* G = H's shape */
}

static void decode_two_biases(const char *dir)
{
    decode_good(dir);
    write_floats(dir, "b_q", SHAPE(8));
    write_floats(dir, "b_k", SHAPE(4));
}

static void decode_nan_token(const char *dir)
{
    decode_good(dir);
    write_floats_poisoned(dir, "tokens", SHAPE(2, 5, 8), 17, NAN);
}

static void decode_overflowing_W_q(const char *dir)
{
    decode_good(dir);
    write_floats_poisoned(dir, "W_q", SHAPE(8, 8), 0, 3e38f);
    write_floats_poisoned(dir, "W_k", SHAPE(4, 8), 0, 3e38f);
}

#define DECODE "05_multihead/decode"

/* Most rows leave the last fields out (no setup, no limit): zero. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static BadInput rows[] = {
    /* chapter 05: decoding with a key-value cache */
    {DECODE, "--from @/in --heads 4 --kv-heads 3", 2,
     "--kv-heads 3 does not divide --heads 4", NULL, decode_good},
    {DECODE, "--heads 4", 2, "--heads, --kv-heads and --to go with --from DIR", NULL},
    {DECODE, "--from @/in --heads 4", 2, "--from needs --heads H and --kv-heads G", NULL,
     decode_good},
    {DECODE, "--from @/in --heads 4 --kv-heads 2 --to @/out", 1,
     "W_k.npy has shape (8, 8), but --kv-heads 2 with head size 2 = 8 / --heads 4 needs (4, 8)",
     "@/out/outputs.npy", decode_w_k_of_every_head},
    {DECODE, "--from @/in --heads 3 --kv-heads 1 --to @/out", 1,
     "in/tokens.npy: num_hiddens 8 does not divide by --heads 3", "@/out/outputs.npy",
     decode_good},
    {DECODE, "--from @/in --heads 4 --kv-heads 2 --capacity 4 --to @/out", 1,
     "holds 5 tokens, more than the cache's capacity --capacity 4", "@/out/outputs.npy",
     decode_good},
    {DECODE, "--from @/in --heads 4 --kv-heads 2 --capacity 16000000 --to @/out", 1,
     "this run needs about", "@/out/outputs.npy", decode_good, 300},
    {DECODE, "--from @/in --heads 4 --kv-heads 2 --to @/out", 1,
     "b_o.npy are missing: the layer has 2 of the four biases", "@/out/outputs.npy", decode_two_biases},
    {DECODE, "--from @/in --heads 4 --kv-heads 2 --to @/out", 1,
     "tokens.npy: element 17 (index [0, 2, 1]) is NaN; the data must be finite",
     "@/out/outputs.npy", decode_nan_token},
    {DECODE, "--from @/in --heads 4 --kv-heads 2 --to @/out", 1,
     "the outputs overflow float32", "@/out/outputs.npy", decode_overflowing_W_q},
    /* chapter 01 */
    {DOT, "--frobnicate", 2, "unknown option '--frobnicate'", NULL},
    {DOT, "--query", 2, "--query needs a value", NULL},
    {DOT, "--query Germany", 2, "'Germany' is not in the vocabulary", NULL},
    {DOT, "--query ''", 2, "'' is not in the vocabulary", NULL},
    {DOT, "--seed abc", 2, "--seed expects a whole number", NULL},
    {DOT, "--seed -1", 2, "--seed expects a whole number", NULL},
    {DOT, "--seed 12abc", 2, "--seed expects a whole number", NULL},
    {DOT, "--seed 99999999999999999999999", 2, "--seed expects a whole number", NULL},
    {NOISY, "--keys 0", 2, "--keys expects a whole number from 2", NULL},
    {NOISY, "--keys 1", 2, "--keys expects a whole number from 2 to 4096, got '1'", NULL},
    {NOISY, "--dim -4", 2, "--dim expects a whole number from 1", NULL},
    {NOISY, "--dim", 2, "--dim needs a value", NULL},
    {NOISY, "--trials 1e9", 2, "--trials expects a whole number", NULL},
    {NOISY, "--trials 0", 2, "--trials expects a whole number from 1", NULL},
    {NOISY, "--keys 99999999999999999999", 2, "--keys expects a whole number", NULL},
    {NOISY, "--keys 4096 --dim 4096 --trials 1000000", 2, "--keys 4096, --dim 4096 and "
     "--trials 1000000 take 1e+14 multiply-adds over the 6 noise levels, more than the 1e+10"},
    /* 4096 x 4096 keys are 64 MB: more than the 32 MB allowed, refused before they are made */
    {NOISY, "--keys 4096 --dim 4096 --trials 1", 1, "this run needs about 83.1 MB of memory (the "
     "keys), more than the memory limit (ulimit -v), 33.6 MB: use fewer --keys", NULL, NULL, 32,
     false},

    /* chapter 02 */
    {SOFTMAX, "--batch 0", 2, "--batch expects a whole number from 1 to 16, got '0'", NULL},
    {SOFTMAX, "--queries 17", 2, "--queries expects a whole number from 1 to 16", NULL},
    {SOFTMAX, "--keys -3", 2, "--keys expects a whole number from 1 to 16", NULL},
    {SOFTMAX, "--keys 99999999999999999999", 2, "--keys expects a whole number", NULL},
    {SOFTMAX, "--batch 2.5", 2, "--batch expects a whole number", NULL},
    {SOFTMAX, "--seed", 2, "--seed needs a value", NULL},
    {SOFTMAX, "--valid-lens 5,1", 2, "--valid-lens expects comma-separated whole numbers "
     "from 0 to 4, got '5,1'", NULL},
    {SOFTMAX, "--valid-lens -1,2", 2, "--valid-lens expects comma-separated whole numbers", NULL},
    {SOFTMAX, "--valid-lens 1,,2", 2, "--valid-lens expects comma-separated whole numbers", NULL},
    {SOFTMAX, "--valid-lens abc", 2, "--valid-lens expects comma-separated whole numbers", NULL},
    {SOFTMAX, "--valid-lens 1,2,3", 2, "3 lengths fit neither (batch,) = (2,) nor "
     "(batch, queries) = (2, 2)", NULL},
    {SOFTMAX, "--plot @/missing", 2, "--plot: directory '", "@/missing/masked_softmax.dat"},
    {SOFTMAX, "--plot @/file", 2, "is not a directory", NULL, a_file},
    {SOFTMAX, "--plot @/readonly", 2, "is not writable", "@/readonly/masked_softmax.dat",
     read_only_dir, 0, true},
    {SOFTMAX, "--plot @/out", 2, "holds a directory, 'masked_softmax.gp'",
     "@/out/masked_softmax.dat", plot_softmax_gp_taken},
    {CAUSAL, "--tokens 1", 2, "--tokens expects a whole number from 2 to 16, got '1'", NULL},
    {CAUSAL, "--tokens 17", 2, "--tokens expects a whole number from 2 to 16", NULL},
    {CAUSAL, "--causal", 2, "unknown option '--causal'", NULL},

    /* chapter 03 */
    {SELF, "--tokens 0", 2, "--tokens expects a whole number from 1 to 64, got '0'", NULL},
    {SELF, "--tokens 65", 2, "--tokens expects a whole number from 1 to 64", NULL},
    {SELF, "--dim 4", 2, "--dim sizes random tokens: give --tokens N too", NULL},
    {SELF, "--tokens 4 --dim 1025", 2, "--dim expects a whole number from 1 to 1024",
     NULL},
    {SELF, "--dropout 1", 2, "--dropout expects a number from 0 to 0.99, got '1'", NULL},
    /* below 1 as a double, but 1 as the float the library keeps */
    {SELF, "--dropout 0.99999999 --train", 2, "--dropout expects a number from 0 to 0.99, got "
     "'0.99999999'", NULL},
    {SELF, "--dropout -0.1", 2, "--dropout expects a number from 0 to 0.99, got '-0.1'", NULL},
    {SELF, "--dropout nan", 2, "--dropout expects a number from 0 to 0.99, got 'nan'", NULL},
    {SELF, "--dropout inf", 2, "--dropout expects a number from 0 to 0.99, got 'inf'", NULL},
    {SELF, "--cost", 2, "unknown option '--cost'", NULL},
    {COST, "--cost-max 127", 2, "--cost-max expects a whole number from 128 to 65536", NULL},
    {COST, "--cost-max 100000", 2, "--cost-max expects a whole number from 128 to 65536", NULL},
    {COST, "--dim 0", 2, "--dim expects a whole number from 1 to 1024, got '0'", NULL},
    {COST, "--tokens 4", 2, "unknown option '--tokens'", NULL},
    {COST, "--cost-max 65536", 1, "cost: this run needs about 17.3 GB of memory (the "
     "(65536, 65536) weights of n = 65536), more than the memory limit", NULL, NULL, 256,
     false},
    {SELF, "--plot", 2, "--plot needs a value", NULL},
    {SELF, "--plot @/missing", 2, "--plot: directory '", "@/missing/self_attention.dat"},
    {SELF, "--plot @/out", 2, "holds a directory, 'self_attention.dat'",
     "@/out/self_attention.gp", plot_self_attention_dat_taken},
    {DROPOUT, "--draws 9", 2, "--draws expects a whole number from 10 to 1000000", NULL},
    {DROPOUT, "--dropout 1", 2, "--dropout expects a number from 0 to 0.99, got '1'", NULL},
    {DROPOUT, "--dropout 0.99999999", 2, "--dropout expects a number from 0 to 0.99", NULL},
    {DROPOUT, "--dropout half", 2, "--dropout expects a number from 0 to 0.99, got 'half'", NULL},
    {BACKWARD, "--tokens 0", 2, "--tokens expects a whole number from 1 to 8, got '0'", NULL},
    {BACKWARD, "--tokens 9", 2, "--tokens expects a whole number from 1 to 8", NULL},
    {BACKWARD, "--dim 2", 2, "--dim sizes random tokens: give --tokens N too", NULL},
    {BACKWARD, "--tokens 3 --dim 5", 2, "--dim expects a whole number from 1 to 4",
     NULL},
    {BACKWARD, "--eps 0", 2, "--eps expects a number from 1e-06 to 0.5, got '0'", NULL},
    {BACKWARD, "--eps nan", 2, "--eps expects a number from 1e-06 to 0.5, got 'nan'", NULL},
    {BACKWARD, "--eps 1", 2, "--eps expects a number from 1e-06 to 0.5, got '1'", NULL},
    {BACKWARD, "--jacobian-max 3", 2, "--jacobian-max expects a whole number from 4 to 4096",
     NULL},
    {BACKWARD, "--jacobian-max 99999999999", 2, "--jacobian-max expects a whole number", NULL},
    {BACKWARD, "--seed -1", 2, "--seed expects a whole number", NULL},
    {ADDITIVE, "--points 1", 2, "--points expects a whole number from 2 to 1000, got '1'", NULL},
    {ADDITIVE, "--points 1001", 2, "--points expects a whole number from 2 to 1000", NULL},
    {ADDITIVE, "--noise -0.5", 2, "--noise expects a number from 0 to 10, got '-0.5'", NULL},
    {ADDITIVE, "--noise nan", 2, "--noise expects a number from 0 to 10, got 'nan'", NULL},
    {ADDITIVE, "--hiddens 8", 2, "unknown option '--hiddens'", NULL},
    {ADDITIVE, "--plot @/missing", 2, "--plot: directory '", "@/missing/kernel_fit.dat"},
    {STREAMING, "--block 0", 2, "--block expects a whole number from 1 to 6, got '0'", NULL},
    {STREAMING, "--block 7", 2, "--block expects a whole number from 1 to 6", NULL},
    {STREAMING, "--batch 65", 2, "--batch expects a whole number from 1 to 64", NULL},
    {STREAMING, "--threads 0", 2, "--threads expects a whole number from 1 to 64", NULL},
    {STREAMING, "--dim x", 2, "--dim expects a whole number from 1 to 1024, got 'x'",
     NULL},
    {STREAMING, "--keys", 2, "--keys needs a value", NULL},
    /* B * T * K scores that would not fit: refused before anything is made */
    {STREAMING, "--batch 64 --queries 4096 --keys 4096", 2, "would need 4.3 GB for the clear "
     "version's scores", NULL},
    /* inputs, outputs and scores over 1 GB, though the scores alone fit */
    {STREAMING, "--batch 64 --queries 4096 --keys 1 --dim 1024", 2, "would need 3.2 GB "
     "for the inputs, outputs and scores; keep it under 1 GB", NULL},
    /* 17.2 billion multiply-adds would take half a minute */
    {STREAMING, "--batch 1 --queries 4096 --keys 4096 --dim 1024", 2, "B * T * n_k * d = "
     "17.2 billion multiply-adds; keep it under 2 billion", NULL},
    /* the queries alone are (4, 4096, 1024), 64 MB: more than the 48 MB allowed */
    {STREAMING, "--batch 4 --queries 4096 --keys 100 --dim 1024", 1,
     "this run needs about 227.2 MB of memory (part 2's inputs, outputs and scores), more than "
     "the memory limit (ulimit -v), 50.3 MB", NULL, NULL, 48, false},

    /* chapter 04 */
    {TRANSPOSE, "--heads 0", 2, "--heads expects a whole number from 1 to 99, got '0'", NULL},
    {TRANSPOSE, "--batch 10", 2, "--batch expects a whole number from 1 to 9", NULL},
    {TRANSPOSE, "--queries -1", 2, "--queries expects a whole number from 1 to 9", NULL},
    {TRANSPOSE, "--hiddens 10 --heads 4", 2, "--hiddens 10 does not divide by --heads 4", NULL},
    {TRANSPOSE, "--valid-lens 1,2,3", 2, "--valid-lens needs 2 lengths (one per sequence), "
     "got 3", NULL},
    {TRANSPOSE, "--valid-lens 9,1", 2, "--valid-lens expects comma-separated whole numbers "
     "from 0 to 3, got '9,1'", NULL},
    /* the flag is named, not the value after it */
    {SPLIT, "--seed abc", 2, "exercise_head_split: --seed expects a whole number", NULL},
    {SPLIT, "--seed", 2, "--seed needs a value", NULL},
    {SPLIT, "--heads 2", 2, "unknown option '--heads'", NULL},

    /* chapter 05: options of the built-in example */
    {MULTI, "--hiddens 100 --heads 7", 2, "--hiddens 100 does not divide by --heads 7", NULL},
    {MULTI, "--batch 65", 2, "--batch expects a whole number from 1 to 64, got '65'", NULL},
    {MULTI, "--keys 0", 2, "--keys expects a whole number from 1 to 256", NULL},
    {MULTI, "--hiddens 4096", 2, "--hiddens expects a whole number from 1 to 1024", NULL},
    {MULTI, "--valid-lens 7,1", 2, "--valid-lens expects comma-separated whole numbers "
     "from 0 to 6, got '7,1'", NULL},
    {MULTI, "--valid-lens 1", 2, "--valid-lens needs 2 lengths (one per sequence), got 1", NULL},
    {MULTI, "--dropout 1", 2, "--dropout expects a number from 0 to 0.99", NULL},
    {MULTI, "--to @/missing", 2, "--to: directory '", "@/missing/output.npy"},
    {MULTI, "--to @/file", 2, "--to: '", NULL, a_file},
    {MULTI, "--to @/readonly", 2, "is not writable", "@/readonly/queries.npy", read_only_dir, 0,
     true},
    /* the parameters were written, then W_v failed: none may stay */
    {MULTI, "--to @/out", 2, "holds a directory, 'W_v.npy'", "@/out/queries.npy", out_w_v_taken},
    {MULTI, "--plot @/missing", 2, "--plot: directory '", "@/missing/multihead_weights.dat"},

    /* chapter 05: --from DIR */
    {MULTI, "--from @/missing --heads 2", 2, "--from: directory '", NULL},
    {MULTI, "--from @/file --heads 2", 2, "is not a directory", NULL, a_file},
    {MULTI, "--from @/in", 2, "--from needs --heads H", NULL, from_good},
    {MULTI, "--from @/in --heads 2 --batch 3", 2, "--from takes its sizes", NULL, from_good},
    {MULTI, "--from @/in --heads 2", 1, "keys.npy: cannot open: No such file", NULL,
     from_no_keys},
    {MULTI, "--from @/in --heads 2", 1, "keys.npy has shape (3, 4, 4), expected (2, *, *)",
     NULL, from_keys_batch},
    {MULTI, "--from @/in --heads 2", 1, "values.npy has shape (2, 5, 4), expected (2, 4, *)",
     NULL, from_values_count},
    {MULTI, "--from @/in --heads 2", 1, "W_k.npy has shape (4, 3), expected (4, 4)", NULL,
     from_w_k_in},
    {MULTI, "--from @/in --heads 2", 1, "W_o.npy has shape (4, 5), expected (4, 4)", NULL,
     from_w_o_not_square},
    {MULTI, "--from @/in --heads 2", 1, "b_q.npy has shape (5,), expected (4,)", NULL,
     from_bias_size},
    {MULTI, "--from @/in --heads 2", 1, "queries.npy has shape (3, 4), expected (*, *, *)",
     NULL, from_queries_2d},
    {MULTI, "--from @/in --heads 4", 1, "in/W_q.npy: num_hiddens 6 does not divide by --heads 4",
     NULL, from_hiddens_6},
    {MULTI, "--from @/in --heads 2", 1, "values.npy: element 27 (index [1, 2, 3]) is NaN",
     NULL, from_nan},
    {MULTI, "--from @/in --heads 2", 1, "W_v.npy: element 1 (index [0, 1]) is -inf", NULL,
     from_inf},
    {MULTI, "--from @/in --heads 2", 1, "queries.npy: element 5 (index [0, 1, 1]) = 1e+300 "
     "is outside the float32 range", NULL, from_f8_too_large},
    {MULTI, "--from @/in --heads 2", 1, "W_q.npy: big-endian data ('>f4') is not supported",
     NULL, from_big_endian},
    {MULTI, "--from @/in --heads 2", 1, "keys.npy: not a .npy file", NULL, from_not_npy},
    {MULTI, "--from @/in --heads 2", 1, "needs 4000000000000000 bytes, but only 64 follow",
     NULL, from_huge_shape},
    {MULTI, "--from @/in --heads 2", 1, "its size overflows", NULL, from_overflow_shape},
    {MULTI, "--from @/in --heads 2", 1, "keys.npy: bad shape: a dimension is larger than "
     "2147483647", NULL, from_dimension_too_large},
    {MULTI, "--from @/in --heads 2", 1, "valid_lens.npy: element 1 is 5; a length must be "
     "from 0 to the number of keys", NULL, from_valid_lens_above},
    {MULTI, "--from @/in --heads 2", 1, "valid_lens.npy: element 4 is -1", NULL,
     from_valid_lens_negative},
    {MULTI, "--from @/in --heads 2", 1, "valid_lens.npy has shape (3,), expected (2,) or (2, 3)",
     NULL, from_valid_lens_shape},
    {MULTI, "--from @/in --heads 2", 1, "valid_lens.npy: element 1 (index [1]) = 4294967298 "
     "does not fit in an int", NULL, from_valid_lens_huge},
    {MULTI, "--from @/in --heads 2", 1, "valid_lens.npy: holds floating-point data", NULL,
     from_valid_lens_float},
    {MULTI, "--from @/in --heads 1", 1, "this run needs about 8.8 TB of memory (the attention "
     "weights (1, 1, 1048576, 1048576) alone take 4.4 TB)", NULL, from_long_rows, 256, false},
    /* the built-in example at sizes within every option's range */
    {MULTI, "--batch 64 --queries 256 --keys 256 --hiddens 1024 --heads 1024 --to @/out", 1,
     "of memory", "@/out/output.npy", out_dir, 256, false},
    /* finite inputs, results that are not: the first stage is named, nothing written */
    {MULTI, "--from @/in --heads 2 --to @/out", 1, "the query projection overflows float32 at "
     "[0, 0, 0]: scale the inputs down", "@/out/output.npy", overflow_queries},
    {MULTI, "--from @/in --heads 2 --to @/out", 1, "the attention scores overflow float32 at "
     "[0, 0, 0, 0] (sequence, head, query, key)", "@/out/output.npy", overflow_scores},
    {MULTI, "--from @/in --heads 2 --to @/out", 1, "overflows float32 at", "@/out/output.npy",
     overflow_gradients},
    {MULTI, "--from @/in --heads 2", 1, "gradient grad_", NULL, overflow_gradients},
    /* an incomplete set of files */
    {MULTI, "--from @/in --heads 2", 1, "/b_k.npy is missing: the layer has 3 of the four "
     "biases", NULL, from_bias_missing},
    {MULTI, "--from @/in --heads 2", 1, "in/b_o.npy are missing: the layer has 1 of the four",
     NULL, from_one_bias},
    {MULTI, "--from @/in --heads 2", 1, "in/valid_lens.npy is a symbolic link to 'gone.npy', "
     "which cannot be opened", NULL, from_valid_lens_link},
    {MULTI, "--from @/in --heads 2", 1, "in/b_q.npy is a symbolic link to 'gone.npy'", NULL,
     from_bias_links},
    {MULTI, "--from @/in --heads 2 --to @/missing", 2, "--to: directory '",
     "@/missing/output.npy", from_good},
    {MULTI, "--from @/in --heads 2 --to @/readonly", 2, "is not writable",
     "@/readonly/output.npy", read_only_dir, 0, true},
    /* output.npy was written, then attention_weights.npy failed */
    {MULTI, "--from @/in --heads 2 --to @/out", 2, "holds a directory, 'attention_weights.npy'",
     "@/out/output.npy", out_results_taken},
    {MULTI, "--from @/in --heads 2 --to @/out", 2, "holds a directory, 'output.npy'",
     "@/out/attention_weights.npy", out_output_taken},
    /* the backward's input: a wrong shape or a NaN, one line and nothing written */
    {MULTI, "--from @/in --heads 2 --to @/out", 1, "grad_output.npy has shape (2, 3, 5), "
     "expected (2, 3, 4) = (batch_size, num_queries, num_hiddens)", "@/out/output.npy",
     grad_output_wrong_shape},
    {MULTI, "--from @/in --heads 2 --to @/out", 1, "grad_output.npy: element 7 (index [0, 1, 3]) "
     "is NaN; the data must be finite", "@/out/output.npy", grad_output_nan},
    {MULTI, "--from @/in --heads 2 --to @/out", 2, "holds a directory, 'grad_W_k.npy'",
     "@/out/grad_queries.npy", grad_w_k_taken},
    {MULTI, "--from @/in --heads 2 --plot @/missing", 2, "--plot: directory '",
     "@/missing/multihead_weights.dat", from_good},

    /* chapter 05: the layer backwards */
    {LAYER_BACKWARD, "--heads 4", 2, "num_hiddens 6 does not divide by --heads 4", NULL},
    {LAYER_BACKWARD, "--heads 7", 2, "--heads expects a whole number from 1 to 6, got '7'", NULL},
    {LAYER_BACKWARD, "--head 2", 2, "--head 2: the layer has heads 0 to 1", NULL},
    {LAYER_BACKWARD, "--heads 3 --head -1", 2, "--head expects a whole number from 0 to 5", NULL},
    {LAYER_BACKWARD, "--seed x", 2, "--seed expects a whole number", NULL},

    /* chapter 05: the exercises */
    {GRID, "--hiddens 8 --heads 3", 2, "--hiddens 8 does not divide by --heads 3", NULL},
    {GRID, "--heads 9", 2, "--heads expects a whole number from 1 to 8, got '9'", NULL},
    {GRID, "--scale 0.01", 2, "--scale expects a number from 0.1 to 100, got '0.01'", NULL},
    {GRID, "--hiddens", 2, "--hiddens needs a value", NULL},
    {GRID, "--plot @/missing", 2, "--plot: directory '", NULL},
    {GRID, "--plot @/out", 2, "holds a directory, 'head_grid_random.gp'",
     "@/out/head_grid_random.dat", plot_head_grid_gp_taken},
    {IMPORTANCE, "--heads 17", 2, "--heads expects a whole number from 1 to 16, got '17'",
     NULL},
    {IMPORTANCE, "--hiddens 30 --heads 4", 2, "--hiddens 30 does not divide by --heads 4",
     NULL},
    {IMPORTANCE, "--pairs 10 --countries 8", 2, "--countries 8 is fewer than --pairs 10", NULL},
    {IMPORTANCE, "--orders 0", 2, "--orders expects a whole number from 1 to 1000, got '0'",
     NULL},
    {IMPORTANCE, "--lr 0", 2, "--lr expects a number from 1e-06 to 1, got '0'", NULL},
    {IMPORTANCE, "--from @/missing", 2, "--from: directory '", NULL},
    {IMPORTANCE, "--from @/in --heads 2", 2, "--from takes the model's sizes from its files",
     NULL, two_key_good},
    {IMPORTANCE, "--from @/in --steps 5", 2, "--from takes the model's sizes", NULL,
     two_key_good},
    {IMPORTANCE, "--from @/in --to @/in", 2, "--from and --to together would only copy the "
     "model", NULL, two_key_good},
    {IMPORTANCE, "--examples 5001", 2, "--examples expects a whole number from 1 to 5000", NULL},
    {POSITIONS, "--examples 0", 2, "--examples expects a whole number from 1 to 5000, got '0'",
     NULL},
    /* the dictionary model of train is another model: it has no W_q of its own */
    {IMPORTANCE, "--from @/in", 1, "in/attention.W_q.weight.npy: cannot open: No such file",
     NULL, train_model_good},
    {IMPORTANCE, "--from @/in", 1, "in/num_heads.npy: cannot open: No such file", NULL,
     two_key_no_heads},
    {IMPORTANCE, "--from @/in", 1, "in/num_heads.npy: num_hiddens 8 does not divide by "
     "num_heads 3", NULL, two_key_three_heads},
    {IMPORTANCE, "--from @/in", 1, "in/readout.weight.npy: expected shape (16, 8), got (9, 8)",
     NULL, two_key_readout_rows},
    {IMPORTANCE, "--from @/in", 1, "attention.W_v.weight.npy: element 10 (index [1, 2]) is NaN",
     NULL, two_key_nan},
    {IMPORTANCE, "--from @/in", 1, "embed_keys.weight has 8 columns and embed_values.weight 6",
     NULL, two_key_other_hiddens},
    {IMPORTANCE, "--from @/in", 1, "a vocabulary larger than the task's word lists", NULL,
     two_key_many_countries},
    {IMPORTANCE, "--from @/in", 1, "a vocabulary smaller than --pairs", NULL,
     two_key_few_countries},
    {IMPORTANCE, "--to @/missing", 2, "--to: directory '", "@/missing/readout.bias.npy"},
    {IMPORTANCE, "--to @/readonly", 2, "is not writable", "@/readonly/readout.bias.npy",
     read_only_dir, 0, true},
    /* one final name taken: no file of the model is left, none half written */
    {IMPORTANCE, "--steps 2 --examples 10 --to @/out", 2, "holds a directory, 'readout.bias.npy'",
     "@/out/embed_keys.weight.npy", train_out_bias_taken},
    {IMPORTANCE, "--plot @/missing", 2, "--plot: directory '", "@/missing/head_pruning.dat"},
    {IMPORTANCE, "--steps 2 --examples 10 --orders 1 --plot @/out", 2, "holds a directory, 'head_pruning.gp'", "@/out/head_pruning.dat",
     importance_plot_taken},
    {HEADS, "--heads 1,3", 2, "--hiddens 32 does not divide by --heads 3", NULL},
    {HEADS, "--heads 1,,2", 2, "--heads expects comma-separated whole numbers from 1 to 128",
     NULL},
    {HEADS, "--heads 1,2,4,8,1,2,4", 2, "--heads takes at most 6 numbers", NULL},
    {HEADS, "--seeds 65", 2, "--seeds expects a whole number from 1 to 64, got '65'", NULL},
    {HEADS, "--mlp -1", 2, "--mlp expects a whole number from 0 to 512, got '-1'", NULL},
    {HEADS, "--threads 0", 2, "--threads expects a whole number from 1 to 16, got '0'", NULL},
    {IMPORTANCE, "--seeds 65", 2, "--seeds expects a whole number from 1 to 64, got '65'",
     NULL},
    {IMPORTANCE, "--seeds 2 --to @/out", 2, "--to saves one model: --seeds 2 trains 2",
     "@/out/readout.bias.npy", from_weights_ones},
    {IMPORTANCE, "--threads 17", 2, "--threads expects a whole number from 1 to 16", NULL},
    {POSITIONS, "--seeds 65", 2, "--seeds expects a whole number from 1 to 64, got '65'", NULL},
    {HEADS, "--pairs 1", 2, "--pairs expects a whole number from 2 to 16, got '1'", NULL},
    {HEADS, "--countries 5", 2, "--countries 5 is fewer than --pairs 6", NULL},
    {HEADS, "--countries 41", 2, "--countries expects a whole number from 2 to 40", NULL},
    {HEADS, "--plot @/missing", 2, "--plot: directory '", "@/missing/two_keys_1_heads.dat"},
    {HEADS, "--steps 2 --seeds 1 --examples 10 --plot @/out", 2, "holds a directory, 'two_keys_2_heads.gp'", "@/out/two_keys_2_heads.dat", heads_plot_taken},
    {POSITIONS, "--length 1", 2, "--length expects a whole number from 2 to 16, got '1'", NULL},
    {POSITIONS, "--letters 27", 2, "--letters expects a whole number from 2 to 26", NULL},
    {POSITIONS, "--letters 5", 2, "--letters 5 is fewer than --length 8", NULL},
    {POSITIONS, "--hiddens 30 --heads 4", 2, "--hiddens 30 does not divide by --heads 4", NULL},
    /* the memory a run's sizes need, checked before any training */
    {POSITIONS, "--batch 4096 --hiddens 128 --length 16", 1, "this run needs about", NULL, NULL,
     300},
    {HEADS, "--batch 4096 --hiddens 128 --threads 16", 1, "this run needs about", NULL, NULL,
     300},
    {IMPORTANCE, "--batch 4096 --hiddens 128 --threads 16 --seeds 16", 1,
     "this run needs about", NULL, NULL, 300},
    {POSITIONS, "--seeds 0", 2, "--seeds expects a whole number from 1 to 64, got '0'", NULL},
    {POSITIONS, "--lr 2", 2, "--lr expects a number from 1e-06 to 1, got '2'", NULL},
    {POSITIONS, "--plot @/missing", 2, "--plot: directory '",
     "@/missing/positions_attention.dat"},
    {POSITIONS, "--steps 2 --seeds 1 --examples 10 --plot @/out", 2, "holds a directory, 'positions_attention.gp'", "@/out/positions_attention.dat",
     positions_plot_taken},
    /* --from a model whose finite parameters overflow: one line, exit 1 */
    {TRAIN, "--from @/in", 1, "the held-out loss is NaN: the model's forward overflows float32",
     NULL, train_model_overflowing},
    {IMPORTANCE, "--from @/in", 1, "the held-out loss is NaN: the model's forward overflows "
     "float32 on these examples", NULL, two_key_overflowing},
    {INDUCTION, "--from @/in --vocab 4 --length 8 --hiddens 4 --examples 2", 1,
     "in: the held-out loss is NaN: the model's forward overflows float32 on these sequences",
     NULL, induction_overflowing},
    /* chapter 06: relative_positions */
    {RELPOS, "--from @/in --to @/out --positions rope", 1,
     "RoPE turns pairs of columns: the head size (the last dimension of", "@/out/scores.npy",
     relpos_odd_head},
    {RELPOS, "--from @/in --to @/out --positions alibi", 1,
     "keys.npy: shape (1, 2, 5, 4) differs from queries.npy's (1, 2, 3, 4)", "@/out/scores.npy",
     relpos_keys_longer},
    {RELPOS, "--from @/in --to @/out --positions rope --offset -1", 2,
     "--offset expects a whole number from 0", "@/out/scores.npy", relpos_good},
    {RELPOS, "--from @/in --to @/out --positions rope --offset 16777214", 2,
     "--offset 16777214 with 3 tokens reaches position 16777216; positions must stay below "
     "2^24", "@/out/scores.npy", relpos_good},
    {RELPOS, "--from @/in --to @/out --positions rope --causal", 1, "the scores are not finite",
     "@/out/scores.npy", relpos_overflow},
    {RELPOS, "--from @/in --to @/out --positions sideways", 2,
     "--positions 'sideways': expected none, rope or alibi", "@/out/scores.npy", relpos_good},
    {RELPOS, "--from @/in --positions rope", 2, "--from needs --to DIR", NULL, relpos_good},
    {RELPOS, "--from @/in --to @/out", 2, "--from needs --positions", "@/out/scores.npy",
     relpos_good},
    {RELPOS, "--from @/missing --to @ --positions none", 2, "--from", "@/out/scores.npy"},
    {RELPOS, "--from @/in --to @/out --positions none", 1, "queries.npy", "@/out/scores.npy",
     relpos_empty},
    {RELPOS, "--positions rope", 2, "--to, --positions and --causal go with --from DIR", NULL},
    {RELPOS, "--hiddens 12 --heads 4", 2, "--hiddens 12 / --heads 4 is an odd head size: RoPE "
     "turns a head's numbers in pairs", NULL},
    {RELPOS, "--letters 20", 2, "--letters 20 is fewer than 4 x --length 6", NULL},
    {RELPOS, "--back 6", 2, "--back 6 must be below --length 6", NULL},
    {RELPOS, "--offset 100001", 2, "--offset 100001: parts 1 and 2 build tables", NULL},
    {RELPOS, "--tokens 17", 2, "--tokens expects a whole number from 2 to 16, got '17'", NULL},
    /* chapter 05: train */
    {TRAIN, "--lr 0", 2, "--lr expects a number from 1e-06 to 1e+30, got '0'", NULL},
    {TRAIN, "--lr -0.01", 2, "--lr expects a number from 1e-06 to 1e+30", NULL},
    {TRAIN, "--lr 1e31", 2, "--lr expects a number from 1e-06 to 1e+30, got '1e31'", NULL},
    {TRAIN, "--steps 0", 2, "--steps expects a whole number from 1 to 1000000, got '0'", NULL},
    {TRAIN, "--batch 0", 2, "--batch expects a whole number from 1 to 4096", NULL},
    {TRAIN, "--pairs 1", 2, "--pairs expects a whole number from 2 to 16", NULL},
    {TRAIN, "--pairs 10 --countries 8", 2, "--countries 8 is fewer than --pairs 10", NULL},
    {TRAIN, "--countries 41", 2, "--countries expects a whole number from 2 to 40", NULL},
    {TRAIN, "--hiddens 30 --heads 4", 2, "--hiddens 30 does not divide by --heads 4", NULL},
    {TRAIN, "--examples 0", 2, "--examples expects a whole number from 1 to 100000", NULL},
    {TRAIN, "--threads 0", 2, "--threads expects a whole number from 1 to 64, got '0'", NULL},
    {TRAIN, "--threads 65", 2, "--threads expects a whole number from 1 to 64, got '65'", NULL},
    {TRAIN, "--to @/missing", 2, "--to: directory '", "@/missing/readout.bias.npy"},
    {TRAIN, "--to @/readonly", 2, "is not writable", "@/readonly/readout.bias.npy",
     read_only_dir, 0, true},
    /* readout.bias.npy cannot be written: no file of the model may appear */
    {TRAIN, "--steps 2 --to @/out", 2, "holds a directory, 'readout.bias.npy'",
     "@/out/embed_keys.weight.npy", train_out_bias_taken},
    /* writable but not searchable: refused before training, not after it */
    {TRAIN, "--to @/nosearch", 2, "--to: directory '", "@/nosearch/readout.bias.npy",
     unsearchable_dir, 0, true},
    {TRAIN, "--plot @/nosearch", 2, "is not searchable", "@/nosearch/train_loss.dat",
     unsearchable_dir, 0, true},
    /* a loop of symbolic links is named as one, not as "does not exist" */
    {TRAIN, "--to @/loop", 2, "--to: '", NULL, symlink_loop},
    {MULTI, "--to @/loop", 2, "is a loop of symbolic links", NULL, symlink_loop},
    {TRAIN, "--plot @/missing", 2, "--plot: directory '", "@/missing/train_loss.dat"},
    {TRAIN, "--from @/in --steps 5", 1, "in holds a model without its training state (no "
     "optimizer.step.npy): --from it without --steps evaluates it", NULL, train_model_good},
    {TRAIN, "--from @/in --steps 9 --seed 3", 2, "--from with --steps goes on with the seed, "
     "batch, pairs and learning rate saved in DIR: drop --seed, --batch, --pairs and --lr", NULL,
     train_model_resumable},
    {TRAIN, "--from @/in --steps 5", 2, "--steps 5: the model in ", NULL, train_model_resumable},
    {TRAIN, "--from @/in --steps 9", 1, "in/optimizer.exp_avg_sq.readout.bias.npy: cannot open: "
     "No such file", NULL, train_state_missing_moment},
    {TRAIN, "--from @/in --steps 9", 1, "in/optimizer.exp_avg.embed_keys.weight.npy: expected "
     "shape (8, 8), got (9, 8)", NULL, train_state_other_vocabulary},
    {TRAIN, "--from @/in --steps 9", 1, "in/training.npy: expected a batch of 1 to 4096 examples "
     "and 2 to 16 pairs (at most the model's 8 countries), got 0 and 8", NULL,
     train_state_batch_zero},
    {TRAIN, "--from @/in --steps 9", 1, "in/optimizer.step.npy: the step count is negative",
     NULL, train_state_step_negative},
    {TRAIN, "--from @/in --steps 9", 1, "in/optimizer.lr.npy: not a .npy file", NULL,
     train_state_lr_not_npy},
    /* moments that make the update infinite: the loaded model is what --to
     * keeps */
    {TRAIN, "--from @/in --steps 6 --to @/in", 1, "the update of step 6 made a parameter NaN or "
     "infinite; --to keeps the model after step 5", NULL, train_state_update_overflows},
    {TRAIN, "--from @/in --steps 6", 1, "in/optimizer.exp_avg_sq.readout.weight.npy: element 9 "
     "(index [1, 1]) is -0.5; this file holds squares, which are never negative", NULL,
     train_state_negative_square},
    {TRAIN, "--from @/in --heads 2", 2, "--from takes the model's sizes", NULL,
     train_model_good},
    {TRAIN, "--from @/in --to @/in", 2, "--from and --to together", NULL, train_model_good},
    {TRAIN, "--from @/in --bench", 2, "unknown option '--from'", NULL, train_model_good},
    {TRAIN, "--from @/missing", 2, "missing' does not exist",
     NULL},
    {TRAIN, "--from @/in", 1, "in/num_heads.npy: cannot open: No such file", NULL,
     train_model_no_heads},
    {TRAIN, "--from @/in", 1, "does not hold a model this program can run (8 countries, "
     "num_hiddens 8, 3 heads, for 8 pairs)", NULL, train_model_three_heads},
    {TRAIN, "--from @/in", 1, "does not hold a model this program can run (3 countries", NULL,
     train_model_few_countries},
    {TRAIN, "--from @/in", 1, "in/readout.weight.npy: expected shape (8, 8), got (9, 8)", NULL,
     train_model_readout_rows},
    {TRAIN, "--from @/in", 1, "in/attention.in_proj_bias.npy: expected shape (24,), got (3, 8)",
     NULL, train_model_in_proj_2d_bias},
    {TRAIN, "--from @/in", 1, "attention.out_proj.weight.npy: element 9 (index [1, 1]) is NaN",
     NULL, train_model_nan},
    /* sizes within every option's range that cannot fit: one line first */
    {TRAIN, "--examples 100000 --hiddens 512 --pairs 16 --countries 40 --heads 16", 1,
     "train: this run needs about 21.7 GB of memory (100000 held-out examples or batches of 32, "
     "of 16 pairs, num_hiddens 512)", NULL, NULL, 512, false},
    {TRAIN, "--batch 4096 --hiddens 512 --pairs 16 --countries 40 --heads 16 --to @/out", 1,
     "this run needs about 1.8 GB of memory", "@/out/readout.bias.npy", out_dir, 512, false},
    {BENCH, "--config 1,2,3", 2, "--config expects B,n,D,H, four whole numbers, got '1,2,3'",
     NULL},
    {BENCH, "--config 1,64,10,3", 2, "--config: D = 10 does not divide by H = 3", NULL},
    {BENCH, "--config 0,64,8,2", 2, "--config expects comma-separated whole numbers from 1 "
     "to 65536", NULL},
    {BENCH, "--config 65536,65536,65536,1", 2, "B * n * D = 281474976710656 floats is too "
     "much for one input", NULL},
    {BENCH, "--threads 1", 2, "--threads expects a whole number from 2 to 64, got '1'", NULL},
    {BENCH, "--repeats 0", 2, "--repeats expects a whole number from 1 to 51", NULL},
    {BENCH, "--clear-max 0", 2, "--clear-max expects a whole number from 1 to 65536", NULL},
    {BENCH, "--quick --frob", 2, "unknown option '--frob'", NULL},
    /* the clear layer's (1, 4096, 4096) weights are 64 MB, three times that
     * with the backward: the memory check refuses the run before any line
     * (a sanitizer build, whose cap the check cannot see, skips the row: an
     * allocation that fails there is die's abort, a bug's) */
    {BENCH, "--config 1,4096,1,1 --clear-max 4096 --repeats 1", 1,
     "this run needs about 217.6 MB of memory", NULL, NULL, 48, false},
    {BENCH, "--config 1,4096,1024,8", 1, "this run needs about 318.0 MB of memory (the fwd+bwd "
     "line of (1, 4096, 1024, 8)), more than the memory limit", NULL, NULL, 256, false},
    /* random inputs of scale 1e20: every line's results overflow, clear and
     * fast alike, and the table and the status say so */
    {BENCH, "--config 1,8,8,2 --scale 1e20 --repeats 1", 1, "bench: 14 lines overflowed "
     "float32 (see the table): use a smaller --scale", NULL},
    {BENCH, "--scale 0", 2, "--scale expects a number from 1e-30 to 1e+38, got '0'", NULL},

    /* chapter 06 */
    {PERMUTATION, "--heads 3", 2, "--hiddens 8 does not divide by --heads 3", NULL},
    {PERMUTATION, "--hiddens 0", 2, "--hiddens expects a whole number from 1 to 64, got '0'",
     NULL},
    {PERMUTATION, "--tokens 1", 2, "--tokens expects a whole number from 2 to 64, got '1'",
     NULL},
    {PERMUTATION, "--tokens 99999999999", 2, "--tokens expects a whole number from 2 to 64",
     NULL},
    /* the largest sizes are those that still run in a few seconds */
    {PERMUTATION, "--tokens 65", 2, "--tokens expects a whole number from 2 to 64, got '65'",
     NULL},
    {PERMUTATION, "--hiddens 128", 2, "--hiddens expects a whole number from 1 to 64", NULL},
    {PERMUTATION, "--valid-lens 7", 2, "--valid-lens expects comma-separated whole numbers "
     "from 1 to 6, got '7'", NULL},
    {PERMUTATION, "--valid-lens 0", 2, "--valid-lens expects comma-separated whole numbers "
     "from 1 to 6, got '0'", NULL},
    {PERMUTATION, "--tokens 3 --valid-lens 3,4", 2, "--valid-lens expects comma-separated "
     "whole numbers from 1 to 3, got '3,4'", NULL},
    /* one length per sequence: the count of lengths is the batch, at most 4 */
    {PERMUTATION, "--valid-lens 1,2,3,4,5", 2, "--valid-lens takes at most 4 numbers, got "
     "'1,2,3,4,5'", NULL},
    {PERMUTATION, "--tokens 2 --valid-lens 2,2,2,2,2,2,2,2", 2, "--valid-lens takes at most 4 "
     "numbers, got '2,2,2,2,2,2,2,2'", NULL},
    {PERMUTATION, "--valid-len 4", 2, "unknown option '--valid-len'", NULL},
    {PERMUTATION, "--samples 0", 2, "--samples expects a whole number from 1 to 1000", NULL},
    {PERMUTATION, "--samples 100000", 2, "--samples expects a whole number from 1 to 1000",
     NULL},
    {PERMUTATION, "--seed x", 2, "--seed expects a whole number", NULL},
    {PERMUTATION, "--equivariant", 2, "unknown option '--equivariant'", NULL},
    {PERMUTATION, "--plot @/missing", 2, "--plot: directory '",
     "@/missing/permutation_weights.dat"},
    {PERMUTATION, "--plot @/out", 2, "holds a directory, 'permutation_weights.gp'",
     "@/out/permutation_weights.dat", plot_permutation_gp_taken},
    {ORDER, "--perm 0,1,1,2,3", 2, "--perm must list each of 0..4 once, got '0,1,1,2,3'", NULL},
    {ORDER, "--perm 0,1,2", 2, "--perm must list each of 0..4 once", NULL},
    {ORDER, "--perm 0,1,2,3,5", 2, "--perm expects comma-separated whole numbers from 0 to 4",
     NULL},
    {ORDER, "--tokens 3 --perm 2,1,0,3", 2, "--perm expects comma-separated whole numbers "
     "from 0 to 2", NULL},
    {ORDER, "--perm", 2, "--perm needs a value", NULL},
    {ORDER, "--hiddens 65", 2, "--hiddens expects a whole number from 1 to 64", NULL},
};

/* ---- running a row ----------------------------------------------------------- */

/* text with every '@' replaced by dir; the caller frees. */
static char *expand(const char *text, const char *dir)
{
    size_t len = strlen(text) + 1;
    for (const char *p = text; *p; p++)
        len += *p == '@' ? strlen(dir) : 0;
    char *out = malloc(len), *o = out;
    cr_assert(out != NULL);
    for (const char *p = text; *p; p++) {
        if (*p == '@') {
            strcpy(o, dir);
            o += strlen(dir);
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* run_program with the row's limits, set in the child between fork and exec
 * so that the test itself keeps running as it was. */
static RunResult run_limited(const BadInput *row, const char *args)
{
    RunResult r = {-1, NULL, NULL};
    char out_path[] = "/tmp/attn_bad_out_XXXXXX";
    char err_path[] = "/tmp/attn_bad_err_XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    cr_assert(out_fd >= 0 && err_fd >= 0);
    size_t len = strlen(BIN_DIR) + strlen(row->program) + strlen(args) + 32;
    char *cmd = malloc(len);
    cr_assert(cmd != NULL);
    snprintf(cmd, len, "exec %s/%s %s </dev/null", BIN_DIR, row->program, args);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
        if (row->memory_mb > 0 && !UNDER_ASAN) {
            struct rlimit limit = {(rlim_t)row->memory_mb << 20, (rlim_t)row->memory_mb << 20};
            if (setrlimit(RLIMIT_AS, &limit) != 0)
                _exit(125);
        }
        /* nobody: root would write into the read-only directory anyway */
        if (row->unprivileged && geteuid() == 0 &&
            become_user(65534, 65534) != 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    free(cmd);
    close(out_fd);
    close(err_fd);
    if (WIFEXITED(status))
        r.status = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        r.status = 128 + WTERMSIG(status);
    r.out = read_text_file(out_path, NULL);
    r.err = read_text_file(err_path, NULL);
    unlink(out_path);
    unlink(err_path);
    return r;
}

static int temp_files_found;

static int note_temp_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    if (strstr(path + ftw->base, ".tmp") != NULL) {
        cr_log_error("temporary file left behind: %s", path);
        temp_files_found++;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

/* The sanitizer's logs (dir/sanitizer.PID) may hold the warning for the
 * refused allocation and nothing else. */
static void expect_only_allocation_warnings(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d != NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "sanitizer.", 10) != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *log = read_text_file(path, NULL);
        cr_assert(log != NULL);
        for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
            cr_expect(strstr(line, "WARNING: AddressSanitizer failed to allocate") != NULL,
                      "sanitizer report: %s", line);
        free(log);
    }
    closedir(d);
}

/* Criterion runs each case in a fresh process, where the addresses of the
 * strings above may differ: the parameter is the row's index, not a pointer. */
enum { NUM_ROWS = sizeof rows / sizeof rows[0] };
static int row_indices[NUM_ROWS];

ParameterizedTestParameters(bad_input, rows)
{
    for (int i = 0; i < NUM_ROWS; i++)
        row_indices[i] = i;
    return cr_make_param_array(int, row_indices, NUM_ROWS);
}

ParameterizedTest(int *index, bad_input, rows)
{
    const BadInput *row = &rows[*index];
    /* The memory check compares a run's needs with the address-space limit,
     * which a sanitizer build cannot be given (see UNDER_ASAN): its rows
     * belong to the normal build. */
    if (UNDER_ASAN && row->memory_mb > 0 && strstr(row->message, "this run needs") != NULL)
        cr_skip_test("the memory check needs an address-space limit");
    char scratch[] = "/tmp/attn_bad_input_XXXXXX";
    cr_assert(mkdtemp(scratch) != NULL);
    chmod(scratch, 0755);   /* an unprivileged run must reach its files */
    if (row->setup)
        row->setup(scratch);
    char *args = expand(row->args, scratch);
    char *must_not_exist = row->must_not_exist ? expand(row->must_not_exist, scratch) : NULL;

    if (row->memory_mb > 0) {
        /* the sanitizer's allocator returns NULL above the cap, as malloc
         * does when the address-space limit is reached; the warning it
         * prints then goes to a log in the scratch directory, read below */
        char options[256];
        snprintf(options, sizeof options,
                 "detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=%d:"
                 "log_path=%s/sanitizer", row->memory_mb, scratch);
        setenv("ASAN_OPTIONS", options, 1);
    } else {
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    }
    RunResult r = row->memory_mb > 0 || row->unprivileged ? run_limited(row, args)
                                                          : run_program(row->program, args);
    const char *err = r.err ? r.err : "";
    cr_expect_eq(r.status, row->status, "row %d, %s %s: exit status %d, expected %d; stderr: %s",
                 *index, row->program, args, r.status, row->status, err);
    cr_expect(strstr(err, row->message) != NULL, "row %d, %s %s: stderr does not say '%s': %s",
              *index, row->program, args, row->message, err);
    cr_expect(is_one_line(err), "row %d, %s %s: stderr is not one line: %s", *index,
              row->program, args, err);
    /* library errors included, every line starts with the program's name */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", strrchr(row->program, '/') + 1);
    cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "row %d, %s %s: stderr does not "
              "start with '%s': %s", *index, row->program, args, prefix, err);
    if (must_not_exist) {
        struct stat st;
        cr_expect_neq(stat(must_not_exist, &st), 0, "row %d, %s %s left %s behind", *index,
                      row->program, args, must_not_exist);
    }
    if (UNDER_ASAN && row->memory_mb > 0)
        expect_only_allocation_warnings(scratch);
    temp_files_found = 0;
    nftw(scratch, note_temp_file, 16, FTW_PHYS);
    cr_expect_eq(temp_files_found, 0, "row %d, %s %s left temporary files", *index,
                 row->program, args);

    nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(args);
    free(must_not_exist);
    run_result_free(&r);
}

/* ---- files from an earlier run ----------------------------------------------- */

/* --to into a directory that already holds a run with --bias: the new run
 * has no biases, and reading the directory back must not find the old ones. */
/* A need just above the limit: the line shows the two amounts apart
 * ("needs about 629.1456 MB, more than 629.1456 MB" would not), one line.
 * In a child, which alone takes the address-space limit. */
Test(bad_input, memory_line_shows_need_and_limit_apart)
{
    if (UNDER_ASAN)
        return;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        const rlim_t limit_bytes = (rlim_t)600 << 20;   /* 629.1456 MB */
        struct rlimit limit = {limit_bytes, limit_bytes};
        if (setrlimit(RLIMIT_AS, &limit) != 0)
            _exit(125);
        char err[512], need[32], have[32], need_unit[8], have_unit[8];
        if (memory_check((double)limit_bytes + 1000.0 - MEMORY_BASE_BYTES, NULL, "hint", err,
                         sizeof err) != -1)
            _exit(3);
        if (sscanf(err, "this run needs about %31[0-9.] %7s of memory, more than the memory "
                   "limit (ulimit -v), %31[0-9.] %7[^:]: hint", need, need_unit, have,
                   have_unit) != 4)
            _exit(4);
        const bool apart = strcmp(need, have) != 0 || strcmp(need_unit, have_unit) != 0;
        _exit(!apart ? 5 : strchr(err, '\n') != NULL ? 6 : 0);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

/* The memory check's estimate must err on the large side: given just the
 * address space it asks for, a run passes the check and then finishes,
 * where an estimate short of the real peak ends in an allocation failure
 * after the check said yes. The sizes are those where the (P, D) blocks
 * are not the whole story: small D with many heads, and D = 1 with 40
 * logits per example. */
Test(bad_input, memory_estimate_covers_the_run)
{
    if (UNDER_ASAN)
        return;
    static const struct {
        int countries, pairs, hiddens, heads, batch, examples;
    } runs[] = {
        {40, 16, 16, 16, 1, 20000},
        {40, 2, 1, 1, 1, 50000},
        {40, 16, 16, 16, 2048, 1},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const double need = lookup_bytes_needed(runs[i].countries, runs[i].pairs,
                                                runs[i].hiddens, runs[i].heads,
                                                runs[i].batch, runs[i].examples) +
                            MEMORY_BASE_BYTES;
        char args[256];
        snprintf(args, sizeof args, "--steps 1 --countries %d --pairs %d --hiddens %d "
                 "--heads %d --batch %d --examples %d", runs[i].countries, runs[i].pairs,
                 runs[i].hiddens, runs[i].heads, runs[i].batch, runs[i].examples);
        const BadInput row = {TRAIN, args, 0, "", NULL, NULL, (int)(need / (1 << 20)) + 1,
                              false};
        RunResult r = run_limited(&row, args);
        cr_expect_eq(r.status, 0, "train %s under %d MB (its estimate): status %d, %s", args,
                     row.memory_mb, r.status, r.err ? r.err : "");
        run_result_free(&r);
    }
}

Test(bad_input, to_replaces_an_earlier_run)
{
    char scratch[] = "/tmp/attn_bad_input_XXXXXX";
    cr_assert(mkdtemp(scratch) != NULL);
    char args[256];
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);

    snprintf(args, sizeof args, "--bias --to %s", scratch);
    RunResult r = run_program(MULTI, args);
    cr_assert_eq(r.status, 0, "%s", r.err ? r.err : "");
    run_result_free(&r);
    snprintf(args, sizeof args, "--valid-lens none --to %s", scratch);
    r = run_program(MULTI, args);
    cr_assert_eq(r.status, 0, "%s", r.err ? r.err : "");
    run_result_free(&r);

    /* expected_output.npy in the directory makes --from compare with it */
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/output.npy", scratch);
    snprintf(to, sizeof to, "%s/expected_output.npy", scratch);
    cr_assert_eq(rename(from, to), 0);
    snprintf(args, sizeof args, "--from %s --heads 5", scratch);
    r = run_program(MULTI, args);
    cr_expect_eq(r.status, 0, "the second run read back differs: %s", r.err ? r.err : "");
    run_result_free(&r);
    /* what the directory holds now: no biases, no mask, and the second
     * run's output, bit for bit */
    LayerFiles files;
    char err[LAYER_FILES_ERR_LEN];
    cr_assert_eq(layer_files_load(scratch, 5, &files, err, sizeof err), 0, "%s", err);
    cr_expect(!files.layer.bias && files.b_q == NULL && files.b_o == NULL,
              "old biases were read back");
    cr_expect(files.valid_lens == NULL, "an old valid_lens.npy was read back");
    Tensor *output = multihead_forward(&files.layer, files.queries, files.keys, files.values,
                                       files.valid_lens, false, NULL, NULL);
    Comparison c;
    cr_assert_eq(layer_files_compare(scratch, "output", output, 0.0f, 0.0f, &c, err, sizeof err),
                 0, "%s", err);
    cr_expect(c.present && c.same_shape && c.max_diff == 0.0f,
              "the output read back is not the second run's: largest difference %g",
              (double)c.max_diff);
    tensor_free(output);
    layer_files_free(&files);
    nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* MULTI with args in the background, its output to /dev/null, its files
 * no larger than fsize bytes when fsize > 0 (a full disk, as the program
 * sees it); the caller waits for the pid. */
static pid_t spawn_multihead(const char *args, long fsize)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec %s/%s %s </dev/null >/dev/null 2>/dev/null", BIN_DIR, MULTI,
             args);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (fsize > 0) {
            struct rlimit limit = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN);   /* a write past the limit fails with EFBIG */
            if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
                _exit(125);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_status(pid_t pid)
{
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The bytes of DIR/NAME.npy, or NULL. */
static char *file_bytes(const char *dir, const char *name, size_t *len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    return read_text_file(path, len);
}

/* The .npy files and temporary files in dir. */
static void count_files(const char *dir, int *npy, int *temp)
{
    DIR *d = opendir(dir);
    cr_assert(d != NULL);
    *npy = *temp = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        *temp += strstr(e->d_name, ".tmp") != NULL;
        *npy += len > 4 && strcmp(e->d_name + len - 4, ".npy") == 0;
    }
    closedir(d);
}

/* A second --to run that cannot write its files (the disk is full, as far
 * as it can tell) exits 1 and leaves the first run's files as they were. */
Test(bad_input, a_failed_to_keeps_the_previous_run)
{
    char scratch[] = "/tmp/attn_bad_input_XXXXXX";
    cr_assert(mkdtemp(scratch) != NULL);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    static const char *const names[] = {"queries", "keys", "W_q", "W_o", "output",
                                        "attention_weights"};
    enum { NAMES = sizeof names / sizeof names[0] };
    char args[600];
    snprintf(args, sizeof args, "--hiddens 10 --heads 5 --to %s", scratch);
    cr_assert_eq(wait_status(spawn_multihead(args, 0)), 0);
    char *before[NAMES];
    size_t before_len[NAMES];
    int npy_before, temp;
    count_files(scratch, &npy_before, &temp);
    for (int i = 0; i < NAMES; i++)
        cr_assert((before[i] = file_bytes(scratch, names[i], &before_len[i])) != NULL);

    /* larger inputs, another seed, and no file over 2000 bytes */
    snprintf(args, sizeof args, "--seed 9 --to %s", scratch);
    cr_expect_eq(wait_status(spawn_multihead(args, 2000)), 1);
    int npy_after;
    count_files(scratch, &npy_after, &temp);
    cr_expect_eq(npy_after, npy_before, "the failed run changed the set of files");
    cr_expect_eq(temp, 0, "the failed run left temporary files");
    for (int i = 0; i < NAMES; i++) {
        size_t len;
        char *after = file_bytes(scratch, names[i], &len);
        cr_expect(after && len == before_len[i] && memcmp(after, before[i], len) == 0,
                  "%s.npy is not the first run's any more", names[i]);
        free(after);
        free(before[i]);
    }
    nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* SIGTERM while a run writes its files: no temporary file stays, and the
 * directory holds no file of that run or all of them. The signal is sent
 * as soon as a temporary file shows, or when the run is done: either way
 * the test checks the same thing, so the timing cannot make it fail. */
Test(bad_input, sigterm_while_writing_leaves_no_temporary_file)
{
    char scratch[] = "/tmp/attn_bad_input_XXXXXX";
    cr_assert(mkdtemp(scratch) != NULL);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    char args[600];
    /* (4, 16, 128, 128) weights: a 4 MB file that takes a moment to write */
    snprintf(args, sizeof args, "--batch 4 --queries 128 --keys 128 --hiddens 32 --heads 16 "
             "--valid-lens none --to %s", scratch);
    pid_t pid = spawn_multihead(args, 0);
    int npy = 0, temp = 0;
    pid_t ended = 0;
    while (temp == 0 && (ended = waitpid(pid, NULL, WNOHANG)) == 0) {
        count_files(scratch, &npy, &temp);
        nanosleep(&(struct timespec){.tv_nsec = 200 * 1000}, NULL);
    }
    if (ended == 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    count_files(scratch, &npy, &temp);
    cr_expect_eq(temp, 0, "temporary files left behind");
    /* queries, keys, values, W_q ... W_o, output, attention_weights */
    cr_expect(npy == 0 || npy == 9, "%d files: part of a run's set", npy);
    nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the README's list of errors --------------------------------------------- */

/* Every line quoted in common/io/README.md's "When something goes wrong"
 * (the top README keeps one example and links there) is what a
 * program prints: a "$ ./PROGRAM ARGS" line followed by its stderr is run
 * and compared exactly; a line that needs files (mydir) or memory to fail
 * must hold the message of a row above, which runs it. */
static bool backed_by_a_row(const char *line, const char *program)
{
    for (int i = 0; i < NUM_ROWS; i++)
        if ((program == NULL || strcmp(rows[i].program, program) == 0) &&
            strstr(line, rows[i].message) != NULL)
            return true;
    return false;
}

Test(bad_input, readme_quotes_what_programs_print)
{
    char *text = read_text_file("common/io/README.md", NULL);
    cr_assert(text != NULL, "cannot read common/io/README.md");
    char *section = strstr(text, "## When something goes wrong");
    cr_assert(section != NULL, "common/io/README.md has no section 'When something goes wrong'");
    char *end = strstr(section + 1, "\n## ");
    if (end)
        *end = '\0';

    int commands = 0, lines_checked = 0;
    bool in_block = false;
    char program[128] = "", args[512] = "", expected[4096] = "";
    bool pending = false;
    for (char *line = strtok(section, "\n");; line = strtok(NULL, "\n")) {
        bool closes = line == NULL || (in_block && strncmp(line, "```", 3) == 0);
        bool next_command = line != NULL && in_block && strncmp(line, "$ ./", 4) == 0;
        if (pending && (closes || next_command)) {
            /* run the command just read and compare stderr with its lines */
            if (strstr(args, "mydir") == NULL) {
                RunResult r = run_program(program, args);
                cr_expect_neq(r.status, 0, "README: %s %s exits 0", program, args);
                cr_expect_str_eq(r.err ? r.err : "", expected,
                                 "README quotes for %s %s:\n%sbut it prints:\n%s", program,
                                 args, expected, r.err ? r.err : "");
                run_result_free(&r);
            }
            pending = false;
        }
        if (line == NULL)
            break;
        if (strncmp(line, "```", 3) == 0) {
            in_block = !closes;
            program[0] = '\0';
            continue;
        }
        if (!in_block)
            continue;
        if (next_command) {
            /* "$ ./05_multihead/multihead --heads 3" */
            const char *cmd = line + 4, *space = strchr(cmd, ' ');
            size_t len = space ? (size_t)(space - cmd) : strlen(cmd);
            snprintf(program, sizeof program, "%.*s", (int)len, cmd);
            snprintf(args, sizeof args, "%s", space ? space + 1 : "");
            expected[0] = '\0';
            pending = true;
            commands++;
            continue;
        }
        lines_checked++;
        if (pending && strstr(args, "mydir") == NULL) {
            strncat(expected, line, sizeof expected - strlen(expected) - 2);
            strcat(expected, "\n");
        } else {
            cr_expect(backed_by_a_row(line, program[0] ? program : NULL),
                      "README line not backed by a bad-input row: %s", line);
        }
    }
    cr_expect_geq(commands, 6, "only %d commands quoted", commands);
    cr_expect_geq(lines_checked, 10, "only %d lines quoted", lines_checked);
    free(text);
}
