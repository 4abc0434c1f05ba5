/*
 * helpers.h - what several test files need: running a chapter program and
 * capturing what it prints, and comparing floats with a report.
 */
#ifndef TEST_HELPERS_H
#define TEST_HELPERS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "internal.h"
#include "io/internal.h"
#include "tensor.h"

#ifndef BIN_DIR
#define BIN_DIR "."
#endif
#ifndef SOURCE_DIR
#define SOURCE_DIR "."
#endif

/* 1 in a build under AddressSanitizer (make sanitize), whose shadow
 * memory rules out an address-space limit and a preloaded library. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

typedef struct {
    int status;      /* exit status, or 128 + signal number */
    char *out;       /* everything written to stdout, NUL-terminated */
    char *err;       /* everything written to stderr */
} RunResult;

/* Run "BIN_DIR/<program> <args>" through /bin/sh from the repository root.
 * program is relative to BIN_DIR ("03_self_attention/self_attention"). */
RunResult run_program(const char *program, const char *args);
/* The same for a whole shell command line, run as it is. */
RunResult run_command_line(const char *command);
void run_result_free(RunResult *r);

/* Each case {args, words}: the program exits with status 2, prints nothing
 * on stdout and exactly one line on stderr, containing the words. */
void expect_bad_options(const char *program, const char *const (*cases)[2], size_t count);
/* --help exits 0 and mentions every option in the list. */
void expect_help_lists(const char *program, const char *const *options, size_t count);
/* true when text is exactly one line: its only newline is the last character. */
bool is_one_line(const char *text);

/* The numbers of the tensor a program printed as "name = tensor(...)", the
 * occurrence-th such print (0 for the first), in order; nan and inf read
 * too. Returns how many were read, or -1 when there is no such print or it
 * holds more than max numbers. Tests compare a program's numbers this way,
 * not its sentences. */
int tensor_numbers_in(const char *text, const char *name, int occurrence, double *out, int max);

/* Run fn() in a child process and return what it wrote on stderr (the
 * caller frees); *status receives its exit status, as run_program gives.
 * For errors that stop the process: the test can read the message. */
char *stderr_of(void (*fn)(void), int *status);

/* The status stderr_of gives for a process that die stopped: abort's
 * SIGABRT, as the shell gives it. */
enum { DIE_STATUS = 128 + SIGABRT };

/* Criterion assertion that fn() stops the process as die does (abort) and
 * writes exactly message (one line, with its newline) on stderr: a death
 * test that a wrong or missing message fails too. */
#define expect_stops_with(fn, message)                                                 \
    do {                                                                               \
        int stop_status_;                                                              \
        char *stop_err_ = stderr_of((fn), &stop_status_);                              \
        cr_expect_eq(stop_status_, DIE_STATUS, "%s ended with status %d", #fn,         \
                     stop_status_);                                                    \
        cr_expect_str_eq(stop_err_ ? stop_err_ : "(stderr unreadable)", (message));    \
        free(stop_err_);                                                               \
    } while (0)

/* A fresh directory "/tmp/<prefix>_XXXXXX" into buf (at least 64 bytes),
 * and its removal with the plain files in it. For a test's scratch files. */
void scratch_dir_make(char *buf, size_t len, const char *prefix);
void scratch_dir_remove(const char *dir);
/* What a writer of sets into dir left behind: entries ".BASE.new-*" and
 * ".BASE.old-*" beside dir (fileset.h), and "*.tmp*" inside it. */
int set_leftovers(const char *dir);

/* The repository's own programs, as the Makefile lists them in
 * BIN_DIR/build/programs.txt (those whose source git tracks: a learner's
 * my_solution is not among them), into names as
 * "03_self_attention/streaming". Asserts that each is built. Returns how
 * many, at most max. */
int find_programs(char names[][320], int max);

/* Replace every value of the .npy file at path, keeping its shape, by
 * -value, +value, -value, ... in turn: a saved model whose parameters are
 * finite but overflow float32 in the forward. Asserts on failure. */
void npy_fill_alternating(const char *path, float value);

/* The whole numbers of a fixture .npy file of shape (a, b, c), as a new
 * array (the tokens of a training fixture's steps); asserts that the file
 * reads and has that shape. */
int *fixture_ints3(const char *path, int a, int b, int c);

/* Read a whole file; NULL when it cannot be read. The caller frees. */
char *read_text_file(const char *path, size_t *len);

/* Criterion assertion that the tensors agree within atol + rtol * |expected|,
 * printing the worst and first mismatches when they do not. */
#define expect_close(actual, expected, atol, rtol) \
    cr_expect(tensor_allclose((actual), (expected), (atol), (rtol), stderr), \
              "%s differs from %s", #actual, #expected)

/* A mode that is also a tool of its own (cli.h's CLI_MODE): PROGRAM ARGS
 * runs the tool's code in PROGRAM's process, so it exits and prints as
 * TOOL ARGS does, its error lines named after PROGRAM. */
void expect_same_as_tool(const char *program, const char *tool, const char *args);

/* each(path, text, state) for every .c file in the folders, text its
 * contents (each may change it; it is freed after the call). Returns how
 * many files there were. For the tests of rules every source keeps. */
typedef void (*EachSource)(const char *path, char *text, void *state);
int each_source(const char *const *folders, int count, EachSource each, void *state);

#endif
