/*
 * test_cli.c - the option table of common/io/cli.h: one table parses argv,
 * checks ranges and prints --help; numbers are read strictly; standard
 * output is checked at exit.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "io/cli.h"

typedef struct {
    int batch;
    uint64_t seed;
    float dropout;
    double scale;
    bool verbose, batch_given;
    const char *name;
} Opts;

static Opts opts;
static int test_argc;
static char **test_argv;

/* The table under test: defaults are whatever opts holds before parsing. */
static void parse(void)
{
    const CliOption options[] = {
        {"--batch", CLI_INT, &opts.batch, .min = 1, .max = 16, .metavar = "B",
         .help = "batch_size", .given = &opts.batch_given},
        {"--seed", CLI_U64, &opts.seed, .metavar = "N", .help = "seed"},
        {"--dropout", CLI_FLOAT, &opts.dropout, .min = 0, .max = 0.99, .metavar = "P",
         .help = "dropout"},
        {"--scale", CLI_DOUBLE, &opts.scale, .min = -2, .max = 2, .metavar = "S",
         .help = "a scale"},
        {"--verbose", CLI_FLAG, &opts.verbose, .help = "say more"},
        {"--name", CLI_STRING, &opts.name, .metavar = "WORD", .help = "a name"},
    };
    const int done = cli_parse(&(CliTable){"prog", "A table under test.", CLI_COUNT(options),
                                           options}, test_argc, test_argv);
    cr_assert_eq(done, CLI_RUN, "a command line without --help goes on to the work: %d", done);
}

static void parse_args(char **argv)
{
    opts = (Opts){.batch = 2, .seed = 7, .dropout = 0.5f, .scale = 1.0};
    test_argv = argv;
    for (test_argc = 0; argv[test_argc] != NULL; test_argc++)
        ;
    parse();
}

Test(cli, table_fills_every_kind)
{
    char *argv[] = {"prog", "--batch", "16", "--seed", "18446744073709551615", "--dropout",
                    "0.25", "--scale", "-1.5e0", "--verbose", "--name", "Japan", NULL};
    parse_args(argv);
    cr_expect_eq(opts.batch, 16);
    cr_expect(opts.batch_given);
    cr_expect_eq(opts.seed, UINT64_MAX);
    cr_expect_eq(opts.dropout, 0.25f);
    cr_expect_eq(opts.scale, -1.5);
    cr_expect(opts.verbose);
    cr_expect_str_eq(opts.name, "Japan");
}

Test(cli, absent_options_keep_their_defaults)
{
    char *argv[] = {"prog", NULL};
    parse_args(argv);
    cr_expect_eq(opts.batch, 2);
    cr_expect_not(opts.batch_given);
    cr_expect_eq(opts.seed, 7u);
    cr_expect_eq(opts.dropout, 0.5f);
    cr_expect_eq(opts.scale, 1.0);
    cr_expect_not(opts.verbose);
    cr_expect_null(opts.name);
}

/* Each bad command line: status 2 and exactly this one line. */
static char *bad_argv[4];
static void parse_bad(void)
{
    parse_args(bad_argv);
}

static void expect_usage_error(const char *flag, const char *value, const char *message)
{
    bad_argv[0] = "prog";
    bad_argv[1] = (char *)flag;
    bad_argv[2] = (char *)value;
    bad_argv[3] = NULL;
    int status;
    char *err = stderr_of(parse_bad, &status);
    cr_expect_eq(status, 2, "%s '%s': status %d", flag, value ? value : "", status);
    cr_expect_str_eq(err, message);
    free(err);
}

Test(cli, errors_are_one_line_with_status_2)
{
    expect_usage_error("--batch", "17", "prog: --batch expects a whole number from 1 to 16, got '17'\n");
    expect_usage_error("--batch", "0", "prog: --batch expects a whole number from 1 to 16, got '0'\n");
    expect_usage_error("--batch", "2x", "prog: --batch expects a whole number from 1 to 16, got '2x'\n");
    expect_usage_error("--batch", NULL, "prog: --batch needs a value (try --help)\n");
    expect_usage_error("--batchh", "2", "prog: unknown option '--batchh' (try --help)\n");
    expect_usage_error("--scale", "nan", "prog: --scale expects a number from -2 to 2, got 'nan'\n");
    expect_usage_error("--scale", "2.5", "prog: --scale expects a number from -2 to 2, got '2.5'\n");
}

/* A newline inside an argument is shown as \n: the error stays one line. */
Test(cli, an_error_with_a_newline_in_it_stays_one_line)
{
    expect_usage_error("--batch", "1\n2", "prog: --batch expects a whole number from 1 to 16, "
                       "got '1\\n2'\n");
    expect_usage_error("--bat\nch", "2", "prog: unknown option '--bat\\nch' (try --help)\n");
}

/* cli_parse_args returns what cli_parse would do: the same line in err,
 * cut to its length, or CLI_HELP for the caller to print the help. */
Test(cli, the_parser_without_exits_returns_the_same_line)
{
    opts = (Opts){.batch = 2};
    const CliOption options[] = {
        {"--batch", CLI_INT, &opts.batch, .min = 1, .max = 16, .metavar = "B", .help = "b"},
        {"--verbose", CLI_FLAG, &opts.verbose, .help = "say more"},
    };
    const CliTable table = {"prog", "A table under test.", CLI_COUNT(options), options};
    char err[CLI_ERR_LEN], small[12];
    char *bad[] = {"prog", "--verbose", "--batch", "17", NULL};
    cr_expect_eq(cli_parse_args(&table, 4, bad, err, sizeof err), CLI_ERROR);
    cr_expect_str_eq(err, "prog: --batch expects a whole number from 1 to 16, got '17'");
    cr_expect(opts.verbose, "options before the error are read");
    cr_expect_eq(opts.batch, 2, "the bad value is not stored");
    cr_expect_eq(cli_parse_args(&table, 4, bad, small, sizeof small), CLI_ERROR);
    cr_expect_str_eq(small, "prog: --bat");
    char *help[] = {"prog", "--help", "--batch", "17", NULL};
    cr_expect_eq(cli_parse_args(&table, 4, help, err, sizeof err), CLI_HELP);
    char *good[] = {"prog", "--batch", "16", NULL};
    cr_expect_eq(cli_parse_args(&table, 3, good, err, sizeof err), CLI_PARSED);
    cr_expect_eq(opts.batch, 16);
    long v = 0;
    cr_expect(cli_read_long("--n", "-3", -5, 5, &v, err, sizeof err));
    cr_expect_eq(v, -3);
    cr_expect_not(cli_read_long("--n", " 3", -5, 5, &v, err, sizeof err));
    cr_expect_eq(v, -3, "a refused number leaves the value as it was");
}

/* A heads row's .splits: the two values checked once both are read, in
 * either order, naming both flags; the default of an absent flag counts. */
Test(cli, a_heads_row_checks_that_it_splits_the_hiddens)
{
    int hiddens = 8, heads = 2;
    const CliOption options[] = {
        {"--heads", CLI_INT, &heads, .min = 1, .max = 64, .metavar = "H", .splits = &hiddens},
        {"--hiddens", CLI_INT, &hiddens, .min = 1, .max = 64, .metavar = "D"},
    };
    const CliTable table = {"prog", "A table under test.", CLI_COUNT(options), options};
    char err[CLI_ERR_LEN];
    char *bad[] = {"prog", "--heads", "3", NULL};
    cr_expect_eq(cli_parse_args(&table, 3, bad, err, sizeof err), CLI_ERROR);
    cr_expect_str_eq(err, "prog: --hiddens 8 does not divide by --heads 3: every head needs the "
                          "same size");
    char *later[] = {"prog", "--heads", "4", "--hiddens", "6", NULL};
    cr_expect_eq(cli_parse_args(&table, 5, later, err, sizeof err), CLI_ERROR);
    cr_expect_str_eq(err, "prog: --hiddens 6 does not divide by --heads 4: every head needs the "
                          "same size");
    char *good[] = {"prog", "--hiddens", "12", "--heads", "4", NULL};
    cr_expect_eq(cli_parse_args(&table, 5, good, err, sizeof err), CLI_PARSED);
    cr_expect(hiddens == 12 && heads == 4);
}

Test(cli, numbers_are_read_strictly)
{
    /* strtol and strtoull skip leading white space, so ' -5' once became
     * 2^64 - 5 as a seed; white space and a leading '+' are refused. */
    expect_usage_error("--seed", " -5",
                       "prog: --seed expects a whole number from 0 to 18446744073709551615, got ' -5'\n");
    expect_usage_error("--seed", "-1",
                       "prog: --seed expects a whole number from 0 to 18446744073709551615, got '-1'\n");
    expect_usage_error("--seed", "+3",
                       "prog: --seed expects a whole number from 0 to 18446744073709551615, got '+3'\n");
    expect_usage_error("--batch", " 3", "prog: --batch expects a whole number from 1 to 16, got ' 3'\n");
    expect_usage_error("--batch", "3 ", "prog: --batch expects a whole number from 1 to 16, got '3 '\n");
    expect_usage_error("--batch", "+3", "prog: --batch expects a whole number from 1 to 16, got '+3'\n");
    expect_usage_error("--scale", "\t1", "prog: --scale expects a number from -2 to 2, got '\t1'\n");
    long list[4];
    char err[CLI_ERR_LEN];
    cr_expect_eq(cli_read_long_list("--lens", "3,0,2", 0, 4, list, 4, err, sizeof err), 3);
    cr_expect(list[0] == 3 && list[1] == 0 && list[2] == 2);
    cr_expect_eq(cli_read_long_list("--lens", "3, 0", 0, 4, list, 4, err, sizeof err), -1);
    cr_expect_str_eq(err, "--lens expects comma-separated whole numbers from 0 to 4, got '3, 0'",
                     "the line without the program's name, for cli_fail to say");
    double d = 0;
    cr_expect(cli_read_double("--ms", "2.5", 0.001, 10, &d, err, sizeof err) && d == 2.5);
    cr_expect_not(cli_read_double("--ms", "nan", 0.001, 10, &d, err, sizeof err));
    cr_expect_str_eq(err, "--ms expects a number from 0.001 to 10, got 'nan'");
}

Test(cli, float_range_is_checked_after_rounding)
{
    /* The ends are compared as floats: 0.99 becomes 0.99000001f, the same
     * float as the range's end, and is in; 0.995 and 0.99999999 (1.0f) are out. */
    expect_usage_error("--dropout", "0.995", "prog: --dropout expects a number from 0 to 0.99, got '0.995'\n");
    expect_usage_error("--dropout", "0.99999999",
                       "prog: --dropout expects a number from 0 to 0.99, got '0.99999999'\n");
    char *argv[] = {"prog", "--dropout", "0.99", NULL};
    parse_args(argv);
    cr_expect_eq(opts.dropout, 0.99f);
}

Test(cli, help_lists_range_and_default_from_the_table)
{
    opts = (Opts){.batch = 2, .seed = 7, .dropout = 0.5f, .scale = 1.0};
    const CliOption options[] = {
        {"--batch", CLI_INT, &opts.batch, .min = 1, .max = 16, .metavar = "B", .help = "batch_size"},
        {"--scale", CLI_DOUBLE, &opts.scale, .min = -2, .max = 2, .metavar = "S",
         .help = "a scale\nover two lines"},
    };
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cli_print_help(&(CliTable){"prog", "A table under test.", CLI_COUNT(options), options}, out);
    fclose(out);
    cr_expect_str_eq(text, "usage: prog [options]\n"
                           "\n"
                           "A table under test.\n"
                           "\n"
                           "options:\n"
                           "  --batch B          batch_size, 1 to 16 (default 2)\n"
                           "  --scale S          a scale\n"
                           "                     over two lines, -2 to 2 (default 1)\n"
                           "  --help             this text\n");
    free(text);
}

/* --help and a mode end the parse without exiting: cli_parse returns the
 * status for main to return (0 after the help; the mode's own), and nothing
 * else is read. The child exits 10 + what it returned. */
static int mode_of_a_tool(int argc, char **argv)
{
    return argc == 3 && strcmp(argv[2], "5") == 0 ? 7 : 8;
}

static int parse_with_a_mode(char **argv)
{
    int batch = 2;
    const CliOption options[] = {
        {"--batch", CLI_INT, &batch, .min = 1, .max = 16, .metavar = "B", .help = "batch_size"},
        {"--tool", CLI_MODE, .tool = "tool", .mode = mode_of_a_tool, .help = "a mode"},
    };
    int argc = 0;
    while (argv[argc] != NULL)
        argc++;
    if (freopen("/dev/null", "w", stdout) == NULL)
        exit(3);
    return cli_parse(&(CliTable){"prog", "A table under test.", CLI_COUNT(options), options},
                     argc, argv);
}

static void parse_help(void)
{
    /* --help before a value out of range: the help, not the error */
    char *argv[] = {"prog", "--help", "--batch", "17", NULL};
    exit(10 + parse_with_a_mode(argv));
}

static void parse_mode(void)
{
    char *argv[] = {"prog", "--tool", "5", NULL};
    exit(10 + parse_with_a_mode(argv));
}

Test(cli, help_and_a_mode_return_the_status_for_main)
{
    int status;
    char *err = stderr_of(parse_help, &status);
    cr_expect_eq(status, 10, "--help: 0 returned, got %d", status - 10);
    cr_expect_str_eq(err, "");
    free(err);
    err = stderr_of(parse_mode, &status);
    cr_expect_eq(status, 17, "the mode's status returned, got %d", status - 10);
    cr_expect_str_eq(err, "");
    free(err);
}

/* Standard output that cannot be written: one line, status 1. */
static void write_to_full_device(void)
{
    if (freopen("/dev/full", "w", stdout) == NULL)
        exit(3);
    char *argv[] = {"prog", NULL};
    parse_args(argv);
    for (int i = 0; i < 10000; i++)
        printf("line %d of output that cannot be written\n", i);
    exit(0);
}

Test(cli, output_that_cannot_be_written_is_an_error)
{
    int status;
    char *err = stderr_of(write_to_full_device, &status);
    cr_expect_eq(status, 1);
    cr_expect_str_eq(err, "prog: cannot write the output: No space left on device\n");
    free(err);
}
