/*
 * error.h - how the library stops (introduced in chapter 01).
 *
 * The one error rule. Every failure is one line on stderr, printed once,
 * "[program: ]where: what is wrong" (error_format), and one of five kinds:
 *   1. A bug in the program itself (shapes that do not fit, sizes a caller
 *      should have checked, an impossible state): die, naming the function,
 *      the argument and both shapes; exit status 1. A learner meets these
 *      lines only after changing the code.
 *   2. A wrong command line: cli_fail (io/cli.h), before any work; exit 2.
 *   3. A fault while running (a file, the memory, a value that overflowed):
 *      reported once, where the program can name it; exit 1. A program's
 *      part says so with report_failure and returns 1 for main to return;
 *      where nothing could go on, the same line stops the program at once
 *      (checked_malloc naming the bytes, memory_require, and run/'s steps
 *      of one program, such as train_load_model).
 *   4. Only the io boundary returns a fault as text: the loaders and
 *      writers of io/ and run/ return 0 (or a pointer) or -1 (NULL) with
 *      the line in char *err, size_t err_len, and the caller prints it.
 *      The clear path, learn/ and fast/ take no err buffer, except the
 *      checks a program runs on its user's sizes or tensors before the
 *      work (heads_split, memory_check, multihead_check_memory,
 *      multihead_checked_run); for anything else they die. A function
 *      whose fault its caller could not name better (the plot writers, a
 *      training run's steps, the bench's child processes) prints its line
 *      itself with report_error and returns -1; the caller adds nothing.
 *   5. A self-check that fails (a program checks what it shows): cli_check
 *      (io/cli.h), an error on stderr and exit 1; never a line on stdout.
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
/* The one formatter of error lines, which every error of the library and
 * the programs goes through: "name: reason", reason printf-style. A
 * character that would break the line (a newline in a file name) is
 * written as an escape ("\n"), so an error is always one line.
 * err not NULL: the line goes into err (err_len bytes); when it does not
 * fit, the name loses its middle, never the reason. The caller decides
 * what to do with it (a reader that can fail returns it this way).
 * err NULL: the line goes to stderr, after the program's name when the
 * program has named itself and name is not that name. name NULL: the
 * reason alone. Returns -1, for a caller to return. */
int error_format(char *err, size_t err_len, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int error_vformat(char *err, size_t err_len, const char *name, const char *fmt, va_list args)
    __attribute__((format(printf, 4, 0)));

/* A bug (rule 1): "[prog: ]func: message" on stderr and exit(1).
 * (The usage error, exit 2, is cli_fail.) printf-style; func may be NULL. */
_Noreturn void die(const char *func, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same line without the exit, for a function that returns -1 to its
 * caller after saying why (the plot writers). Returns -1. */
int report_error(const char *func, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same line for a fault that ends a program (rule 3), from main or a
 * part whose status main returns: returns 1, the exit status,
 *     return report_failure(NULL, "%s", err);                              */
int report_failure(const char *func, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checked malloc/calloc for scratch buffers: the failure message names the
 * caller and the number of bytes asked for. count * elem is overflow-checked.
 * A request for 0 bytes returns a valid pointer to free. */
void *checked_calloc(const char *func, size_t count, size_t elem);
void *checked_malloc(const char *func, size_t count, size_t elem);

/* Bytes a program may hope to allocate: the physical memory, or the
 * address-space limit (ulimit -v) when that is smaller; *what names which
 * of the two it is, for a message. A program whose sizes come from the
 * user compares what a run needs with this before it starts, so that a run
 * too large fails at once with one line, not after minutes of swapping or
 * half way through. SIZE_MAX when neither is known. */
size_t memory_available(const char **what);

/* What every run holds besides its tensors (memory_check adds it). */
#define MEMORY_BASE_BYTES 16e6
/* The check itself. need: the bytes a run's tensors take at their largest,
 * worked out from the sizes asked for (an estimate that errs on the large
 * side), MEMORY_BASE_BYTES added;
 * detail: what dominates it, or NULL; hint: what to make smaller. Returns
 * 0 when need fits, else -1 with one line in err:
 *   "this run needs about 34.4 GB of memory (two (65536, 65536) matrices),
 *    more than the machine's memory, 25.3 GB: use a smaller --cost-max" */
int memory_check(double need, const char *detail, const char *hint, char *err, size_t err_len);
/* For a program, before its work: the same check, and when need does not
 * fit, that line on stderr after the program's name, then exit(1). */
void memory_require(double need, const char *detail, const char *hint);
/* "17.2 GB": bytes as a person reads them, in powers of 1000. */
void bytes_text(char *buf, size_t len, double bytes);

#endif
