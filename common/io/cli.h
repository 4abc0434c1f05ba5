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
 *     cli_parse(&(CliTable){PROG, "Stable softmax and masks.", CLI_COUNT(options), options},
 *               argc, argv);
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

enum { EXIT_USAGE = 2 };

typedef enum {
    CLI_INT,      /* int, in [min, max] */
    CLI_U64,      /* uint64_t, 0 to 2^64 - 1 (seeds) */
    CLI_DOUBLE,   /* double, finite, in [min, max] */
    CLI_FLOAT,    /* float, checked in [min, max] after rounding to float */
    CLI_STRING,   /* const char *, parsed by the program (lists, words) */
    CLI_DIR,      /* const char *, a directory a set can be written into (fileset_check_dir) */
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

/* Parse argv by the table. --help prints the help on stdout and exits 0;
 * every error prints one line and exits 2. Numbers are read strictly: no
 * white space, no leading '+'. cli_parse also arranges for standard output
 * to be checked at exit: an output that could not be written ends the
 * program with "PROG: cannot write the output: REASON" and status 1; and
 * installs the handler of SIGINT, SIGTERM and SIGHUP (signals_install in
 * fileset.h): "PROG: stopped by SIGTERM", status 128 + the signal. */
void cli_parse(const CliTable *table, int argc, char **argv);
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
 * with the same arguments, and the program exits with what it returns.
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
 * What cli_parse and the pieces below do, returning instead of exiting, for
 * a caller that must go on (the fuzz target tests/fuzz/cli_fuzz.c). The
 * error is the same line cli_parse prints, "PROG: what is wrong", written
 * into err (cut to err_len). A character of the user's text that would
 * break the line (a newline, a carriage return, a vertical tab, a form
 * feed) is shown escaped, "\n", "\x0b", in both places, so an error is one
 * line whatever argv holds. With err NULL each function does what
 * cli_parse does instead: print the line on stderr and exit 2. */
enum { CLI_ERR_LEN = 512 };

typedef enum {
    CLI_PARSED,   /* every option read into its target and checked */
    CLI_HELP,     /* --help came before any error; the caller prints the help */
    CLI_ERROR,    /* err holds the line; targets before the error may be set */
} CliStatus;

CliStatus cli_parse_args(const CliTable *table, int argc, char **argv, char *err,
                         size_t err_len);
/* A whole number in [min, max]: true with the value in *out, or false with
 * err filled (the readers of the other kinds are cli.c's own). */
bool cli_read_long(const char *prog, const char *flag, const char *text, long min, long max,
                   long *out, char *err, size_t err_len);
/* How many numbers were read into out, or -1 with err filled. */
int cli_read_long_list(const char *prog, const char *flag, const char *text, long min,
                       long max, long *out, int max_count, char *err, size_t err_len);

/* ---- the pieces, also for programs' own checks -------------------------- */
/* Finite real numbers in [min, max]. */
double cli_double(const char *prog, const char *flag, const char *text, double min, double max);
/* A comma-separated list of whole numbers in [min, max], at most max_count:
 * "3,2" -> {3, 2}; returns how many were read. */
int cli_long_list(const char *prog, const char *flag, const char *text,
                  long min, long max, long *out, int max_count);
/* A wrong command line (error.h): fail's line, printf-style, then exit 2.
 * prog names the program when nothing has named it yet. */
_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The heads' sizes from the command line (heads_split, heads.h): unless
 * num_heads splits num_hiddens, the one message as a usage error,
 *   "PROG: --hiddens 100 does not divide by --heads 3: every head needs the same size"
 * naming the two flags (or a fixed size, "num_hiddens"), then exit 2. */
void cli_require_heads_split(const char *prog, int num_hiddens, int num_heads,
                             const char *hiddens_flag, const char *heads_flag);
/* An existing directory a program reads from (--from): "does not exist",
 * "is not a directory" or "cannot be read", a usage error naming it. */
void cli_check_input_dir(const char *prog, const char *flag, const char *dir);

/* ---- a program's own checks ------------------------------------------------ */
/* A chapter program checks what it shows, and its exit status says whether
 * every check held. cli_check prints "PROG: check failed: WHAT" on stderr
 * when holds is false and counts it; cli_checks_status ends the count:
 * "PROG: 2 checks failed" on stderr and 1 when any failed, else
 * "check: all 5 self-checks passed" on stdout (when any ran) and 0. */
void cli_check(bool holds, const char *what);
int cli_checks_status(void);

#endif
