/*
 * npy_fuzz.c - libFuzzer target for the .npy reader (common/io/npy.c).
 *
 * libFuzzer calls LLVMFuzzerTestOneInput with millions of byte strings,
 * mutated from the valid files in tests/fuzz/npy_seeds/ and steered by the code
 * paths they reach. The reader must refuse every bad one with a message
 * and never crash, read out of bounds (AddressSanitizer), hit undefined
 * behaviour (UBSan), leak, or exit. Built and run by `make fuzz`.
 *
 * Beyond "does not crash", each input is checked for what the reader
 * promises: a refusal comes with a message naming the input; an accepted
 * file gives finite numbers, a shape whose product is the size, and the
 * same answer through both readers where both accept it; and writing an
 * accepted array out and reading it back gives the same numbers.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/npy.h"
#include "io/internal.h"

static const char NAME[] = "input.npy";

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "npy_fuzz: broken promise: %s\n", what);
        abort();   /* libFuzzer saves the input that did this */
    }
}

static void check_message(const char *err)
{
    check(strncmp(err, NAME, strlen(NAME)) == 0 && strlen(err) > strlen(NAME) + 2,
          "a refusal names the input and says why");
    check(strchr(err, '\n') == NULL, "a message is one line");
}

/* Save x and read it back: the same numbers. */
static void check_round_trip(const Tensor *x)
{
    static char path[64];
    if (path[0] == '\0')
        snprintf(path, sizeof path, "/tmp/npy_fuzz_%ld.npy", (long)getpid());
    char err[NPY_ERR_LEN];
    check(npy_save(path, x, err, sizeof err) == 0, "an accepted tensor can be saved");
    Tensor *back = npy_load(path, err, sizeof err);
    check(back != NULL, "a saved tensor loads");
    check(back->ndim == x->ndim && back->size == x->size, "the round trip keeps the shape");
    check(memcmp(back->data, x->data, x->size * sizeof(float)) == 0,
          "the round trip keeps the numbers");
    tensor_free(back);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[NPY_ERR_LEN];
    Tensor *x = npy_parse(data, size, NAME, err, sizeof err);
    if (x == NULL) {
        check_message(err);
    } else {
        bool overflow;
        check(shape_size(x->ndim, x->shape, &overflow) == x->size && !overflow,
              "the size is the product of the shape");
        for (size_t i = 0; i < x->size; i++)
            check(isfinite(x->data[i]), "accepted numbers are finite");
        /* small arrays only: the round trip writes a file */
        if (x->size <= 1024)
            check_round_trip(x);
    }

    NpyInts ints;
    if (npy_parse_ints(data, size, NAME, &ints, err, sizeof err) == 0) {
        /* as floats too, unless a value has no exact float32 (past 2^24) */
        bool exact = true;
        for (size_t i = 0; i < ints.size; i++)
            exact = exact && (int64_t)(float)ints.data[i] == ints.data[i];
        check((x != NULL) == exact, "a file of ints loads as floats when every value is exact");
        if (x != NULL) {
            check(ints.size == x->size && ints.ndim == x->ndim, "both readers agree on the shape");
            for (size_t i = 0; i < ints.size; i++)
                check((float)ints.data[i] == x->data[i], "both readers agree on the numbers");
        }
        npy_ints_free(&ints);
    } else {
        check(ints.data == NULL, "a refused read leaves no data");
        check_message(err);
    }
    tensor_free(x);
    return 0;
}
