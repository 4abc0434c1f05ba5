/* cli.c - option parsing with one clear error line. See cli.h. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
{
    va_list args;
    fflush(stdout);
    fprintf(stderr, "%s: ", prog);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(EXIT_USAGE);
}

bool cli_is(const char *arg, const char *flag)
{
    return strcmp(arg, flag) == 0;
}

const char *cli_value(const char *prog, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        cli_fail(prog, "%s needs a value (try --help)", argv[*i]);
    *i += 1;
    return argv[*i];
}

long cli_long(const char *prog, const char *flag, const char *text, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max)
        cli_fail(prog, "%s expects a whole number from %ld to %ld, got '%s'",
                 flag, min, max, text);
    return v;
}

uint64_t cli_u64(const char *prog, const char *flag, const char *text)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    /* strtoull accepts "-1" and wraps it; a seed is never negative. */
    if (end == text || *end != '\0' || errno == ERANGE || text[0] == '-' || text[0] == '+')
        cli_fail(prog, "%s expects a whole number from 0 to %llu, got '%s'",
                 flag, (unsigned long long)UINT64_MAX, text);
    return (uint64_t)v;
}

double cli_double(const char *prog, const char *flag, const char *text, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || v < min || v > max)
        cli_fail(prog, "%s expects a number from %g to %g, got '%s'", flag, min, max, text);
    return v;
}

int cli_long_list(const char *prog, const char *flag, const char *text,
                  long min, long max, long *out, int max_count)
{
    int count = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno == ERANGE || v < min || v > max || (*end != ',' && *end != '\0'))
            cli_fail(prog, "%s expects comma-separated whole numbers from %ld to %ld, got '%s'",
                     flag, min, max, text);
        if (count == max_count)
            cli_fail(prog, "%s takes at most %d numbers, got '%s'", flag, max_count, text);
        out[count++] = v;
        if (*end == '\0')
            return count;
        p = end + 1;
    }
}

_Noreturn void cli_unknown(const char *prog, const char *arg)
{
    cli_fail(prog, "unknown option '%s' (try --help)", arg);
}

void cli_check_dir(const char *prog, const char *flag, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        cli_fail(prog, "%s: directory '%s' does not exist", flag, dir);
    if (!S_ISDIR(st.st_mode))
        cli_fail(prog, "%s: '%s' is not a directory", flag, dir);
    if (access(dir, W_OK) != 0)
        cli_fail(prog, "%s: directory '%s' is not writable", flag, dir);
}
