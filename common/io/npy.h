/*
 * npy.h - reading and writing NumPy's .npy files (introduced in chapter 05).
 *
 * A .npy file is a short text header followed by the raw numbers:
 *
 *   \x93NUMPY  1 0  HLEN  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *   magic      version    header: a Python dict, padded with spaces, ending in '\n'
 *   then 2 * 3 little-endian float32 values, row-major.
 *
 * HLEN is the header's length in 2 little-endian bytes. This is the file a
 * learner gets from np.save(path, tensor.numpy()): np.save writes version
 * 2.0 or 3.0 only for a header past 64 kB or with non-ASCII field names,
 * which no array of at most 4 dimensions has.
 *
 * What is read: version 1.0; dtypes '<f4' and '<f8' (both become float32,
 * like torch's .float()) and '<i4' and '<i8' (integers, for valid_lens
 * and token ids, as NumPy and PyTorch write them); C order; 1 to 4
 * dimensions, each at least 1. Refused, each with its own message:
 * anything else, including versions 2.0 and 3.0, big-endian data ('>f4'),
 * fortran_order True, a 0-d array (shape ()), more than 4 dimensions, and
 * empty arrays (a 0 in the shape: a Tensor holds at least one number).
 * Floating-point data must be finite: a NaN or an infinity, or an '<f8'
 * value that would round past float32's largest, is an error naming its
 * index; so is an integer that float32 cannot hold exactly (past 2^24,
 * not every whole number has a float). Only regular files are read: a
 * named pipe or a device is refused before anything is read from it.
 * What is written: version 1.0, '<f4' or '<i4', byte for byte as
 * numpy.save writes it. A program writes its files as a set
 * (npy_save_into, see fileset.h), so that a kill leaves the old set or the
 * new one.
 *
 * Errors are returned, never fatal, so a program can report them its own
 * way: every function takes a buffer err of err_len bytes and fills it
 * with one line naming the file and the problem (error_format), for example
 *     queries.npy: big-endian data ('>f4') is not supported; save it with .astype('<f4')
 * err must be given: NULL is a bug (error.h).
 */
#ifndef NPY_H
#define NPY_H

#include <stdbool.h>
#include <stddef.h>

#include "io/fileset.h"
#include "tensor.h"

/* Room for any message these functions write. A path too long to fit
 * loses its middle ("/a/lo...ng/x.npy: reason"), never the reason. */
enum { NPY_ERR_LEN = 512 };

/* Integers read from an '<i4' or '<i8' file, with the shape of the file. */
typedef struct {
    int ndim;
    int shape[TENSOR_MAX_DIMS];
    size_t size;   /* product of the shape */
    int *data;     /* size values, row-major */
} NpyInts;

/* A float32 tensor from a floating-point file ('<f4' or '<f8') or an
 * integer file ('<i4' or '<i8', converted like torch's .float()).
 * NULL on error. The caller frees the tensor with tensor_free. */
Tensor *npy_load(const char *path, char *err, size_t err_len);

/* Integers from an '<i4' or '<i8' file; every value must fit in an int.
 * A floating-point file is refused. Returns 0, or -1 on error.
 * The caller frees out with npy_ints_free. */
int npy_load_ints(const char *path, NpyInts *out, char *err, size_t err_len);
void npy_ints_free(NpyInts *ints);

/* x as NAME.npy in the set being written into dir (dir names it in a
 * message). Returns 0, or -1 with err filled; a NaN or an infinity in x is
 * refused, naming its index: no program writes one. */
int npy_save_into(FileSet *set, const char *dir, const char *name, const Tensor *x, char *err,
                  size_t err_len);
int npy_save_ints_into(FileSet *set, const char *dir, const char *name, const int *values,
                       int ndim, const int *shape, char *err, size_t err_len);

/* "DIR/NAME.npy" in a new string ("NAME.npy" for dir ""); free it. */
char *npy_path(const char *dir, const char *name);

#endif
