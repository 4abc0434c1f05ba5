/* cli.c - option parsing with one clear error line. See cli.h. */
#define _POSIX_C_SOURCE 200809L
#include "io/cli.h"

#include "error.h"
#include "heads.h"
#include "io/fileset.h"
#include "memory.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- one error line ------------------------------------------------------- */

/* A usage error, the line into err (error.h's error_format); returns false,
 * for a reader to return. */
static bool refuse(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse(char *err, size_t err_len, const char *fmt, ...)
{
    va_list args, again;
    va_start(args, fmt);
    va_copy(again, args);
    const int len = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    char *reason = checked_malloc(len > 0 ? (size_t)len + 1 : 1, 1);
    vsnprintf(reason, len > 0 ? (size_t)len + 1 : 1, fmt, args);
    va_end(args);
    error_format(err, err_len, NULL, "%s", reason);
    free(reason);
    return false;
}

static bool cli_is(const char *arg, const char *flag)
{
    return strcmp(arg, flag) == 0;
}

/* ---- numbers --------------------------------------------------------------- */

/* One rule for every number on the command line: no white space anywhere
 * (strtol would skip it, so ' -5' slipped past the sign check of a seed)
 * and no leading '+'. A '-' is then up to the range. */
static bool plain_number_text(const char *text)
{
    if (text[0] == '\0' || text[0] == '+')
        return false;
    for (const char *p = text; *p; p++)
        if (isspace((unsigned char)*p))
            return false;
    return true;
}

bool cli_read_long(const char *flag, const char *text, long min, long max,
                   long *out, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!plain_number_text(text) || end == text || *end != '\0' || errno == ERANGE || v < min || v > max)
        return refuse(err, err_len, "%s expects a whole number from %ld to %ld, got '%s'",
                         flag, min, max, text);
    *out = v;
    return true;
}

static bool cli_read_u64(const char *flag, const char *text, uint64_t *out,
                  char *err, size_t err_len)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    /* strtoull accepts "-1" and wraps it; a seed is never negative. */
    if (!plain_number_text(text) || end == text || *end != '\0' || errno == ERANGE ||
        text[0] == '-')
        return refuse(err, err_len, "%s expects a whole number from 0 to %llu, got '%s'",
                         flag, (unsigned long long)UINT64_MAX, text);
    *out = (uint64_t)v;
    return true;
}

/* A real number in [min, max], into *as_double, or into *as_float: then
 * the float that will be used is the one checked, against the range's
 * ends as floats: 0.99999999 rounds to 1.0f, which a range ending at 0.99
 * must refuse, while 0.99 itself (0.99000001f) fits. A word, NaN or an
 * infinity gets the range in its message. */
static bool read_real(const char *flag, const char *text, double min,
                      double max, double *as_double, float *as_float, char *err, size_t err_len)
{
    char *end;
    const double v = strtod(text, &end);
    const float f = (float)v;
    const bool fits = as_float ? isfinite(f) && f >= (float)min && f <= (float)max
                               : isfinite(v) && v >= min && v <= max;
    if (!plain_number_text(text) || end == text || *end != '\0' || !fits)
        return refuse(err, err_len, "%s expects a number from %g to %g, got '%s'",
                         flag, min, max, text);
    if (as_float)
        *as_float = f;
    else
        *as_double = v;
    return true;
}

bool cli_read_double(const char *flag, const char *text, double min, double max, double *out,
                     char *err, size_t err_len)
{
    return read_real(flag, text, min, max, out, NULL, err, err_len);
}

int cli_read_long_list(const char *flag, const char *text, long min,
                       long max, long *out, int max_count, char *err, size_t err_len)
{
    int count = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (!plain_number_text(text) || end == p || errno == ERANGE || v < min || v > max ||
            (*end != ',' && *end != '\0')) {
            refuse(err, err_len, "%s expects comma-separated whole numbers from %ld "
                      "to %ld, got '%s'", flag, min, max, text);
            return -1;
        }
        if (count == max_count) {
            refuse(err, err_len, "%s takes at most %d numbers, got '%s'", flag,
                      max_count, text);
            return -1;
        }
        out[count++] = v;
        if (*end == '\0')
            return count;
        p = end + 1;
    }
}

static bool cli_read_dir(const char *flag, const char *dir, char *err,
                  size_t err_len)
{
    const size_t len = 2 * strlen(dir) + 256;   /* the reason names dir, whole */
    char *reason = checked_malloc(len, 1);
    const bool fits = fileset_check_dir(dir, reason, len) == 0;
    if (!fits)
        refuse(err, err_len, "%s: %s", flag, reason);
    free(reason);
    return fits;
}

/* An existing directory a program reads from (CLI_FROM_DIR) */
static bool cli_read_from_dir(const char *flag, const char *dir, char *err, size_t err_len)
{
    struct stat st;
    if (stat(dir, &st) != 0 && errno == ENOENT)
        return refuse(err, err_len, "%s: directory '%s' does not exist", flag, dir);
    if (stat(dir, &st) != 0)
        return refuse(err, err_len, "%s: cannot read '%s': %s", flag, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return refuse(err, err_len, "%s: '%s' is not a directory", flag, dir);
    if (access(dir, R_OK | X_OK) != 0)
        return refuse(err, err_len, "%s: directory '%s' cannot be read", flag, dir);
    return true;
}

/* ---- the option table ---------------------------------------------------- */

static const CliOption *find_option(const CliTable *table, const char *arg)
{
    for (int i = 0; i < table->count; i++)
        if (cli_is(arg, table->options[i].name))
            return &table->options[i];
    return NULL;
}

/* One option's value from text into its target, with the range check.
 * The target changes only when the value is good. */
static bool set_option(const CliOption *o, const char *text, char *err,
                       size_t err_len)
{
    switch (o->kind) {
    case CLI_INT: {
        long v;
        if (!cli_read_long(o->name, text, (long)o->min, (long)o->max, &v, err, err_len))
            return false;
        *(int *)o->target = (int)v;
        return true;
    }
    case CLI_U64:
        return cli_read_u64(o->name, text, (uint64_t *)o->target, err, err_len);
    case CLI_DOUBLE:
    case CLI_FLOAT:
        return read_real(o->name, text, o->min, o->max, o->target,
                         o->kind == CLI_FLOAT ? o->target : NULL, err, err_len);
    case CLI_STRING:
    case CLI_DIR:
    case CLI_FROM_DIR:
        *(const char **)o->target = text;
        return true;
    case CLI_FLAG:
        *(bool *)o->target = true;
        return true;
    case CLI_MODE:   /* parse_args refuses it before it comes here */
        return false;
    }
    return true;
}

/* Standard output is checked like a file, as coreutils do: buffered
 * output that cannot be written (a full disk, a closed descriptor) ends the
 * program with one line and status 1 instead of a silent loss. A reader that
 * closed the pipe early stops the program through SIGPIPE, quietly. The
 * line is said once: a program that stopped at cli_stdout_check exits
 * without a second one. */
static bool stdout_reported = false;

int cli_stdout_check(void)
{
    if (stdout_reported)
        return 1;
    /* A write that failed earlier left the error flag set, but its errno
     * may since have been overwritten by any other call. The descriptor is
     * asked once more with an empty write, which reports a full device or
     * a closed descriptor again; where it cannot tell, "write error". */
    bool failed = false;
    int error = 0;
    if (ferror(stdout)) {
        failed = true;
        error = write(STDOUT_FILENO, "", 0) < 0 ? errno : 0;
    }
    errno = 0;
    if (fflush(stdout) != 0 && !failed) {
        failed = true;
        error = errno;
    }
    if (!failed)
        return 0;
    stdout_reported = true;
    return fail("cannot write the output: %s", error != 0 ? strerror(error) : "write error");
}

static void close_stdout(void)
{
    const int status = cli_stdout_check();
    if (status != 0)
        _exit(status);   /* at exit, no caller to return it to */
}

/* The heads option's value splits the hiddens option's (heads.h), the two
 * named by their flags. */
static bool heads_option_splits(const CliTable *table, const CliOption *heads, char *err,
                                size_t err_len)
{
    const char *hiddens_name = "num_hiddens";
    for (int i = 0; i < table->count; i++)
        if (table->options[i].target == heads->splits)
            hiddens_name = table->options[i].name;
    char why[CLI_ERR_LEN];
    if (heads_split(*heads->splits, *(const int *)heads->target, hiddens_name, heads->name, why,
                    sizeof why))
        return true;
    refuse(err, err_len, "%s", why);
    return false;
}

/* cli_parse_args, the line in err without the program's name */
static CliStatus parse_args(const CliTable *table, int argc, char **argv, char *err,
                            size_t err_len)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--help"))
            return CLI_HELP;
        const CliOption *o = find_option(table, argv[i]);
        if (o == NULL) {
            refuse(err, err_len, "unknown option '%s' (try --help)", argv[i]);
            return CLI_ERROR;
        }
        if (o->kind == CLI_MODE) {
            refuse(err, err_len, "%s is done by the tool %s (try --help)", argv[i],
                      o->tool);
            return CLI_ERROR;
        }
        const char *text = NULL;
        if (o->kind != CLI_FLAG) {
            if (i + 1 >= argc) {
                refuse(err, err_len, "%s needs a value (try --help)", argv[i]);
                return CLI_ERROR;
            }
            text = argv[++i];
        }
        if (!set_option(o, text, err, err_len))
            return CLI_ERROR;
        if (o->given != NULL)
            *o->given = true;
    }
    /* Directories are checked once every option is read, so a later typo
     * is reported the same way whatever the directory. */
    for (int i = 0; i < table->count; i++) {
        const CliOption *o = &table->options[i];
        const char *dir = o->kind == CLI_DIR || o->kind == CLI_FROM_DIR
                              ? *(const char **)o->target : NULL;
        if (dir != NULL && !(o->kind == CLI_DIR ? cli_read_dir(o->name, dir, err, err_len)
                                                : cli_read_from_dir(o->name, dir, err, err_len)))
            return CLI_ERROR;
    }
    for (int i = 0; i < table->count; i++)
        if (table->options[i].splits != NULL &&
            !heads_option_splits(table, &table->options[i], err, err_len))
            return CLI_ERROR;
    return CLI_PARSED;
}

/* The mode argv asks for: the first of the table's CLI_MODE flags that
 * stands in argv as an option, before any --help; NULL when there is none.
 * argv is read as the parser reads it, so a value is never taken for an
 * option: in "--valid-lens --keys", --keys is the value of --valid-lens.
 * A word the table does not know (an option of the mode's own, "--batch",
 * or its value) is passed over; the mode's parser, or the program's, reads
 * it in turn. */
static const CliOption *mode_asked(const CliTable *table, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--help"))
            return NULL;
        const CliOption *o = find_option(table, argv[i]);
        if (o != NULL && o->kind == CLI_MODE)
            return o;
        if (o != NULL && o->kind != CLI_FLAG)
            i++;   /* its value */
    }
    return NULL;
}

CliStatus cli_parse_args(const CliTable *table, int argc, char **argv, char *err,
                         size_t err_len)
{
    char reason[CLI_ERR_LEN] = "";
    const CliStatus status = parse_args(table, argc, argv, reason, sizeof reason);
    if (status == CLI_ERROR)
        error_format(err, err_len, table->prog, "%s", reason);
    else if (err_len > 0)
        error_format(err, err_len, NULL, "%s", "");
    return status;
}

int cli_parse(const CliTable *table, int argc, char **argv)
{
    program_name(table->prog);
    const CliOption *mode = mode_asked(table, argc, argv);
    if (mode != NULL)
        return mode->mode(argc, argv);
    signals_install(table->prog);
    atexit(close_stdout);
    size_t len = CLI_ERR_LEN;   /* room for every word of argv in the line, escaped */
    for (int i = 1; i < argc; i++)
        len += 4 * strlen(argv[i]);
    char *reason = checked_malloc(len, 1);
    const CliStatus status = parse_args(table, argc, argv, reason, len);
    if (status == CLI_ERROR)
        cli_fail(table->prog, "%s", reason);
    free(reason);
    if (status == CLI_HELP) {
        cli_print_help(table, stdout);
        return 0;
    }
    return CLI_RUN;
}

/* "1 to 16", "0 to 0.99" */
static void format_range(char *buf, size_t len, const CliOption *o)
{
    if (o->kind == CLI_INT)
        snprintf(buf, len, "%ld to %ld", (long)o->min, (long)o->max);
    else
        snprintf(buf, len, "%g to %g", o->min, o->max);
}

static void format_default(char *buf, size_t len, const CliOption *o)
{
    buf[0] = '\0';
    if (o->default_text != NULL) {
        snprintf(buf, len, "%s", o->default_text);
        return;
    }
    switch (o->kind) {
    case CLI_INT: snprintf(buf, len, "%d", *(const int *)o->target); break;
    case CLI_U64: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)o->target); break;
    case CLI_DOUBLE: snprintf(buf, len, "%g", *(const double *)o->target); break;
    case CLI_FLOAT: snprintf(buf, len, "%g", (double)*(const float *)o->target); break;
    case CLI_STRING:
    case CLI_DIR:
    case CLI_FROM_DIR: {
        const char *s = *(const char *const *)o->target;
        if (s != NULL)
            snprintf(buf, len, "%s", s);
        break;
    }
    case CLI_FLAG:
    case CLI_MODE: break;
    }
}

/* text, each '\n' followed by the indentation of the help column */
static void put_indented(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fprintf(out, "  %-18s ", "");
    }
}

/* The modes that are tools of their own, one line each: "  NAME (FLAGS): HELP". */
static void print_tools(const CliTable *table, FILE *out)
{
    bool header = false;
    for (int i = 0; i < table->count; i++) {
        const CliOption *o = &table->options[i];
        if (o->kind != CLI_MODE || o->help == NULL)
            continue;
        if (!header)
            fputs("\ntools beside this program, run when one of their options is given:\n", out);
        header = true;
        fprintf(out, "  %s (", o->tool);
        const char *sep = "";
        for (int j = 0; j < table->count; j++)
            if (table->options[j].kind == CLI_MODE && strcmp(table->options[j].tool, o->tool) == 0) {
                fprintf(out, "%s%s", sep, table->options[j].name);
                sep = ", ";
            }
        fprintf(out, "): %s; see its --help\n", o->help);
    }
}

void cli_print_help(const CliTable *table, FILE *out)
{
    fprintf(out, "usage: %s [options]\n\n%s\n\noptions:\n", table->prog, table->summary);
    for (int i = 0; i <= table->count; i++) {
        const CliOption help = {"--help", CLI_FLAG, NULL, .help = "this text"};
        const CliOption *o = i < table->count ? &table->options[i] : &help;
        if (o->kind == CLI_MODE)
            continue;
        char left[64], range[64] = "", dflt[256];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        if (o->kind == CLI_INT || o->kind == CLI_DOUBLE || o->kind == CLI_FLOAT)
            format_range(range, sizeof range, o);
        format_default(dflt, sizeof dflt, o);
        fprintf(out, "  %-18s ", left);
        put_indented(out, o->help ? o->help : "");
        if (range[0])
            fprintf(out, ", %s", range);
        if (dflt[0]) {
            fputs(" (default ", out);
            put_indented(out, dflt);
            fputc(')', out);
        }
        fputc('\n', out);
    }
    print_tools(table, out);
}

/* The checks of one program run: a program is one process, so one count. */
static int failed_checks = 0, passed_checks = 0;

void cli_check(bool holds, const char *what)
{
    if (holds)
        passed_checks++;
    else
        failed_checks += fail("check failed: %s", what);   /* fail's 1 counts it */
}

int cli_checks_status(void)
{
    if (failed_checks == 0) {
        /* success is said too, not left to the silence of stderr */
        if (passed_checks == 1)
            printf("check: the self-check passed\n");
        else if (passed_checks > 1)
            printf("check: all %d self-checks passed\n", passed_checks);
        return 0;
    }
    return fail("%d %s failed", failed_checks, plural(failed_checks, "check", "checks"));
}
