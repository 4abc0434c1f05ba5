/*
 * test_error.c - the two ways to fail (common/error.h) and memory that is
 * never missing silently (common/memory.h): what each prints, what status
 * each gives, and who is named.
 *
 * Each case runs in a child process (stderr_of, helpers.h), so the program
 * name one case sets does not reach another.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "helpers.h"
#include "io/cli.h"
#include "memory.h"
#include "tensor.h"

/* ---- fail: the line, and the status returned --------------------------------- */

static void fail_unnamed(void)
{
    exit(fail("%d of %d files could not be read", 2, 3) == 1 ? 7 : 8);
}

static void fail_named(void)
{
    program_name("multihead");
    program_name("layer_files");   /* a mode asks later: the program keeps its name */
    exit(fail("%s: not a .npy file", "in/queries.npy") + 40);
}

static void fail_with_newline(void)
{
    program_name("train");
    exit(fail("cannot read 'a\nb': no such file"));
}

Test(error, fail_prints_one_line_and_returns_1)
{
    int status;
    char *err = stderr_of(fail_unnamed, &status);
    cr_expect_eq(status, 7, "fail returns 1 (the child exits 7 when it does): got %d", status);
    cr_expect_str_eq(err, "2 of 3 files could not be read\n");
    free(err);

    err = stderr_of(fail_named, &status);
    cr_expect_eq(status, 41, "fail's status passed on as it is: got %d", status);
    cr_expect_str_eq(err, "multihead: in/queries.npy: not a .npy file\n",
                     "the program's name first, the first name given");
    free(err);

    err = stderr_of(fail_with_newline, &status);
    cr_expect_eq(status, 1);
    cr_expect_str_eq(err, "train: cannot read 'a\\nb': no such file\n",
                     "a newline in the reason is written as an escape");
    free(err);
}

/* ---- die: a bug, named by its function ---------------------------------------- */

static void masked_softmax(void)
{
    program_name("attention");
    die("valid_lens has %d rows, expected %d", 3, 2);
}

static void before_a_name(void)
{
    die("a state that cannot be");
}

/* a check (tensor_check_shape) names itself, and says what and both shapes */
static void multihead_forward(void)
{
    program_name("multihead");
    Tensor *x = tensor_zeros(SHAPE(2, 3));
    tensor_check_shape("queries", x, SHAPE(2, 4));
}

Test(error, die_names_the_program_and_the_function_and_exits_1)
{
    expect_stops_with(masked_softmax, "attention: masked_softmax: valid_lens has 3 rows, "
                      "expected 2\n");
    expect_stops_with(before_a_name, "before_a_name: a state that cannot be\n");
    char *said = NULL;
    int status;
    said = stderr_of(multihead_forward, &status);
    cr_expect_eq(status, 1);
    cr_expect_str_eq(said ? said : "(none)", "multihead: tensor_check_shape: queries expected "
                     "shape (2, 4), got (2, 3)\n");
    free(said);
}

/* ---- error_format: the line in a buffer, for a caller that says it ----------- */

static void format_into_a_buffer(void)
{
    program_name("decode");
    char err[64];
    exit(-error_format(err, sizeof err, "tokens.npy", "holds %d tokens", 9));
}

Test(error, error_format_keeps_the_reason_whole_and_says_nothing)
{
    int status;
    char *said = stderr_of(format_into_a_buffer, &status);
    cr_expect_eq(status, 1, "error_format returns -1 (the child exits with 1): got %d", status);
    cr_expect_str_eq(said ? said : "(unreadable)", "", "with a buffer, nothing on stderr");
    free(said);

    char err[64];
    cr_expect_eq(error_format(err, sizeof err, "dir/queries.npy", "shape (%d, %d)", 2, 3), -1);
    cr_expect_str_eq(err, "dir/queries.npy: shape (2, 3)");

    /* too long for the buffer: the name loses its middle, not the reason */
    char name[200];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    memcpy(name, "/start/", 7);
    memcpy(name + sizeof name - 13, "/queries.npy", 12);   /* before the final NUL */
    error_format(err, sizeof err, name, "not a .npy file");
    cr_expect_eq(strlen(err), sizeof err - 1, "the buffer filled: %s", err);
    cr_expect(strncmp(err, "/start/", 7) == 0, "the name's start stays: %s", err);
    cr_expect(strstr(err, "...") != NULL, "the cut is marked: %s", err);
    const char *tail = "ies.npy: not a .npy file";
    cr_expect_str_eq(err + strlen(err) - strlen(tail), tail, "the reason whole: %s", err);

    error_format(err, sizeof err, NULL, "line one\nline two");
    cr_expect_str_eq(err, "line one\\nline two", "one line, without a name");
}

static void format_without_buffer(void)
{
    program_name("decode");
    exit(7 - error_format(NULL, 0, "tokens.npy", "holds %d tokens", 9));
}

Test(error, error_format_without_a_buffer_is_a_bug)
{
    int status;
    char *err = stderr_of(format_without_buffer, &status);
    cr_expect_eq(status, 1, "die's status, not a line said some other way: got %d", status);
    cr_expect_str_eq(err, "decode: error_format: no buffer for the line (format \"holds %d "
                     "tokens\")\n");
    free(err);
}

/* ---- cli_fail: a wrong command line, exit 2 ----------------------------------- */

static void usage_error(void)
{
    cli_fail("relative_files", "--offset %d reaches position %d", 5, 16777216);
}

static void usage_error_in_a_mode(void)
{
    program_name("relative_positions");   /* the program that runs the tool as a mode */
    cli_fail("relative_files", "--from needs --to DIR");
}

Test(error, cli_fail_says_it_in_fails_words_and_exits_2)
{
    int status;
    char *err = stderr_of(usage_error, &status);
    cr_expect_eq(status, 2);
    cr_expect_str_eq(err, "relative_files: --offset 5 reaches position 16777216\n",
                     "prog names the program when nothing named it before");
    free(err);
    err = stderr_of(usage_error_in_a_mode, &status);
    cr_expect_eq(status, 2);
    cr_expect_str_eq(err, "relative_positions: --from needs --to DIR\n",
                     "a mode's line reads as its program's, the tool not named again");
    free(err);
}

/* ---- checked_malloc: a buffer that cannot be had stops the program ------------ */

static void ask_for_too_much(void)
{
    program_name("cost");
    char *p = checked_malloc(SIZE_MAX / 2 + 1, 2);   /* overflows size_t */
    p[0] = 1;
}

static void ask_for_nothing(void)
{
    int *a = checked_malloc(0, sizeof(int)), *b = checked_calloc(0, sizeof(int));
    const int status = a != NULL && b != NULL ? 0 : 3;   /* each a valid pointer to free */
    free(a);
    free(b);
    exit(status);
}

Test(error, checked_allocations_stop_naming_the_bytes)
{
    char expected[160];
    snprintf(expected, sizeof expected, "cost: checked_malloc: cannot allocate %zu x 2 "
             "bytes: the size overflows\n", SIZE_MAX / 2 + 1);
    expect_stops_with(ask_for_too_much, expected);

    /* (memory the machine does not have is refused the same way, naming the
     * bytes; the sanitizers' allocator stops first, so it is not asked here) */
    int status;
    char *err = stderr_of(ask_for_nothing, &status);
    cr_expect_eq(status, 0, "0 bytes: a pointer, not an error (%s)", err ? err : "");
    free(err);
}

/* ---- memory_check and memory_require: a run larger than the machine ----------- */

static void require_too_much(void)
{
    program_name("multihead");
    if (memory_require(1e6, "a megabyte", "none") != 0)
        exit(6);
    exit(memory_require(1e30, "the attention weights", "use fewer keys") + 4);
}

Test(error, memory_require_returns_fails_status)
{
    char err[256];
    cr_expect_eq(memory_check(1e6, NULL, "hint", err, sizeof err), 0, "a megabyte fits");
    cr_expect_eq(memory_check(1e30, "two matrices", "use a smaller --cost-max", err, sizeof err),
                 -1);
    cr_expect(strstr(err, "this run needs about ") == err, "%s", err);
    cr_expect(strstr(err, " (two matrices), more than ") != NULL, "%s", err);
    cr_expect(strstr(err, ": use a smaller --cost-max") != NULL, "the hint ends it: %s", err);

    int status;
    char *text = stderr_of(require_too_much, &status);
    cr_expect_eq(status, 5, "0 when it fits, then fail's 1, returned (the child adds 4): %d",
                 status);
    cr_expect(text != NULL && strncmp(text, "multihead: this run needs about ", 32) == 0 &&
                  is_one_line(text),
              "one line after the program's name: %s", text ? text : "(none)");
    free(text);
}

/* ---- the rule in the sources --------------------------------------------------- */

/* A write on stderr in line: a stdio call to stderr, perror, or write(2)
 * and dprintf to descriptor 2. */
static bool writes_stderr(const char *line)
{
    static const char *const calls[] = {"fprintf(stderr", "vfprintf(stderr", "perror(",
                                        "write(STDERR_FILENO", "write(2,", "dprintf(2",
                                        "dprintf(STDERR_FILENO"};
    static const char *const to_a_stream[] = {"fputs(", "fputc(", "putc(", "fwrite("};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        if (strstr(line, calls[i]) != NULL)
            return true;
    for (size_t i = 0; i < sizeof to_a_stream / sizeof to_a_stream[0]; i++)
        if (strstr(line, to_a_stream[i]) != NULL && strstr(line, "stderr") != NULL)
            return true;
    return false;
}

/* Every failure a program says goes through error.c (die, fail, cli_fail,
 * or a loader's line said by its caller), so one place formats it: no
 * source of a chapter or of common/ writes on stderr itself, besides the
 * progress lines that redraw in place ("\r...") and the line a signal
 * handler writes with write(2), the one call a handler may make. */
static void check_stderr_writes(const char *path, char *text, void *in_error_c)
{
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (!writes_stderr(line))
            continue;
        *(int *)in_error_c += strcmp(path, "common/error.c") == 0;
        const bool allowed = strcmp(path, "common/error.c") == 0 ||
                             strstr(line, "\"\\r") != NULL ||
                             strstr(line, "write(STDERR_FILENO, stop_lines") != NULL;
        cr_expect(allowed, "%s: a line on stderr that is not error.c's: %s", path, line);
    }
}

Test(error, only_error_c_writes_a_failure_on_stderr)
{
    static const char *const folders[] = {"01_dot_product", "02_softmax_mask",
                                          "03_self_attention", "04_transpose_qkv",
                                          "05_multihead", "06_permutation_invariance",
                                          "common", "common/learn", "common/io", "common/run",
                                          "common/fast"};
    int in_error_c = 0;
    const int files = each_source(folders, 11, check_stderr_writes, &in_error_c);
    cr_expect_geq(files, 80, "only %d sources found", files);
    /* the scan must see the writes it allows, or it would see none */
    cr_expect_geq(in_error_c, 2, "error.c's own writes must be found: %d", in_error_c);
}

/* ---- statuses and names made by hand --------------------------------------------- */

/* What check_by_hand counts: the lines refused, and the calls it looked at,
 * so that a scan that finds nothing cannot pass. */
typedef struct {
    int refused, dies, fails, lines;
} ByHand;

/* The first argument of a call, from just after its '(' to the ',' or ')'
 * that ends it at depth 0, into arg (cut to len). */
static void first_argument(const char *p, char *arg, size_t len)
{
    size_t n = 0;
    int depth = 0;
    bool quoted = false;
    for (; *p && n + 1 < len; p++) {
        if (*p == '"' && p[-1] != '\\')
            quoted = !quoted;
        if (!quoted && (*p == '(' || *p == '['))
            depth++;
        if (!quoted && (*p == ')' || *p == ']') && depth-- == 0)
            break;
        if (!quoted && *p == ',' && depth == 0)
            break;
        arg[n++] = *p;
    }
    arg[n] = '\0';
}

static bool is_identifier_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* line without its leading blanks */
static const char *code_of(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return line;
}

/* A parameter "const char *func" or "const char *function": a function told
 * its caller's name, where die's __func__ names the function that dies. */
static bool takes_a_name(const char *line)
{
    static const char *const names[] = {"const char *func", "const char *function"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (const char *p = line; (p = strstr(p, names[i])) != NULL; p++) {
            const char *after = code_of(p + strlen(names[i]));
            if (*after == ',' || *after == ')')
                return true;
        }
    return false;
}

/* A call of exit( (not _exit(, which only a signal handler, a forked child
 * and an at-exit hook call, where no caller is left to return to; nor
 * atexit(). */
static bool calls_exit(const char *line)
{
    for (const char *p = line; (p = strstr(p, "exit(")) != NULL; p++)
        if (p == line || !is_identifier_char(p[-1]))
            return true;
    return false;
}

/* The rule of error.h, line by line:
 * - a status is passed on as it is: no "return ... ? 0 : 1" or "exit(... ?
 *   0 : 1)" (nor "? 1 : 0") that turns a count or a test into one;
 * - fail's status is used: no fail(...) as a statement of its own, but the
 *   stop by signal N, whose status is 128 + N (the shell's), returned next;
 * - the function a die names is the one it is written in: die's first
 *   argument is its message (never a name, a literal "softmax" or a
 *   constant FUNC or PROG, before it), and nothing but die's macro calls
 *   die_in;
 * - no function takes its caller's name (a parameter const char *func or
 *   *function, but die_in's, the macro's target): a check names itself;
 * - nothing in common/ ends the program but die and cli_fail (error.c): no
 *   exit(, a part of the library returns its status to main. */
static void check_by_hand(const char *path, char *text, void *state)
{
    ByHand *seen = state;
    enum { MAX_LINES = 8000 };
    static char *lines[MAX_LINES];
    int count = 0;
    for (char *line = strtok(text, "\n"); line != NULL && count < MAX_LINES;
         line = strtok(NULL, "\n"))
        lines[count++] = line;
    for (int i = 0; i < count; i++) {
        const char *line = lines[i], *code = code_of(line);
        if (code[0] == '*' || strncmp(code, "/*", 2) == 0 || strncmp(code, "//", 2) == 0)
            continue;
        char joined[600];   /* the line and the next: a call's arguments may go on */
        snprintf(joined, sizeof joined, "%s %s", line, i + 1 < count ? code_of(lines[i + 1]) : "");
        const bool made = strstr(line, "? 0 : 1") != NULL || strstr(line, "? 1 : 0") != NULL;
        const bool returned = strstr(line, "return ") != NULL || strstr(line, "exit(") != NULL;
        if (made && returned) {
            seen->refused++;
            cr_expect(false, "%s: a status made by hand, not passed on: %s", path, code);
        }
        if (strncmp(code, "fail(", 5) == 0 || strncmp(code, "(void)fail(", 11) == 0) {
            int end = i;   /* the line that ends the statement */
            while (end + 1 < count && lines[end][strlen(lines[end]) - 1] != ';')
                end++;
            seen->fails++;
            if (end + 1 >= count || strncmp(code_of(lines[end + 1]), "return 128 + ", 13) != 0) {
                seen->refused++;
                cr_expect(false, "%s: fail's status dropped: %s", path, code);
            }
        }
        for (const char *p = joined; (p = strstr(p, "die")) != NULL; p += 3) {
            const bool in = strncmp(p, "die_in(", 7) == 0;
            if ((p > joined && is_identifier_char(p[-1])) || (!in && strncmp(p, "die(", 4) != 0) ||
                p - joined > (ptrdiff_t)strlen(line))
                continue;
            char arg[200];
            const char *args = p + (in ? 7 : 4);
            first_argument(args, arg, sizeof arg);
            const char *a = code_of(arg);
            if (in && strcmp(path, "common/error.c") == 0 && strncmp(a, "const char *", 12) == 0)
                continue;   /* die_in's own definition */
            seen->dies++;
            bool name_literal = false;   /* "softmax", "..." names, then says */
            if (!in && a[0] == '"') {
                const char *after = code_of(args + strlen(arg) + 1);
                name_literal = args[strlen(arg)] == ',' && after[0] == '"' &&
                               strspn(a + 1, "abcdefghijklmnopqrstuvwxyz_0123456789") ==
                                   strlen(a) - 2;
            }
            if (in || a[0] != '"' || name_literal) {
                seen->refused++;
                cr_expect(false, "%s: die names a function by hand: %s", path, code);
            }
        }
        if (takes_a_name(line) && !(strcmp(path, "common/error.c") == 0 &&
                                    strncmp(code, "_Noreturn void die_in(", 22) == 0)) {
            seen->refused++;
            cr_expect(false, "%s: a function takes its caller's name: %s", path, code);
        }
        if (strcmp(path, "common/error.c") != 0 && strncmp(path, "common/", 7) == 0 &&
            calls_exit(line)) {
            seen->refused++;
            cr_expect(false, "%s: the library ends the program (return a status): %s", path,
                      code);
        }
        seen->lines++;
    }
}

Test(error, no_status_or_name_made_by_hand)
{
    static const char *const folders[] = {"01_dot_product", "02_softmax_mask",
                                          "03_self_attention", "04_transpose_qkv",
                                          "05_multihead", "06_permutation_invariance",
                                          "common", "common/learn", "common/io", "common/run",
                                          "common/fast"};
    ByHand seen = {0};
    const int files = each_source(folders, 11, check_by_hand, &seen);
    cr_expect_geq(files, 80, "only %d sources found", files);
    cr_expect_eq(seen.refused, 0);
    /* the scan must see what it judges, or it would pass by seeing nothing */
    cr_expect_geq(seen.dies, 100, "only %d calls of die found", seen.dies);
    cr_expect_geq(seen.lines, 20000, "only %d lines read", seen.lines);
    cr_expect_geq(seen.fails, 1, "the signal's stop after a fail must be found: %d", seen.fails);
}
