/*
 * error.h - how a program fails (introduced in chapter 01).
 *
 * Every failure is one line on stderr, printed once, "[program: ]where:
 * what is wrong", and there are two ways to fail, and four names for them:
 *   die        a bug in the program (shapes that do not fit, sizes a caller
 *              should have checked, an impossible state), or a buffer it
 *              cannot go on without (memory.h's checked_malloc): the line
 *              names the function, the argument and both shapes, and the
 *              program stops, exit 1. A learner meets these lines only
 *              after changing the code.
 *   fail       a fault while running (a file, a value that overflowed, a
 *              check that did not hold): the line, and the exit status, 1,
 *              returned for the caller to return as it is,
 *                  if (model_save(dir, files, n, err, sizeof err) != 0)
 *                      return fail("%s", err);
 *              A part of a program that can fail returns 0 or the status
 *              it was given, and its caller passes that on: no caller turns
 *              one status into another, and no fail's status is dropped.
 *   cli_fail   a wrong command line, found before any work: fail's line,
 *              exit 2 (io/cli.h's parser says its errors with it).
 *   error_format  the line into a buffer the caller gives, for a function
 *              whose caller says it: where the caller can name a fault
 *              better than the function that met it (io/'s and run/'s
 *              loaders and savers, the command line's readers, and the
 *              checks of a user's sizes such as heads_split and
 *              memory_check), the function says nothing: it returns -1 (or
 *              NULL) with the line in char *err, size_t err_len, and the
 *              caller fails with it.
 * Nothing else in the library ends the program: a run larger than the
 * machine's memory is memory_require's fail, its status returned before the
 * work starts. Where the caller could add nothing (the plot writers, a
 * training run's steps in run/, the bench's child processes), the function
 * fails itself and returns the status. The clear path and learn/ take no
 * err buffer besides those checks; for anything else they die.
 * The function a line names is never spelled by hand: die is a macro that
 * gives die_in the __func__ of the function it is written in, and it is the
 * only one; no function takes its caller's name. A check (tensor_check_shape,
 * head_size, checked_malloc) names itself, and its line says what is wrong
 * with which sizes. tests/test_error.c holds the sources to these rules.
 */
#ifndef ERROR_H
#define ERROR_H

#include <stdarg.h>
#include <stddef.h>

/* The program's name, the first word of every error line: "multihead:
 * tensor_zeros: out of memory ...". The first call names the program
 * (cli_parse makes it with its table's name) and returns that name; every
 * later call returns the same name, whatever it is given. So a mode that
 * another program runs in its own process (cli.h's CLI_MODE) asks with its
 * own name and gets the program's, and its lines read as the program's. */
const char *program_name(const char *name);

/* A bug: "[prog: ]function: message" on stderr, then exit(1); printf-style.
 *     die("valid_lens has %d rows, expected %d", rows, batch);
 * die is a macro: the function named is the one die is written in, its
 * __func__, so no caller spells a name; die_in is its target, for no one
 * else to call. */
#define die(...) die_in(__func__, __VA_ARGS__)
_Noreturn void die_in(const char *function, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A fault: "[prog: ]message" on stderr; returns 1, the exit status, for
 * the caller to return as it is. printf-style. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A wrong command line: fail's line, printf-style, then exit 2 (EXIT_USAGE).
 * prog names the program when nothing has named it yet (program_name). */
enum { EXIT_USAGE = 2 };
_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The error line into a buffer, for a function whose caller says it:
 * "name: reason" in err (err_len bytes), reason printf-style, name NULL for
 * the reason alone. When the two do not fit, the name loses its middle,
 * never the reason. A character that would break the line (a newline in a
 * file name) is written as an escape ("\n"), here as in die and fail, so an
 * error is always one line. The buffer must be given: err NULL is a bug
 * (die). Returns -1, for the function to return. */
int error_format(char *err, size_t err_len, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
