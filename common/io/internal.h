/*
 * internal.h - the io functions that only the tests and the fuzz targets
 * call, kept out of the public headers: a program reads files, writes them
 * only as sets (npy_save_into, model_save).
 */
#ifndef IO_INTERNAL_H
#define IO_INTERNAL_H

#include <stddef.h>

#include "io/npy.h"
#include "tensor.h"

/* npy_load on the bytes of a file already in memory; name is what the
 * messages call it (NULL: "<memory>"). */
Tensor *npy_parse(const void *bytes, size_t len, const char *name, char *err, size_t err_len);
/* npy_load_ints the same way (NpyInts is npy.h's). */
int npy_parse_ints(const void *bytes, size_t len, const char *name, NpyInts *out,
                   char *err, size_t err_len);

/* One file written in place at path, for tests that make their own
 * inputs. Returns 0, or -1 with err filled. */
int npy_save(const char *path, const Tensor *x, char *err, size_t err_len);
int npy_save_ints(const char *path, const int *values, int ndim, const int *shape,
                  char *err, size_t err_len);

#endif
