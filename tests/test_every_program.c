/*
 * test_every_program.c - the command-line rules, tried on every option of
 * every program.
 *
 * The programs are the repository's own, as the Makefile lists them, and
 * each one's options are read from its own --help, so an option or a
 * program added later is covered without touching this file. For every option:
 *   - a number with white space around it, or a leading '+', is refused
 *     (strtol would skip the space: ' -5' once became 2^64 - 5 as a seed);
 *   - an option given last without its value says it needs one;
 *   - a directory option prints no default in --help (none is taken);
 *   - a directory option given a path of 4000 characters that does not
 *     exist keeps the reason at the end of its line, whatever the path's
 *     length, and one given a named pipe answers at once, without
 *     blocking on it.
 * Each refusal is one line on stderr that starts with the program's name,
 * with status 1 or 2 and nothing half done.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

enum { MAX_PROGRAMS = 64, MAX_OPTIONS = 32 };

typedef struct {
    char name[40];      /* "--batch" */
    char metavar[16];   /* "B", "DIR", or "" for a flag */
    char min[32];       /* "1" of "1 to 16", or "" when no range is printed */
    char dflt[64];      /* "8" of "(default 8)", or "" when none is printed */
} Option;

/* The options of one program, from its --help: a line "  --name META help",
 * continued on lines that start with spaces; a range is ", A to B" at the
 * end of the help, before " (default ...)". */
static int options_of(const char *program, Option *options, int max)
{
    RunResult r = run_program(program, "--help");
    cr_assert_eq(r.status, 0, "%s --help: status %d", program, r.status);
    int count = 0;
    for (char *line = strtok(r.out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  --", 4) == 0) {
            cr_assert_lt(count, max, "%s has more than %d options", program, max);
            Option *o = &options[count++];
            memset(o, 0, sizeof *o);
            sscanf(line, " %39s %15s", o->name, o->metavar);
            if (!(o->metavar[0] >= 'A' && o->metavar[0] <= 'Z'))
                o->metavar[0] = '\0';   /* a flag: the help starts right away */
        } else if (count == 0 || line[0] != ' ') {
            continue;
        }
        /* the range, if this line holds it: ", A to B" */
        Option *o = &options[count - 1];
        char *defaults = strstr(line, " (default");
        if (defaults != NULL) {
            sscanf(defaults, " (default %63[^)]", o->dflt);
            *defaults = '\0';
        }
        char *comma = strrchr(line, ',');
        char low[32], high[32], rest[8];
        if (comma != NULL && sscanf(comma + 1, " %31s to %31s%7s", low, high, rest) == 2)
            snprintf(o->min, sizeof o->min, "%s", low);
    }
    run_result_free(&r);
    return count;
}

/* PROGRAM ARGS: status 1 or 2 (or exactly want when not 0), one line on
 * stderr that starts with the program's name and contains words. */
static void expect_refused(const char *program, const char *args, int want, const char *words)
{
    RunResult r = run_program(program, args);
    const char *err = r.err ? r.err : "";
    if (want != 0)
        cr_expect_eq(r.status, want, "%s %s: status %d, expected %d; stderr: %s", program, args,
                     r.status, want, err);
    else
        cr_expect(r.status == 1 || r.status == 2, "%s %s: status %d; stderr: %s", program,
                  args, r.status, err);
    cr_expect(is_one_line(err), "%s %s: stderr is not one line: %s", program, args, err);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", strrchr(program, '/') + 1);
    cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "%s %s: stderr does not start with "
              "'%s': %s", program, args, prefix, err);
    cr_expect(strstr(err, words) != NULL, "%s %s: stderr does not say '%s': %s", program, args,
              words, err);
    run_result_free(&r);
}

/* Put after a value that must be refused: were it taken, the program would
 * stop here at once (and the test fail on the message), not run in full. */
static const char STOP[] = "--no-such-option";

static void numbers_are_read_strictly(const char *program, const Option *o)
{
    char args[128], words[64];
    snprintf(words, sizeof words, "%s expects", o->name);
    const char *value = o->min[0] ? o->min : "5";   /* the seed prints no range */
    const char *const forms[] = {"' %s'", "'%s '", "'+%s'", "'\t%s'"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char text[48];
        snprintf(text, sizeof text, forms[i], value);
        snprintf(args, sizeof args, "%s %s %s", o->name, text, STOP);
        expect_refused(program, args, 2, words);
    }
    if (strcmp(o->name, "--seed") == 0) {
        snprintf(args, sizeof args, "%s ' -5' %s", o->name, STOP);
        expect_refused(program, args, 2, "--seed expects a whole number from 0 to "
                       "18446744073709551615, got ' -5'");
    }
}

/* A directory that does not exist, 4000 characters long: the line may
 * shorten the path, never drop what is wrong with it. */
static void a_long_path_keeps_its_reason(const char *program, const Option *o)
{
    enum { LONG = 4000 };
    char *path = malloc(LONG + 1), *args = malloc(LONG + 64);
    cr_assert(path != NULL && args != NULL);
    /* folders of 200 letters (a name may have 255), the first missing */
    memcpy(path, "/tmp/", 5);
    memset(path + 5, 'a', LONG - 5);
    for (int i = 205; i < LONG; i += 201)
        path[i] = '/';
    path[LONG] = '\0';
    snprintf(args, LONG + 64, "%s %s", o->name, path);
    RunResult r = run_program(program, args);
    const char *err = r.err ? r.err : "";
    cr_expect(r.status == 1 || r.status == 2, "%s %s <long path>: status %d", program, o->name,
              r.status);
    cr_expect(is_one_line(err), "%s %s <long path>: not one line: %.200s", program, o->name, err);
    /* after the last run of the path's letters: the reason, whole */
    const char *end = err;
    for (const char *p = strstr(err, "aaaa"); p != NULL; p = strstr(p + 1, "aaaa"))
        end = p + 4;
    cr_expect(strstr(end, "does not exist") != NULL || strstr(end, "No such file") != NULL,
              "%s %s <long path>: the reason is lost: ...%s", program, o->name, end);
    run_result_free(&r);
    free(path);
    free(args);
}

/* A named pipe where a directory should be: an answer, not a wait for a
 * writer that never comes (Criterion's timeout would end a hang). */
static void a_named_pipe_is_refused_at_once(const char *program, const Option *o,
                                            const char *fifo)
{
    char args[512];
    snprintf(args, sizeof args, "%s %s", o->name, fifo);
    expect_refused(program, args, 0, "");
}

Test(every_program, every_option_follows_the_rules, .timeout = 240)
{
    char programs[MAX_PROGRAMS][320];
    const int count = find_programs(programs, MAX_PROGRAMS);
    cr_assert_geq(count, 20, "found only %d programs", count);
    char scratch[64], fifo[128];
    scratch_dir_make(scratch, sizeof scratch, "attn_every");
    snprintf(fifo, sizeof fifo, "%s/pipe", scratch);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int numbers = 0, directories = 0;
    for (int p = 0; p < count; p++) {
        Option options[MAX_OPTIONS];
        const int n = options_of(programs[p], options, MAX_OPTIONS);
        for (int i = 0; i < n; i++) {
            const Option *o = &options[i];
            if (strcmp(o->name, "--help") == 0)
                continue;
            if (o->metavar[0] != '\0') {
                char words[64];
                snprintf(words, sizeof words, "%s needs a value", o->name);
                expect_refused(programs[p], o->name, 2, words);
            }
            if (o->min[0] != '\0' || strcmp(o->name, "--seed") == 0) {
                numbers_are_read_strictly(programs[p], o);
                numbers++;
            }
            if (strcmp(o->metavar, "DIR") == 0) {
                /* a directory is the user's choice: none is taken unasked */
                cr_expect_str_eq(o->dflt, "", "%s --help: %s prints a default, '%s'",
                                 programs[p], o->name, o->dflt);
                a_long_path_keeps_its_reason(programs[p], o);
                a_named_pipe_is_refused_at_once(programs[p], o, fifo);
                directories++;
            }
        }
    }
    /* the help's format is what finds the options: if it changes, this
     * test must not pass by finding none */
    cr_expect_geq(numbers, 80, "only %d numeric options found", numbers);
    cr_log_info("%d numeric and %d directory options of %d programs", numbers, directories, count);
    cr_expect_geq(directories, 15, "only %d directory options found", directories);
    unlink(fifo);
    scratch_dir_remove(scratch);
}

/* A program that checks what it shows says when every check held, in one
 * line on stdout, instead of leaving success to an empty stderr. */
Test(every_program, a_passing_self_check_says_so, .timeout = 240)
{
    static const char *const checking[][2] = {
        {"02_softmax_mask/exercise_causal_mask", "the self-check"},
        {"03_self_attention/self_attention", "all 3 self-checks"},
        {"03_self_attention/backward", "the self-check"},
        {"03_self_attention/streaming", "the self-check"},
        {"03_self_attention/additive", "all 4 self-checks"},
        {"05_multihead/backward", "the self-check"},
        {"06_permutation_invariance/exercise_causal_order", "the self-check"},
        {"06_permutation_invariance/permutation_invariance", "all 8 self-checks"},
    };
    for (size_t i = 0; i < sizeof checking / sizeof checking[0]; i++) {
        RunResult r = run_program(checking[i][0], "");
        char line[96];
        snprintf(line, sizeof line, "\ncheck: %s passed\n", checking[i][1]);
        cr_expect_eq(r.status, 0, "%s: status %d: %s", checking[i][0], r.status, r.err);
        cr_expect(r.out && strstr(r.out, line) != NULL, "%s does not print '%s'", checking[i][0],
                  line + 1);
        run_result_free(&r);
    }
}

/* ---- programs that read in one sitting ------------------------------------------ */

enum { MAX_PROGRAM_LINES = 450, MAX_MAIN_LINES = 40 };

/* The source of a program as the Makefile finds it: DIR/NAME.c, or
 * DIR/main.c for the chapter's own program. */
static void source_of(const char *program, char *path, size_t len)
{
    struct stat st;
    snprintf(path, len, "%.320s.c", program);
    if (stat(path, &st) != 0) {
        const char *slash = strrchr(program, '/');
        snprintf(path, len, "%.*s/main.c", (int)(slash - program), program);
    }
}

/* The lines of text, and those of its main: from the line that starts
 * "int main(" to the first line that is "}" alone, both counted (0 when
 * there is no main). */
static void count_lines(const char *text, int *lines, int *main_lines)
{
    int line = 0, main_start = 0;
    *main_lines = 0;
    for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
        line++;
        if (strncmp(p, "int main(", 9) == 0)
            main_start = line;
        if (main_start > 0 && *main_lines == 0 && strncmp(p, "}\n", 2) == 0)
            *main_lines = line - main_start + 1;
        if (strchr(p, '\n') == NULL)
            break;
    }
    *lines = line;
}

/* A chapter program is read beside its chapter: at most 450 lines, with a
 * main of at most 40 that reads as a table of contents of its parts. */
Test(every_program, reads_in_one_sitting)
{
    static char names[MAX_PROGRAMS][320];
    const int count = find_programs(names, MAX_PROGRAMS);
    cr_assert_geq(count, 20, "only %d programs found", count);
    for (int i = 0; i < count; i++) {
        char path[400];
        source_of(names[i], path, sizeof path);
        char *text = read_text_file(path, NULL);
        cr_assert_not_null(text, "cannot read %s, the source of %s", path, names[i]);
        int lines, main_lines;
        count_lines(text, &lines, &main_lines);
        free(text);
        cr_expect_gt(main_lines, 0, "%s: no 'int main(' ... '}' found", path);
        cr_expect_leq(lines, MAX_PROGRAM_LINES, "%s has %d lines, more than %d", path, lines,
                      MAX_PROGRAM_LINES);
        cr_expect_leq(main_lines, MAX_MAIN_LINES, "%s: main has %d lines, more than %d", path,
                      main_lines, MAX_MAIN_LINES);
    }
}
