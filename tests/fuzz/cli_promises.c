/*
 * cli_promises.c - what the option table (common/io/cli.h) promises for
 * any argv, checked on one input. See promises.h.
 *
 * The table has one option of every kind, with ranges like the programs':
 * a whole number with a range, a seed, a real number, two floats (one whose
 * range ends below 1, as a dropout's), a string, a list read by the list
 * reader, a directory and a flag. The promises:
 *   - an error is one line that starts with the program's name;
 *   - a parse that succeeds read every argument as an option or its value;
 *     each number is the last one given, read as strtol, strtoull or strtod
 *     read its text (which has no white space and no leading '+'), within
 *     its range and finite; an option not given keeps its default; a
 *     string points at its argument; a flag is set exactly when given; a
 *     directory exists and is writable;
 *   - --help, when it comes first, gives a help text with a line for every
 *     option.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "promises.h"

static const char PROG[] = "fuzz_prog";
enum { MAX_ARGS = 64, MAX_LENS = 4, LENS_MAX = 16 };

typedef struct {
    int tokens;
    uint64_t seed;
    double eps;
    float dropout, lr;
    const char *name, *lens_text, *plot_dir;
    bool verbose, tokens_given;
} Options;

static const char DEFAULT_NAME[] = "default";

/* The options in table order; the checks below index them by this. */
enum { TOKENS, SEED, EPS, DROPOUT, LR, NAME, LENS, PLOT, VERBOSE, NUM_OPTIONS };

static void make_table(Options *opt, CliOption *options)
{
    const CliOption table[NUM_OPTIONS] = {
        [TOKENS] = {"--tokens", CLI_INT, &opt->tokens, .min = 1, .max = 64, .metavar = "T",
                    .help = "tokens", .given = &opt->tokens_given},
        [SEED] = {"--seed", CLI_U64, &opt->seed, .metavar = "N", .help = "seed"},
        [EPS] = {"--eps", CLI_DOUBLE, &opt->eps, .min = 1e-6, .max = 0.5, .metavar = "E",
                 .help = "finite-difference step"},
        [DROPOUT] = {"--dropout", CLI_FLOAT, &opt->dropout, .min = 0, .max = 0.99,
                     .metavar = "P", .help = "dropout\nover two lines"},
        [LR] = {"--lr", CLI_FLOAT, &opt->lr, .min = 1e-6, .max = 1e30, .metavar = "X",
                .help = "learning rate"},
        [NAME] = {"--name", CLI_STRING, &opt->name, .metavar = "WORD", .help = "a word"},
        [LENS] = {"--valid-lens", CLI_STRING, &opt->lens_text, .metavar = "L,L",
                  .help = "valid lengths", .default_text = "none"},
        [PLOT] = {"--plot", CLI_DIR, &opt->plot_dir, .metavar = "DIR", .help = "a directory"},
        [VERBOSE] = {"--verbose", CLI_FLAG, &opt->verbose, .help = "say more"},
    };
    memcpy(options, table, sizeof table);
}

static Options defaults(void)
{
    return (Options){.tokens = 4, .seed = 7, .eps = 1e-3, .dropout = 0.1f, .lr = 1e-3f,
                     .name = DEFAULT_NAME};
}

/* ---- the input as argv ------------------------------------------------------ */

typedef struct {
    int argc;
    char *argv[MAX_ARGS + 1];
} Args;

/* argv[0] then each piece between NULs, each in its own allocation of
 * exactly its length, so that a read past an argument's end is seen. */
static void split_args(const uint8_t *data, size_t size, Args *args)
{
    static char prog_name[] = "fuzz_prog";
    args->argc = 0;
    args->argv[args->argc++] = prog_name;
    size_t start = 0;
    while (start < size && args->argc < MAX_ARGS) {
        const uint8_t *nul = memchr(data + start, 0, size - start);
        size_t len = nul ? (size_t)(nul - (data + start)) : size - start;
        char *arg = malloc(len + 1);
        memcpy(arg, data + start, len);
        arg[len] = '\0';
        args->argv[args->argc++] = arg;
        start += len + 1;
    }
    args->argv[args->argc] = NULL;
}

static void free_args(Args *args)
{
    for (int i = 1; i < args->argc; i++)
        free(args->argv[i]);
}

/* ---- the promises ------------------------------------------------------------ */

/* What argv says, read the simple way: for each option, whether it appears
 * and the text of its last value. false when an argument is no option. */
static bool scan_args(const Args *args, const CliOption *options, bool *present,
                      const char **last)
{
    for (int i = 1; i < args->argc; i++) {
        int k = 0;
        while (k < NUM_OPTIONS && strcmp(args->argv[i], options[k].name) != 0)
            k++;
        if (k == NUM_OPTIONS)
            return false;
        present[k] = true;
        if (options[k].kind != CLI_FLAG) {
            if (i + 1 >= args->argc)
                return false;
            last[k] = args->argv[++i];
        }
    }
    return true;
}

static bool plain_number(const char *text)
{
    if (text[0] == '\0' || text[0] == '+')
        return false;
    for (const char *p = text; *p; p++)
        if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
            return false;
    return true;
}

static bool is_one_error_line(const char *message)
{
    const size_t prefix = strlen(PROG) + 2;
    return strncmp(message, PROG, strlen(PROG)) == 0 &&
           strncmp(message + strlen(PROG), ": ", 2) == 0 && strlen(message) > prefix &&
           strchr(message, '\n') == NULL && strchr(message, '\r') == NULL;
}

/* A number option after a parse that succeeded: the last text, strictly
 * written, read the same way, in range and finite; else the default. */
static const char *check_numbers(const Options *opt, const Options *dflt, const bool *present,
                                 const char *const *last)
{
    for (int k = TOKENS; k <= LR; k++)
        if (present[k] && !plain_number(last[k]))
            return "an accepted number has no white space and no leading '+'";
    if (present[TOKENS] ? opt->tokens != strtol(last[TOKENS], NULL, 10) ||
                              opt->tokens < 1 || opt->tokens > 64
                        : opt->tokens != dflt->tokens)
        return "--tokens is the whole number given, from 1 to 64, or the default";
    if (opt->tokens_given != present[TOKENS])
        return "--tokens is marked given exactly when it is";
    if (present[SEED] ? last[SEED][0] == '-' || opt->seed != strtoull(last[SEED], NULL, 10)
                      : opt->seed != dflt->seed)
        return "--seed is what strtoull reads from its text, or the default";
    if (!isfinite(opt->eps) || opt->eps < 1e-6 || opt->eps > 0.5 ||
        opt->eps != (present[EPS] ? strtod(last[EPS], NULL) : dflt->eps))
        return "--eps is the number given, finite and from 1e-6 to 0.5, or the default";
    if (!isfinite(opt->dropout) || opt->dropout < 0.0f || opt->dropout > 0.99f ||
        opt->dropout != (present[DROPOUT] ? (float)strtod(last[DROPOUT], NULL) : dflt->dropout))
        return "--dropout is the float given, finite and from 0 to 0.99f, or the default";
    if (!isfinite(opt->lr) || opt->lr < 1e-6f || opt->lr > 1e30f ||
        opt->lr != (present[LR] ? (float)strtod(last[LR], NULL) : dflt->lr))
        return "--lr is the float given, finite and from 1e-6f to 1e30f, or the default";
    return NULL;
}

/* --valid-lens read by the list reader: a refusal is one error line; a
 * list has 1 to MAX_LENS numbers in range, the ones strtol reads in turn. */
static const char *check_list(const char *text, CliOutcome *outcome)
{
    long lens[MAX_LENS];
    char err[CLI_ERR_LEN];
    int n = cli_read_long_list("--valid-lens", text, 0, LENS_MAX, lens, MAX_LENS, err,
                               sizeof err);
    outcome->list_count = n;
    if (n < 0)
        return strncmp(err, "--valid-lens ", 13) == 0 && strchr(err, '\n') == NULL &&
                       strchr(err, '\r') == NULL
                   ? NULL
                   : "a refused list gives one line naming the flag";
    if (n < 1 || n > MAX_LENS)
        return "a list has 1 to 4 numbers";
    const char *p = text;
    for (int i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (lens[i] != v || v < 0 || v > LENS_MAX || (*end != ',' && *end != '\0'))
            return "a list holds the numbers of its text, each from 0 to 16";
        p = end + 1;
    }
    return NULL;
}

static const char *check_parsed(const Args *args, const Options *opt, const CliOption *options,
                                CliOutcome *outcome)
{
    bool present[NUM_OPTIONS] = {false};
    const char *last[NUM_OPTIONS] = {NULL};
    if (!scan_args(args, options, present, last))
        return "a parse that succeeds read every argument as an option or its value";
    const Options dflt = defaults();
    const char *broken = check_numbers(opt, &dflt, present, last);
    if (broken != NULL)
        return broken;
    if (opt->name != (present[NAME] ? last[NAME] : DEFAULT_NAME) ||
        opt->lens_text != last[LENS] || opt->plot_dir != last[PLOT])
        return "a string option points at its argument, or keeps its default";
    if (opt->verbose != present[VERBOSE])
        return "a flag is set exactly when it is given";
    struct stat st;
    if (opt->plot_dir != NULL && (stat(opt->plot_dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
                                  access(opt->plot_dir, W_OK) != 0))
        return "an accepted directory exists and is writable";
    return opt->lens_text != NULL ? check_list(opt->lens_text, outcome) : NULL;
}

/* The help text, written into memory: the usage line, then a line that
 * starts with each option's name, --help included. */
static const char *check_help(const CliTable *table)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL)
        return NULL;   /* out of memory: nothing to check */
    cli_print_help(table, out);
    fclose(out);
    const char *broken = NULL;
    if (strncmp(text, "usage: fuzz_prog [options]\n", 27) != 0)
        broken = "the help starts with the usage line";
    for (int k = 0; k <= table->count && broken == NULL; k++) {
        char line_start[64];
        snprintf(line_start, sizeof line_start, "\n  %s ",
                 k < table->count ? table->options[k].name : "--help");
        if (strstr(text, line_start) == NULL)
            broken = "the help has a line for every option";
    }
    free(text);
    return broken;
}

const char *cli_promises(const uint8_t *data, size_t size, CliOutcome *outcome)
{
    Args args;
    split_args(data, size, &args);
    Options opt = defaults();
    CliOption options[NUM_OPTIONS];
    make_table(&opt, options);
    const CliTable table = {PROG, "A table with every kind of option.", NUM_OPTIONS, options};

    memset(outcome, 0, sizeof *outcome);
    outcome->status = cli_parse_args(&table, args.argc, args.argv, outcome->message,
                                     sizeof outcome->message);
    const char *broken = NULL;
    switch (outcome->status) {
    case CLI_ERROR:
        if (!is_one_error_line(outcome->message))
            broken = "an error is one line that starts with the program's name";
        break;
    case CLI_HELP: {
        bool asked = false;
        for (int i = 1; i < args.argc; i++)
            asked = asked || strcmp(args.argv[i], "--help") == 0;
        broken = asked ? check_help(&table) : "the help comes only when asked for";
        break;
    }
    case CLI_PARSED:
        broken = check_parsed(&args, &opt, options, outcome);
        break;
    }
    free_args(&args);
    return broken;
}
