/*
 * model.c - a model saved as a directory of .npy files (introduced in
 * chapter 05's optional section "Attention that learns"). See model.h.
 *
 * Saving writes every file into one set (fileset.h): a failure, a
 * number that is not finite, or a kill leaves the previous model whole.
 * Loading goes in two: read and check every file, then copy them all in.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/npy.h"

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

static void check_files(const ModelFile *files, int count)
{
    for (int i = 0; i < count; i++) {
        int ndim, shape[TENSOR_MAX_DIMS];
        if (files[i].name == NULL || !stacked_shape(&files[i], &ndim, shape))
            die("file %d (%s): its parts must stack along dimension 0, or it must "
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

/* One file into the set: its parts stacked, or its whole numbers. */
static int save_one(FileSet *set, const char *dir, const ModelFile *file, char *err,
                    size_t err_len)
{
    if (file->parts[0] == NULL)
        return npy_save_ints_into(set, dir, file->name, file->ints, SHAPE(file->num_ints), err,
                                  err_len);
    Tensor *stacked = stack_parts(file);
    const int status = npy_save_into(set, dir, file->name, stacked, err, err_len);
    tensor_free(stacked);
    return status;
}

int model_save(const char *dir, const ModelFile *files, int count, char *err, size_t err_len)
{
    check_files(files, count);
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    FileSet *set = fileset_begin(dir, err, err_len);
    if (set == NULL)
        return -1;
    int status = 0;
    for (int i = 0; i < count && status == 0; i++)
        status = save_one(set, dir, &files[i], err, err_len);
    return fileset_end(set, status, err, err_len);
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
    char *path = npy_path(dir, file->name);
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
            status = error_format(err, err_len, NULL, "%s: expected shape %s, got %s", path,
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
            status = error_format(err, err_len, NULL, "%s: element %zu (index %s) is %g; this file "
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
    check_files(files, count);
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    Loaded *loaded = checked_calloc((size_t)count, sizeof *loaded);
    const int lock = fileset_read_lock(dir);   /* one set, not half of the next */
    int status = 0;
    // pass 1: read and check every file
    for (int i = 0; i < count && status == 0; i++)
        status = load_one(dir, &files[i], &loaded[i], err, err_len);
    fileset_read_unlock(lock);
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
