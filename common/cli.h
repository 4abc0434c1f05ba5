/*
 * cli.h - command-line options for the chapter programs (introduced in
 * chapter 01).
 *
 * Every program parses its flags with a plain loop over argv and these
 * helpers. Bad user input never reaches the tensor code: each helper prints
 * one line on stderr, "PROGRAM: what is wrong", and exits with status 2.
 *
 *     for (int i = 1; i < argc; i++) {
 *         if (cli_is(argv[i], "--seed"))
 *             seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
 *         else if (cli_is(argv[i], "--help")) { usage(); return 0; }
 *         else cli_unknown(PROG, argv[i]);
 *     }
 *
 * Name the flag as a string literal, never as argv[i], in the same call as
 * cli_value: cli_value moves i on, and C does not say in which order a
 * call's arguments are evaluated.
 */
#ifndef CLI_H
#define CLI_H

#include <stdbool.h>
#include <stdint.h>

enum { EXIT_USAGE = 2 };

bool cli_is(const char *arg, const char *flag);
/* The value after argv[*i]; advances *i. Missing: "--seed needs a value". */
const char *cli_value(const char *prog, int argc, char **argv, int *i);
/* Whole numbers in [min, max]: "--batch expects a whole number from 1 to 4096, got 'x'". */
long cli_long(const char *prog, const char *flag, const char *text, long min, long max);
uint64_t cli_u64(const char *prog, const char *flag, const char *text);
/* Finite real numbers in [min, max]. */
double cli_double(const char *prog, const char *flag, const char *text, double min, double max);
/* A comma-separated list of whole numbers in [min, max], at most max_count:
 * "3,2" -> {3, 2}; returns how many were read. */
int cli_long_list(const char *prog, const char *flag, const char *text,
                  long min, long max, long *out, int max_count);
/* "unknown option '--x' (try --help)", exit 2. */
_Noreturn void cli_unknown(const char *prog, const char *arg);
/* One usage error line, printf-style, then exit 2. */
_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An existing, writable directory, or a usage error naming it. */
void cli_check_dir(const char *prog, const char *flag, const char *dir);

#endif
