/*
 * promises.h - what the fuzz targets check on every input, shared by the
 * libFuzzer targets (cli_fuzz.c, model_fuzz.c) and the test suite, which
 * replays tests/fuzz/regressions/ through the same code (tests/test_fuzz.c).
 *
 * Each function takes one input as libFuzzer gives it and returns NULL when
 * every promise held, or the promise that broke, one line. The outcome says
 * what the parser or loader decided, for a test to assert.
 */
#ifndef FUZZ_PROMISES_H
#define FUZZ_PROMISES_H

#include <stddef.h>
#include <stdint.h>

#include "io/cli.h"
#include "io/model.h"

/* ---- the option table (cli_promises.c) -------------------------------------
 * The input is argv[1..]: its bytes split at each NUL (a final NUL ends the
 * last argument), parsed by a table with one option of every kind. */
typedef struct {
    CliStatus status;
    char message[CLI_ERR_LEN];   /* the error line when status is CLI_ERROR */
    int list_count;              /* --valid-lens read as a list: how many, -1 refused, 0 absent */
} CliOutcome;

const char *cli_promises(const uint8_t *data, size_t size, CliOutcome *outcome);

/* ---- the model directory (model_promises.c) --------------------------------
 * The input is a saved model with its training state: chunks split at
 * MODEL_FUZZ_SEPARATOR, chunk i the i-th file of model_fuzz_file_names. An
 * empty chunk is a missing file; a chunk of the one byte 'L', 'D' or 'P' is
 * a broken symbolic link, a directory or a named pipe under that name. */
#define MODEL_FUZZ_SEPARATOR "@@next file@@"

typedef enum {
    MODEL_ACCEPTED,          /* the model and its training state loaded */
    MODEL_REFUSED,           /* lookup_load_new refused the directory */
    MODEL_TRAINING_REFUSED,  /* the model loaded, its training state was refused */
} ModelVerdict;

typedef struct {
    ModelVerdict verdict;
    char message[MODEL_ERR_LEN];   /* the refusal, as train prints it after "train: " */
    int key_vocab, num_hiddens, num_heads;   /* of an accepted model */
} ModelOutcome;

extern const char *const model_fuzz_file_names[];
extern const int model_fuzz_num_files;

const char *model_promises(const uint8_t *data, size_t size, ModelOutcome *outcome);
/* Removes the scratch directory the inputs are written into. */
void model_promises_cleanup(void);

#endif
