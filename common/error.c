/* error.c - stopping with one line, and allocation that cannot fail
 * silently. See error.h. */
#include "error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *program_name;   /* NULL until a program names itself */

void error_set_program(const char *prog)
{
    program_name = prog;
}

void error_prefix(void)
{
    if (program_name != NULL)
        fprintf(stderr, "%s: ", program_name);
}

_Noreturn void die(const char *func, const char *fmt, ...)
{
    va_list args;
    fflush(stdout);
    error_prefix();
    fprintf(stderr, "%s: ", func);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(1);
}

void *checked_calloc(const char *func, size_t count, size_t elem)
{
    if (elem != 0 && count > SIZE_MAX / elem)
        die(func, "cannot allocate %zu x %zu bytes: the size overflows", count, elem);
    void *p = calloc(count ? count : 1, elem ? elem : 1);
    if (p == NULL)
        die(func, "out of memory allocating %zu bytes (%.1f MB)",
            count * elem, (double)(count * elem) / 1e6);
    return p;
}

void *checked_malloc(const char *func, size_t count, size_t elem)
{
    if (elem != 0 && count > SIZE_MAX / elem)
        die(func, "cannot allocate %zu x %zu bytes: the size overflows", count, elem);
    void *p = malloc(count * elem > 0 ? count * elem : 1);
    if (p == NULL)
        die(func, "out of memory allocating %zu bytes (%.1f MB)",
            count * elem, (double)(count * elem) / 1e6);
    return p;
}
