/*
 * cli.h - command-line options for the chapter programs (introduced in
 * chapter 01).
 *
 * Every program describes its options in one table: name, kind, where the
 * value goes, range and help. The same table parses argv and prints
 * --help, so a range is written once. A default is whatever the target
 * holds before parsing, and --help prints it from there.
 *
 *     static const char PROG[] = "softmax_mask";
 *     Options opt = {.seed = 0, .batch = 2};
 *     const CliOption options[] = {
 *         {"--seed",  CLI_U64, &opt.seed,  .metavar = "N", .help = "seed for the scores"},
 *         {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 16, .metavar = "B",
 *          .help = "batch_size"},
 *         {"--plot",  CLI_DIR, &opt.plot_dir, .metavar = "DIR", .help = "write the heatmaps"},
 *     };
 *     *done = cli_parse(&(CliTable){PROG, "Stable softmax and masks.",
 *                                   CLI_COUNT(options), options}, argc, argv);
 *     if (*done != CLI_RUN)
 *         return opt;   // and main returns *done: --help was printed, or a mode ran
 *
 * Bad user input never reaches the tensor code: each error prints one line
 * on stderr, "PROGRAM: what is wrong", and exits with status 2. Name the
 * fields after the target (.min, .metavar, ...): the table reads as a form. The
 * one check between two options that many programs share, H heads splitting
 * D hiddens, is a row's .splits = &opt.hiddens on the heads row; other checks
 * that involve two options (a valid length against --keys) follow the
 * parse, with cli_fail.
 */
#ifndef CLI_H
#define CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"   /* cli_fail, EXIT_USAGE */

typedef enum {
    CLI_INT,      /* int, in [min, max] */
    CLI_U64,      /* uint64_t, 0 to 2^64 - 1 (seeds) */
    CLI_DOUBLE,   /* double, finite, in [min, max] */
    CLI_FLOAT,    /* float, checked in [min, max] after rounding to float */
    CLI_STRING,   /* const char *, parsed by the program (lists, words) */
    CLI_DIR,      /* const char *, a directory a set can be written into (fileset_check_dir) */
    CLI_FROM_DIR, /* const char *, an existing directory a program reads from: "does not
                   * exist", "is not a directory" or "cannot be read" is a usage error */
    CLI_FLAG,     /* bool, set to true; takes no value */
    CLI_MODE,     /* a mode that is also a small tool of its own: see below */
} CliKind;

typedef struct {
    const char *name;      /* "--batch" */
    CliKind kind;
    void *target;          /* int *, uint64_t *, double *, float *, const char **, bool * */
    double min, max;       /* the range of CLI_INT, CLI_DOUBLE and CLI_FLOAT */
    const char *metavar;   /* "B" in "--batch B" */
    const char *help;      /* what it is; a '\n' continues on the next line */
    bool *given;           /* when not NULL: set true when the option appears */
    const char *default_text;   /* printed as the default instead of the target's value */
    const char *tool;      /* CLI_MODE: the tool that does the mode, by name (for --help) */
    int (*mode)(int argc, char **argv);   /* CLI_MODE: the tool's entry, layer_files_main */
    const int *splits;     /* a heads option: the hiddens option's int it must split
                            * (heads.h's heads_split), checked once both are read */
} CliOption;

typedef struct {
    const char *prog;          /* the program's name, first word of every error */
    const char *summary;       /* one or more lines after the usage line */
    int count;
    const CliOption *options;
} CliTable;

#define CLI_COUNT(options) (int)(sizeof(options) / sizeof((options)[0]))

/* --dropout P as every program declares it, a CLI_FLOAT row:
 *     {"--dropout", CLI_FLOAT, &opt.dropout, CLI_DROPOUT_RANGE, .help = "..."},
 * 1 would drop every weight, and the range is checked on the float the
 * library keeps, so 0.99999999 (1 as a float) is refused as 1 is. */
#define CLI_DROPOUT_RANGE .min = 0, .max = 0.99, .metavar = "P"

/* Parse argv by the table. Returns CLI_RUN when the program goes on to its
 * work; otherwise the status main returns at once: 0 after --help printed
 * the help on stdout, or what a mode's tool returned (below). Every error
 * prints one line and exits 2 (cli_fail). Numbers are read strictly: no
 * white space, no leading '+'. cli_parse also arranges for standard output
 * to be checked at exit: an output that could not be written ends the
 * program with "PROG: cannot write the output: REASON" and status 1; and
 * installs the handler of SIGINT, SIGTERM and SIGHUP (signals_install in
 * fileset.h): "PROG: stopped by SIGTERM", status 128 + the signal. */
enum { CLI_RUN = -1 };
int cli_parse(const CliTable *table, int argc, char **argv) __attribute__((warn_unused_result));
/* Standard output flushed and checked now, as at exit: 0, or that one line
 * and 1 (fail), for a long run that stops at its first output lost rather
 * than at its end. The line is said once, here or at exit. */
int cli_stdout_check(void);

/* A mode that is a tool of its own (the file modes, the benchmark mode)
 * keeps its place in the program's table, one row per flag of the tool's:
 *     {"--from", CLI_MODE, .tool = "layer_files", .mode = layer_files_main,
 *      .help = "a layer from .npy files"},
 *     {"--to",   CLI_MODE, .tool = "layer_files", .mode = layer_files_main},
 * When argv holds such a flag as an option (not as the value of one of the
 * program's options), cli_parse calls the mode's function in this process
 * with the same arguments and returns what it returns, for main to return.
 * The tool's file is linked into the program (see the Makefile), and is a
 * program of its own too; its lines start with program_name's name
 * (error.h), so the program's old command lines print what they printed
 * as a tool started beside it. --help lists the tool under the options. */
/* The --help text: usage line, summary, one line per option with its range
 * and default (taken from the targets as they are now). */
void cli_print_help(const CliTable *table, FILE *out);

/* The word that goes with a count: plural(1, "head", "heads") is "head",
 * plural(0 or 2, ...) is "heads", so a program never prints "1 heads". */
static inline const char *plural(long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* ---- the parser without the exits -----------------------------------------
 * What cli_parse does, returning the error instead of exiting, for a caller
 * that must go on (the fuzz target tests/fuzz/cli_fuzz.c): the error is the
 * same line cli_parse prints, "PROG: what is wrong", written into err (cut
 * to err_len). A character of the user's text that would break the line (a
 * newline, a carriage return, a vertical tab, a form feed) is shown
 * escaped, "\n", "\x0b", in both places, so an error is one line whatever
 * argv holds. err must be given (error.h's error_format). */
enum { CLI_ERR_LEN = 512 };

typedef enum {
    CLI_PARSED,   /* every option read into its target and checked */
    CLI_HELP,     /* --help came before any error; the caller prints the help */
    CLI_ERROR,    /* err holds the line; targets before the error may be set */
} CliStatus;

CliStatus cli_parse_args(const CliTable *table, int argc, char **argv, char *err,
                         size_t err_len);

/* ---- the pieces, for programs' own checks ----------------------------------
 * Each returns the line of a wrong value in err, "--valid-lens expects ...",
 * and the program says it with cli_fail:
 *     long lens[8];
 *     char err[CLI_ERR_LEN];
 *     const int n = cli_read_long_list("--valid-lens", text, 1, 16, lens, 8, err, sizeof err);
 *     if (n < 0)
 *         cli_fail(PROG, "%s", err);
 * A check between two options that heads.h's heads_split makes (H heads
 * splitting D hiddens) is said the same way with heads_split's line. */
/* A whole number, or a finite real number, in [min, max]: true with the
 * value in *out, or false with err filled (the readers of the other kinds
 * are cli.c's own). */
bool cli_read_long(const char *flag, const char *text, long min, long max, long *out, char *err,
                   size_t err_len);
bool cli_read_double(const char *flag, const char *text, double min, double max, double *out,
                     char *err, size_t err_len);
/* A comma-separated list of whole numbers in [min, max], at most max_count:
 * "3,2" -> {3, 2}; how many were read into out, or -1 with err filled. */
int cli_read_long_list(const char *flag, const char *text, long min, long max, long *out,
                       int max_count, char *err, size_t err_len);

/* ---- a program's own checks ------------------------------------------------ */
/* A chapter program checks what it shows, and its exit status says whether
 * every check held. cli_check prints "PROG: check failed: WHAT" on stderr
 * when holds is false and counts it; cli_checks_status ends the count:
 * "PROG: 2 checks failed" on stderr and 1 when any failed, else
 * "check: all 5 self-checks passed" on stdout (when any ran) and 0. */
void cli_check(bool holds, const char *what);
int cli_checks_status(void);

#endif
