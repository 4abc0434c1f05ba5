/* error.c - one line for every failure. See error.h. */
#define _POSIX_C_SOURCE 200809L
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The reason, made one line, and the name, or NULL for either when there
 * was no memory even for that; *reason_out and *who_out are freed by the
 * caller. */
static void line_parts(const char *name, const char *fmt, va_list args, char **reason_out,
                       char **who_out)
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
    *reason_out = reason;
    *who_out = who;
}

/* The line on stderr: the program's name first, when one is named, then
 * "name: reason" (the reason alone when name is NULL). */
static void say(const char *name, const char *fmt, va_list args)
{
    char *reason, *who;
    line_parts(name, fmt, args, &reason, &who);
    const char *why = reason ? reason : fmt, *whom = who ? who : (name ? name : "");
    fflush(stdout);
    if (the_program != NULL)
        fprintf(stderr, "%s: ", the_program);
    fprintf(stderr, *whom ? "%s: %s\n" : "%s%s\n", whom, why);
    free(reason);
    free(who);
}

/* error_format's work, on a va_list */
static void format_line(char *err, size_t err_len, const char *name, const char *fmt,
                        va_list args)
{
    char *reason, *who;
    line_parts(name, fmt, args, &reason, &who);
    const char *why = reason ? reason : fmt, *whom = who ? who : (name ? name : "");
    if (err_len > 0 && *whom)
        join_name_and_reason(err, err_len, whom, why);
    else if (err_len > 0)
        snprintf(err, err_len, "%s", why);
    free(reason);
    free(who);
}

int error_format(char *err, size_t err_len, const char *name, const char *fmt, ...)
{
    if (err == NULL)
        die("no buffer for the line (format \"%s\")", fmt);
    va_list args;
    va_start(args, fmt);
    format_line(err, err_len, name, fmt, args);
    va_end(args);
    return -1;
}

_Noreturn void die_in(const char *function, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    say(function, fmt, args);
    va_end(args);
    abort();   /* a bug: the stack stays for a debugger or a core file */
}

_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
{
    program_name(prog);
    va_list args;
    va_start(args, fmt);
    say(NULL, fmt, args);
    va_end(args);
    exit(EXIT_USAGE);
}

int fail(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    say(NULL, fmt, args);
    va_end(args);
    return 1;
}
