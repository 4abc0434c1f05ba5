/*
 * cli_fuzz.c - libFuzzer target for the option table (common/io/cli.c).
 *
 * Each input is an argv, its arguments separated by NUL bytes, parsed by a
 * table with one option of every kind through cli_parse_args, the parser
 * that returns instead of exiting. cli_promises.c checks what the parser
 * promises (see there); a broken promise aborts, and libFuzzer saves the
 * input. Built and run by `make fuzz`; seeds in cli_seeds/, tokens in
 * cli.dict.
 */
#include <stdio.h>
#include <stdlib.h>

#include "promises.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CliOutcome outcome;
    const char *broken = cli_promises(data, size, &outcome);
    if (broken != NULL) {
        fprintf(stderr, "cli_fuzz: broken promise: %s\n", broken);
        abort();
    }
    return 0;
}
