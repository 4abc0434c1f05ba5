/*
 * model.c - a model saved as a directory of .npy files (introduced in
 * chapter 05's optional section "Attention that learns"). See model.h.
 *
 * Saving goes in two passes:
 *   pass 1: every file under a temporary name beside its final one, after
 *           checking that the final name is free or a plain file;
 *   pass 2: when all are complete, each renamed over its final name.
 * On a failure in pass 1 the temporary files are removed and the old model
 * is untouched. A rename within one directory does not fail once pass 1
 * has checked the names, short of the disk failing under it.
 * SIGINT, SIGTERM and SIGHUP are held back while the two passes run: a
 * signal in pass 1 would leave temporary files behind, one in pass 2 a mix
 * of new and old files. A signal that arrives meanwhile is delivered when
 * the save is over, complete or undone.
 * Loading goes in two: read and check every file, then copy them all in.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/model.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/npy.h"

/* One error line into err, or onto stderr when err is NULL. */
static int model_fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int model_fail(char *err, size_t err_len, const char *fmt, ...)
{
    char message[MODEL_ERR_LEN];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    if (err != NULL) {
        if (err_len > 0)
            snprintf(err, err_len, "%s", message);
    } else {
        fflush(stdout);
        fprintf(stderr, "%s\n", message);
    }
    return -1;
}

/* "DIR/NAME.npy" in a new string. */
static char *file_path(const char *dir, const char *name)
{
    size_t len = strlen(dir) + 1 + strlen(name) + sizeof ".npy";
    char *path = checked_malloc("model_io", len, 1);
    snprintf(path, len, "%s/%s.npy", dir, name);
    return path;
}

/* The shape of a file: its parts stacked along dimension 0, or (num_ints,).
 * Returns false when the parts do not stack (a programming error). */
static bool stacked_shape(const ModelFile *file, int *ndim, int *shape)
{
    if (file->parts[0] == NULL) {
        *ndim = 1;
        shape[0] = file->num_ints;
        return file->ints != NULL && file->num_ints > 0;
    }
    const Tensor *first = file->parts[0];
    *ndim = first->ndim;
    memcpy(shape, first->shape, sizeof first->shape);
    shape[0] = 0;
    for (int i = 0; i < MODEL_MAX_PARTS && file->parts[i]; i++) {
        const Tensor *part = file->parts[i];
        if (part->ndim != first->ndim)
            return false;
        for (int dim = 1; dim < first->ndim; dim++)
            if (part->shape[dim] != first->shape[dim])
                return false;
        shape[0] += part->shape[0];
    }
    return true;
}

static void check_files(const char *func, const ModelFile *files, int count)
{
    for (int i = 0; i < count; i++) {
        int ndim, shape[TENSOR_MAX_DIMS];
        if (files[i].name == NULL || !stacked_shape(&files[i], &ndim, shape))
            die(func, "file %d (%s): its parts must stack along dimension 0, or it must "
                "hold at least one whole number", i, files[i].name ? files[i].name : "NULL");
    }
}

/* ---- saving -------------------------------------------------------------- */

/* File i's tensor: the parts stacked (new). */
static Tensor *stack_parts(const ModelFile *file)
{
    int ndim, shape[TENSOR_MAX_DIMS];
    stacked_shape(file, &ndim, shape);
    Tensor *stacked = tensor_zeros(ndim, shape);
    float *at = stacked->data;
    for (int i = 0; i < MODEL_MAX_PARTS && file->parts[i]; i++) {
        memcpy(at, file->parts[i]->data, file->parts[i]->size * sizeof(float));
        at += file->parts[i]->size;
    }
    return stacked;
}

/* Write one file to a fresh temporary name beside its final path; the
 * name goes into *temp_out (new). */
static int save_one_temp(const char *final_path, const ModelFile *file, char **temp_out,
                         char *err, size_t err_len)
{
    size_t len = strlen(final_path) + sizeof ".tmpXXXXXX";
    char *temp = checked_malloc("model_save", len, 1);
    snprintf(temp, len, "%s.tmpXXXXXX", final_path);
    int fd = mkstemp(temp);   /* reserves a name no one else is using */
    if (fd < 0) {
        int saved = errno;
        free(temp);
        return model_fail(err, err_len, "%s: cannot create: %s", final_path, strerror(saved));
    }
    close(fd);
    *temp_out = temp;
    int status;
    if (file->parts[0] == NULL) {
        status = npy_save_ints(temp, file->ints, SHAPE(file->num_ints), err, err_len);
    } else {
        Tensor *stacked = stack_parts(file);
        status = npy_save(temp, stacked, err, err_len);
        tensor_free(stacked);
    }
    return status;
}

int model_save(const char *dir, const ModelFile *files, int count, char *err, size_t err_len)
{
    check_files("model_save", files, count);
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    char **finals = checked_calloc("model_save", (size_t)count, sizeof *finals);
    char **temps = checked_calloc("model_save", (size_t)count, sizeof *temps);
    int status = 0;
    sigset_t held, before;
    sigemptyset(&held);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGHUP);
    sigprocmask(SIG_BLOCK, &held, &before);
    // pass 1: every file under a temporary name; a final name taken by
    // something other than a file would make its rename fail in pass 2,
    // after others had been renamed, so it stops the save here
    for (int i = 0; i < count && status == 0; i++) {
        finals[i] = file_path(dir, files[i].name);
        struct stat st;
        if (stat(finals[i], &st) == 0 && !S_ISREG(st.st_mode))
            status = model_fail(err, err_len, "%s: cannot write: %s", finals[i],
                                S_ISDIR(st.st_mode) ? "a directory has that name"
                                                    : "not a regular file");
        else
            status = save_one_temp(finals[i], &files[i], &temps[i], err, err_len);
    }
    // pass 2: all of them complete: rename each into place
    for (int i = 0; i < count && status == 0; i++) {
        if (rename(temps[i], finals[i]) != 0) {
            status = model_fail(err, err_len, "%s: cannot rename into place: %s", finals[i],
                                strerror(errno));
            break;
        }
        free(temps[i]);
        temps[i] = NULL;
    }
    // on failure: remove what pass 1 left under temporary names
    for (int i = 0; i < count; i++) {
        if (temps[i])
            unlink(temps[i]);
        free(temps[i]);
        free(finals[i]);
    }
    free(temps);
    free(finals);
    sigprocmask(SIG_SETMASK, &before, NULL);   /* a signal held back arrives now */
    return status;
}

/* ---- loading ------------------------------------------------------------- */

/* What one file held, read and checked, not yet copied in. */
typedef struct {
    Tensor *tensor;
    NpyInts ints;
} Loaded;

/* The flat index of x's first negative number, or SIZE_MAX. */
static size_t first_negative(const Tensor *x)
{
    for (size_t i = 0; i < x->size; i++)
        if (x->data[i] < 0.0f)
            return i;
    return SIZE_MAX;
}

static int load_one(const char *dir, const ModelFile *file, Loaded *loaded, char *err,
                    size_t err_len)
{
    char *path = file_path(dir, file->name);
    int ndim, shape[TENSOR_MAX_DIMS];
    stacked_shape(file, &ndim, shape);
    int status = 0;
    int got_ndim;
    const int *got_shape;
    if (file->parts[0] == NULL) {
        status = npy_load_ints(path, &loaded->ints, err, err_len);
        got_ndim = loaded->ints.ndim;
        got_shape = loaded->ints.shape;
    } else {
        loaded->tensor = npy_load(path, err, err_len);
        status = loaded->tensor ? 0 : -1;
        got_ndim = loaded->tensor ? loaded->tensor->ndim : 0;
        got_shape = loaded->tensor ? loaded->tensor->shape : NULL;
    }
    if (status == 0) {
        bool same = got_ndim == ndim;
        for (int d = 0; same && d < ndim; d++)
            same = got_shape[d] == shape[d];
        if (!same) {
            char want[80], got[80];
            status = model_fail(err, err_len, "%s: expected shape %s, got %s", path,
                                shape_str(want, sizeof want, ndim, shape),
                                shape_str(got, sizeof got, got_ndim, got_shape));
        }
    }
    if (status == 0 && file->nonnegative) {
        /* a second moment is a mean of squares: a negative one would make
         * the next update's square root NaN */
        const size_t bad = first_negative(loaded->tensor);
        char where[80];
        if (bad != SIZE_MAX)
            status = model_fail(err, err_len, "%s: element %zu (index %s) is %g; this file "
                                "holds squares, which are never negative", path, bad,
                                tensor_index_str(where, sizeof where, bad, got_ndim, got_shape),
                                (double)loaded->tensor->data[bad]);
    }
    free(path);
    return status;
}

/* Copy a checked file into its parts (or ints). */
static void copy_in(const ModelFile *file, const Loaded *loaded)
{
    if (file->parts[0] == NULL) {
        memcpy(file->ints, loaded->ints.data, (size_t)file->num_ints * sizeof(int));
        return;
    }
    const float *at = loaded->tensor->data;
    for (int i = 0; i < MODEL_MAX_PARTS && file->parts[i]; i++) {
        memcpy(file->parts[i]->data, at, file->parts[i]->size * sizeof(float));
        at += file->parts[i]->size;
    }
}

int model_load(const char *dir, const ModelFile *files, int count, char *err, size_t err_len)
{
    check_files("model_load", files, count);
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    Loaded *loaded = checked_calloc("model_load", (size_t)count, sizeof *loaded);
    int status = 0;
    // pass 1: read and check every file
    for (int i = 0; i < count && status == 0; i++)
        status = load_one(dir, &files[i], &loaded[i], err, err_len);
    // pass 2: all of them fit: copy them in
    for (int i = 0; i < count && status == 0; i++)
        copy_in(&files[i], &loaded[i]);
    for (int i = 0; i < count; i++) {
        tensor_free(loaded[i].tensor);
        npy_ints_free(&loaded[i].ints);
    }
    free(loaded);
    return status;
}

int model_read_ints(const char *dir, const char *name, int *out, int count, char *err,
                    size_t err_len)
{
    ModelFile file = {.name = name, .ints = out, .num_ints = count};
    return model_load(dir, &file, 1, err, err_len);
}
