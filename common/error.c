/* error.c - stopping with one line, and allocation that cannot fail
 * silently. See error.h. */
#define _POSIX_C_SOURCE 200809L
#include "error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "platform.h"

static const char *the_program;   /* NULL until a program names itself */

const char *program_name(const char *name)
{
    if (the_program == NULL)
        the_program = name;
    return the_program;
}

/* text as it goes into the line: a character that would end or break it
 * (a newline, a carriage return, a vertical tab, a form feed), which a
 * user's argument or file name can hold, written as an escape ("\n",
 * "\x0b"), so that one error is one line. */
static char *one_line(const char *text)
{
    char *line = malloc(4 * strlen(text) + 1);
    if (line == NULL)
        return NULL;
    char *at = line;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n')
            at += sprintf(at, "\\n");
        else if (*p == '\r')
            at += sprintf(at, "\\r");
        else if (*p == '\v' || *p == '\f')
            at += sprintf(at, "\\x%02x", *p);
        else
            *at++ = (char)*p;
    }
    *at = '\0';
    return line;
}

/* "name: reason" into out. When the two do not fit, the reason (the part
 * that says what is wrong) is kept whole and the name loses its middle:
 * "/a/very/long/pa...ory/queries.npy: not a .npy file". */
static void join_name_and_reason(char *out, size_t out_len, const char *name, const char *reason)
{
    const size_t name_len = strlen(name), reason_len = strlen(reason);
    if (name_len + 2 + reason_len < out_len || out_len < reason_len + 2 + 16) {
        snprintf(out, out_len, "%s: %s", name, reason);
        return;
    }
    const size_t room = out_len - 1 - reason_len - 2 - 3;   /* for the name, less "..." */
    const size_t head = room / 2, tail = room - head;
    snprintf(out, out_len, "%.*s...%s: %s", (int)head, name, name + name_len - tail, reason);
}

int error_vformat(char *err, size_t err_len, const char *name, const char *fmt, va_list args)
{
    va_list again;
    va_copy(again, args);
    const int len = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    char *text = malloc(len > 0 ? (size_t)len + 1 : 1);
    if (text != NULL)
        vsnprintf(text, len > 0 ? (size_t)len + 1 : 1, fmt, args);
    char *reason = one_line(text ? text : "out of memory formatting an error");
    char *who = one_line(name != NULL ? name : "");
    free(text);
    if (reason == NULL || who == NULL) {   /* no memory even for the line: the bare words */
        free(reason);
        free(who);
        reason = NULL;
        who = NULL;
    }
    const char *why = reason ? reason : fmt, *whom = who ? who : (name ? name : "");
    if (err != NULL) {
        if (err_len > 0 && *whom)
            join_name_and_reason(err, err_len, whom, why);
        else if (err_len > 0)
            snprintf(err, err_len, "%s", why);
    } else {
        fflush(stdout);
        /* the program's name first, once: a program's own line names it already */
        if (the_program != NULL && (name == NULL || strcmp(name, the_program) != 0))
            fprintf(stderr, "%s: ", the_program);
        fprintf(stderr, *whom ? "%s: %s\n" : "%s%s\n", whom, why);
    }
    free(reason);
    free(who);
    return -1;
}

int error_format(char *err, size_t err_len, const char *name, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    error_vformat(err, err_len, name, fmt, args);
    va_end(args);
    return -1;
}

_Noreturn void die(const char *func, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    error_vformat(NULL, 0, func, fmt, args);
    va_end(args);
    exit(1);
}

int report_error(const char *func, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    error_vformat(NULL, 0, func, fmt, args);
    va_end(args);
    return -1;
}

int report_failure(const char *func, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    error_vformat(NULL, 0, func, fmt, args);
    va_end(args);
    return 1;
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

/* The smaller of the physical memory and the address-space limit. */
size_t memory_available(const char **what)
{
    const double memory = platform_memory_bytes();
    size_t bytes = SIZE_MAX;
    *what = "no limit known";
    if (memory > 0.0 && memory < (double)SIZE_MAX) {
        bytes = (size_t)memory;
        *what = "the machine's memory";
    }
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < bytes) {
        bytes = (size_t)limit.rlim_cur;
        *what = "the memory limit (ulimit -v)";
    }
    return bytes;
}

/* bytes_text with digits after the point (none for plain bytes) */
static void bytes_text_digits(char *buf, size_t len, double bytes, int digits)
{
    static const char *const units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    while (bytes >= 1000.0 && u < 6) {
        bytes /= 1000.0;
        u++;
    }
    snprintf(buf, len, "%.*f %s", u == 0 ? 0 : digits, bytes, units[u]);
}

void bytes_text(char *buf, size_t len, double bytes)
{
    bytes_text_digits(buf, len, bytes, 1);
}

int memory_check(double need, const char *detail, const char *hint, char *err, size_t err_len)
{
    /* need counts the tensors; the program itself, its libraries, stacks
     * and stdio buffers come on top (about 2 to 4 MB resident and mapped
     * here, more with threads): measured peaks of small runs passed the
     * tensors alone by that much */
    need += MEMORY_BASE_BYTES;
    const char *what;
    const double have = (double)memory_available(&what);
    if (need <= have)
        return 0;
    /* one digit, or as many more as it takes for "needs about 614.4 MB,
     * more than 614.4 MB" to show the two apart */
    char need_text[32], have_text[32];
    for (int digits = 1; digits == 1 || (digits <= 4 && strcmp(need_text, have_text) == 0);
         digits++) {
        bytes_text_digits(need_text, sizeof need_text, need, digits);
        bytes_text_digits(have_text, sizeof have_text, have, digits);
    }
    return error_format(err, err_len, NULL, "this run needs about %s of memory%s%s%s, more "
                        "than %s, %s: %s", need_text, detail ? " (" : "", detail ? detail : "",
                        detail ? ")" : "", what, have_text, hint);
}

void memory_require(double need, const char *detail, const char *hint)
{
    char err[512];
    if (memory_check(need, detail, hint, err, sizeof err) == 0)
        return;
    die(NULL, "%s", err);
}
