/*
 * model_fuzz.c - libFuzzer target for the model-directory loader
 * (common/io/model.c, common/io/saved_models.c: what `train --from DIR` runs).
 *
 * Each input is a directory: the files of a small lookup model with its
 * training state, separated by MODEL_FUZZ_SEPARATOR (promises.h), written
 * into a scratch directory and loaded; model_promises.c checks what the
 * loader promises (see there). A broken promise aborts, and libFuzzer saves
 * the input. Built and run by `make fuzz`; seeds in model_seeds/ (written
 * by make_model_seeds.sh), tokens in model.dict.
 */
#include <stdio.h>
#include <stdlib.h>

#include "promises.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atexit(model_promises_cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ModelOutcome outcome;
    const char *broken = model_promises(data, size, &outcome);
    if (broken != NULL) {
        fprintf(stderr, "model_fuzz: broken promise: %s\n", broken);
        abort();
    }
    return 0;
}
