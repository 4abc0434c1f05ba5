/*
 * test_bad_input.c - every wrong input gets one clear line and a non-zero
 * exit, never a crash, a hang or a half-written file.
 *
 * One row per case: the program, its arguments, the exit status expected
 * (2 for a usage error, 1 for a runtime error), words that stderr must
 * contain, and optionally a file that must not exist afterwards.
 *
 * Runs of the sanitizer build keep checking memory errors here, but not
 * leaks: a program that stops on an error does not free what it holds.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"

typedef struct {
    const char *program;
    const char *args;
    int status;
    const char *message;
    const char *must_not_exist;
} BadInput;

#define DOT "01_dot_product/dot_product"
#define NOISY "01_dot_product/noisy_query"

static BadInput rows[] = {
    /* chapter 01 */
    {DOT, "--frobnicate", 2, "unknown option '--frobnicate'", NULL},
    {DOT, "--query", 2, "--query needs a value", NULL},
    {DOT, "--query Germany", 2, "'Germany' is not in the vocabulary", NULL},
    {DOT, "--seed abc", 2, "--seed expects a whole number", NULL},
    {DOT, "--seed -1", 2, "--seed expects a whole number", NULL},
    {DOT, "--seed 99999999999999999999999", 2, "--seed expects a whole number", NULL},
    {NOISY, "--keys 0", 2, "--keys expects a whole number from 2", NULL},
    {NOISY, "--dim -4", 2, "--dim expects a whole number from 1", NULL},
    {NOISY, "--trials 1e9", 2, "--trials expects a whole number", NULL},
    {NOISY, "--keys 99999999999999999999", 2, "--keys expects a whole number", NULL},
};

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
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    if (row->must_not_exist)
        remove(row->must_not_exist);
    RunResult r = run_program(row->program, row->args);
    cr_expect_eq(r.status, row->status, "%s %s: exit status %d, expected %d; stderr: %s",
                 row->program, row->args, r.status, row->status, r.err ? r.err : "");
    cr_expect(r.err && strstr(r.err, row->message), "%s %s: stderr does not say '%s': %s",
              row->program, row->args, row->message, r.err ? r.err : "");
    /* exactly one line: the only newline is the last character */
    size_t len = r.err ? strlen(r.err) : 0;
    cr_expect(len > 0 && strchr(r.err, '\n') == r.err + len - 1,
              "%s %s: stderr is not one line: %s", row->program, row->args, r.err ? r.err : "");
    if (row->must_not_exist) {
        struct stat st;
        cr_expect_neq(stat(row->must_not_exist, &st), 0, "%s %s left %s behind",
                      row->program, row->args, row->must_not_exist);
    }
    run_result_free(&r);
}
