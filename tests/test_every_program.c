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
 *
 * Every program also reads in one sitting: at most 450 lines, a main of at
 * most 40 and no function over 50 (nor any in common/ but a kernel of
 * fast/ that says why it stays whole); a chapter's own program has at most 8
 * options, and a mode that is also a tool of its own (multihead --from,
 * layer_files' code) behaves as the tool run directly, however the
 * program is copied, linked, renamed or found.
 *
 * And the build keeps the two flags every printed number depends on
 * whatever CFLAGS the user sets (suite build).
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

/* The rules above for every option of every other program, from the
 * first-th on (the two halves run side by side). */
static void every_option_of_half(int first)
{
    char programs[MAX_PROGRAMS][320];
    const int count = find_programs(programs, MAX_PROGRAMS);
    cr_assert_geq(count, 20, "found only %d programs", count);
    char scratch[64], fifo[128];
    scratch_dir_make(scratch, sizeof scratch, "attn_every");
    snprintf(fifo, sizeof fifo, "%s/pipe", scratch);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int numbers = 0, directories = 0;
    for (int p = first; p < count; p += 2) {
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
    cr_expect_geq(numbers, 30, "only %d numeric options found", numbers);
    cr_log_info("%d numeric and %d directory options of half of %d programs", numbers,
                directories, count);
    cr_expect_geq(directories, 5, "only %d directory options found", directories);
    unlink(fifo);
    scratch_dir_remove(scratch);
}

Test(every_program, every_option_follows_the_rules, .timeout = 240)
{
    every_option_of_half(0);
}

Test(every_program, every_option_follows_the_rules_second_half, .timeout = 240)
{
    every_option_of_half(1);
}

/* A program that checks what it shows says when every check held, in one
 * line on stdout, instead of leaving success to an empty stderr. */
Test(every_program, a_passing_self_check_says_so, .timeout = 240)
{
    static const char *const checking[][2] = {
        {"02_softmax_mask/exercise_causal_mask", "the self-check"},
        {"03_self_attention/self_attention", "all 3 self-checks"},
        {"03_self_attention/backward", "the self-check"},
        {"03_self_attention/streaming", "all 2 self-checks"},
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

/* ---- short functions ------------------------------------------------------------- */

enum { MAX_FUNCTION_LINES = 50 };

/* The mark a long kernel of fast/ carries on the line above it, with the
 * reason it stays whole. */
#define KEPT_WHOLE "/* Kept whole ("

/* The functions of a source, in the repository's layout: a definition
 * starts at column 0 with a line that names it and holds '(' (its
 * parameters may go on over more lines), opens with "{" alone at column 0
 * and ends with "}" at column 0; a line ending in ';' before the "{" was a
 * declaration. Each function longer than MAX_FUNCTION_LINES, both ends
 * counted, is reported, unless may_keep_whole and the line above it
 * starts with KEPT_WHOLE; returns how many functions there are. */
static int check_function_lengths(const char *path, const char *text, bool may_keep_whole)
{
    int line = 0, start = 0, functions = 0;
    bool inside = false, kept_whole = false;
    char name[96] = "";
    const char *previous = "";
    for (const char *p = text; *p; previous = p, p = strchr(p, '\n') + 1) {
        line++;
        const char *end = strchr(p, '\n');
        const int len = end ? (int)(end - p) : (int)strlen(p);
        const bool starts_name = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_';
        if (!inside && starts_name && memchr(p, '(', (size_t)len) && p[len - 1] != ';') {
            start = line;
            snprintf(name, sizeof name, "%.*s", len, p);
            kept_whole = may_keep_whole && strncmp(previous, KEPT_WHOLE, strlen(KEPT_WHOLE)) == 0;
        } else if (!inside && len > 0 && p[len - 1] == ';') {
            start = 0;
        } else if (!inside && start > 0 && len == 1 && *p == '{') {
            inside = true;
        } else if (inside && *p == '}') {
            inside = false;
            functions++;
            cr_expect(kept_whole || line - start + 1 <= MAX_FUNCTION_LINES,
                      "%s:%d: %d lines, more than %d: %s", path, start, line - start + 1,
                      MAX_FUNCTION_LINES, name);
            start = 0;
        }
        if (end == NULL)
            break;
    }
    return functions;
}

/* A part of a chapter program fits on a screen: every function of every
 * program, main included, is at most 50 lines. */
Test(every_program, every_function_fits_on_a_screen)
{
    static char names[MAX_PROGRAMS][320];
    const int count = find_programs(names, MAX_PROGRAMS);
    cr_assert_geq(count, 20, "only %d programs found", count);
    int functions = 0;
    for (int i = 0; i < count; i++) {
        char path[400];
        source_of(names[i], path, sizeof path);
        char *text = read_text_file(path, NULL);
        cr_assert_not_null(text, "cannot read %s, the source of %s", path, names[i]);
        const int found = check_function_lengths(path, text, false);
        cr_expect_gt(found, 0, "%s: no function found", path);
        functions += found;
        free(text);
    }
    /* the layout is what finds the functions: if it changes, this test
     * must not pass by finding none */
    cr_expect_geq(functions, 10 * count, "only %d functions in %d programs", functions, count);
}

/* The library is read beside the chapters too: every function of common/
 * (the clear path, learn/, io/, run/ and fast/) and of a program's
 * siblings (a chapter's files without a main) is at most 50 lines; only a
 * kernel of fast/ may stay longer, with its reason in a comment on the
 * line above it that starts KEPT_WHOLE. */
typedef struct {
    int files, functions, siblings;
} LibraryCount;

static void count_library_functions(const char *path, char *text, void *state)
{
    LibraryCount *count = state;
    const bool in_common = strncmp(path, "common/", 7) == 0;
    if (!in_common && (strncmp(text, "int main(", 9) == 0 || strstr(text, "\nint main(") != NULL))
        return;   /* a program: every_function_fits_on_a_screen reads it */
    const bool fast = strncmp(path, "common/fast/", 12) == 0;
    count->files++;
    count->siblings += !in_common;
    count->functions += check_function_lengths(path, text, fast);
}

Test(every_program, every_library_function_fits_on_a_screen)
{
    static const char *const folders[] = {"common", "common/learn", "common/io", "common/run",
                                          "common/fast", "01_dot_product", "02_softmax_mask",
                                          "03_self_attention", "04_transpose_qkv", "05_multihead",
                                          "06_permutation_invariance"};
    LibraryCount count = {0};
    each_source(folders, 11, count_library_functions, &count);
    /* as above: a layout this test cannot read must not pass by finding nothing */
    cr_expect_geq(count.files, 50, "only %d library sources found", count.files);
    cr_expect_geq(count.siblings, 8, "only %d siblings found in the chapters", count.siblings);
    cr_expect_geq(count.functions, 5 * count.files, "only %d functions in %d sources",
                  count.functions, count.files);
}

/* ---- stories with few options ------------------------------------------------------ */

enum { MAX_STORY_OPTIONS = 8 };

/* A chapter's own program (NN_chapter/main.c) tells its story with the
 * options its README and exercises use, at most 8 besides --help; a mode of
 * its own (the file modes) is a tool of its own too, listed apart in --help.
 * Sizes the story does not vary follow from the options (as
 * permutation_invariance's batch follows from its --valid-lens). */
Test(every_program, a_story_has_few_options)
{
    static char names[MAX_PROGRAMS][320];
    const int count = find_programs(names, MAX_PROGRAMS);
    int stories = 0;
    for (int i = 0; i < count; i++) {
        char path[400];
        source_of(names[i], path, sizeof path);
        const char *base = strrchr(path, '/') + 1;
        if (strcmp(base, "main.c") != 0)
            continue;
        stories++;
        Option options[MAX_OPTIONS];
        const int n = options_of(names[i], options, MAX_OPTIONS) - 1;   /* without --help */
        cr_expect_leq(n, MAX_STORY_OPTIONS, "%s has %d options, more than %d", names[i], n,
                      MAX_STORY_OPTIONS);
    }
    cr_expect_eq(stories, 6, "found %d chapter programs, expected 6", stories);
}

/* multihead's file modes are layer_files' code, run in multihead's
 * process (helpers.h's expect_same_as_tool). */
static void expect_layer_files(const char *args)
{
    expect_same_as_tool("05_multihead/multihead", "05_multihead/layer_files", args);
}

Test(every_program, a_mode_prints_what_its_tool_prints)
{
    expect_layer_files("--from tests/fixtures/multihead/cross_kdim_vdim --heads 4");
    expect_layer_files("--heads 4 --from tests/fixtures/grads/cross_kdim_vdim");
    expect_layer_files("--from tests/fixtures/multihead/bias_2d --heads 3");   /* status 1 */
    expect_layer_files("--from tests/fixtures/multihead/bias_2d");             /* status 2 */
    expect_layer_files("--batch 65");
    expect_layer_files("--keys 3");
    expect_layer_files("--batch 3");   /* the tool's sizes go with --to */

    /* --to alone writes Part 3's layer, the same files either way */
    char first[64], second[64], args[200];
    scratch_dir_make(first, sizeof first, "attn_mode");
    scratch_dir_make(second, sizeof second, "attn_mode");
    snprintf(args, sizeof args, "--seed 4 --bias --valid-lens 6,1 --batch 2 --to %s", first);
    RunResult story = run_program("05_multihead/multihead", args);
    snprintf(args, sizeof args, "--seed 4 --bias --valid-lens 6,1 --batch 2 --to %s", second);
    RunResult tool = run_program("05_multihead/layer_files", args);
    cr_expect(story.status == 0 && tool.status == 0, "status %d and %d: %s%s", story.status,
              tool.status, story.err, tool.err);
    static const char *const files[] = {"queries.npy", "W_q.npy", "b_o.npy", "valid_lens.npy",
                                        "output.npy", "attention_weights.npy"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a_path[200], b_path[200];
        snprintf(a_path, sizeof a_path, "%s/%s", first, files[i]);
        snprintf(b_path, sizeof b_path, "%s/%s", second, files[i]);
        size_t a_len = 0, b_len = 0;
        char *a = read_text_file(a_path, &a_len), *b = read_text_file(b_path, &b_len);
        cr_expect(a != NULL && b != NULL && a_len == b_len && memcmp(a, b, a_len) == 0,
                  "%s differs between multihead --to and layer_files --to", files[i]);
        free(a);
        free(b);
    }
    run_result_free(&story);
    run_result_free(&tool);
    scratch_dir_remove(first);
    scratch_dir_remove(second);
}

/* multihead ARGS started by `start` (the words before ARGS on a command
 * line) against multihead ARGS run directly: the same stdout, stderr and
 * status. */
static void expect_runs_as_multihead(const char *start, const char *args)
{
    char command[2048];
    snprintf(command, sizeof command, "%.1000s %.1000s", start, args);
    RunResult as = run_command_line(command), direct = run_program("05_multihead/multihead", args);
    cr_expect_eq(as.status, direct.status, "%s: status %d, run directly %d: %s", command,
                 as.status, direct.status, as.err ? as.err : "");
    cr_expect_str_eq(as.out ? as.out : "", direct.out ? direct.out : "", "%s", command);
    cr_expect_str_eq(as.err ? as.err : "", direct.err ? direct.err : "", "%s", command);
    run_result_free(&as);
    run_result_free(&direct);
}

/* A mode runs in the program's own process: a copy under another name, a
 * symbolic link, the program started under another argv[0] and a copy
 * found through PATH (where a stranger named layer_files stands beside it)
 * all do what the program does; and a value that looks like an option
 * stays a value (--valid-lens --keys is multihead's --valid-lens). */
Test(every_program, a_copied_or_renamed_program_runs_its_modes)
{
    char bin[64], to[64], setup_line[512], args[200];
    scratch_dir_make(bin, sizeof bin, "attn_copies");
    scratch_dir_make(to, sizeof to, "attn_copies_to");
    snprintf(setup_line, sizeof setup_line, "cp %s/05_multihead/multihead %s/renamed && "
             "ln -s %s/renamed %s/linked && printf '#!/bin/sh\\necho stranger\\n' "
             ">%s/layer_files && chmod +x %s/layer_files", BIN_DIR, bin, bin, bin, bin, bin);
    RunResult setup = run_command_line(setup_line);
    cr_assert_eq(setup.status, 0, "%s: %s", setup_line, setup.err ? setup.err : "");
    run_result_free(&setup);
    char starts[4][256];
    snprintf(starts[0], sizeof starts[0], "%s/renamed", bin);
    snprintf(starts[1], sizeof starts[1], "%s/linked", bin);
    snprintf(starts[2], sizeof starts[2], "PATH=%s:\"$PATH\" renamed", bin);
    snprintf(starts[3], sizeof starts[3], "bash -c 'exec -a other \"$0\" \"$@\"' "
             "%s/05_multihead/multihead", BIN_DIR);
    snprintf(args, sizeof args, "--to %s --seed 3 --batch 3", to);
    const char *const lines[] = {
        "--from tests/fixtures/multihead/bias_2d --heads 4",   /* status 0 */
        "--from tests/fixtures/multihead/bias_2d --heads 3",   /* status 1 */
        "--heads 4 --from tests/fixtures/multihead/bias_2d --bias", args,
        "--valid-lens --keys", "--valid-lens 1 --to", "--batch 3", "--to",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        for (int s = 0; s < 4; s++)
            expect_runs_as_multihead(starts[s], lines[i]);
    RunResult value = run_program("05_multihead/multihead", "--valid-lens --keys");
    cr_expect(value.err && strstr(value.err, "multihead: --valid-lens expects") == value.err,
              "multihead --valid-lens --keys: %s", value.err ? value.err : "");
    run_result_free(&value);
    scratch_dir_remove(bin);
    scratch_dir_remove(to);
}

/* The tool's own --help, and the story's, which lists the tool apart. */
Test(every_program, a_tool_has_its_own_help)
{
    RunResult tool = run_program("05_multihead/layer_files", "--help");
    cr_expect_eq(tool.status, 0, "layer_files --help: status %d", tool.status);
    cr_expect(tool.out && strncmp(tool.out, "usage: layer_files ", 19) == 0, "%s", tool.out);
    cr_expect(tool.out && strstr(tool.out, "\n  --from DIR ") && strstr(tool.out, "\n  --to DIR "),
              "layer_files --help does not list --from and --to: %s", tool.out);
    RunResult story = run_program("05_multihead/multihead", "--help");
    cr_expect_eq(story.status, 0);
    cr_expect(story.out && !strstr(story.out, "\n  --from") && !strstr(story.out, "\n  --to"),
              "multihead --help lists --from or --to as its own: %s", story.out);
    cr_expect(story.out && strstr(story.out, "\n  layer_files (--from, --to"),
              "multihead --help does not name the tool: %s", story.out);
    run_result_free(&tool);
    run_result_free(&story);
}

/* The flags every printed number depends on, -std=c11 and
 * -ffp-contract=off, stay in a build whatever CFLAGS the user sets, on
 * make's command line or exported (they once replaced the Makefile's);
 * common/fast/ still turns contraction on after them. Checked on the
 * compiler lines of a dry run (make -n): nothing is built. */
Test(build, a_users_cflags_keep_the_flags_the_numbers_need, .timeout = 60)
{
    char out[128], line[1024];
    scratch_dir_make(out, sizeof out, "build_flags");
    const char *ways[] = {"CFLAGS=-O1 make", "make CFLAGS=-O1"};
    for (int w = 0; w < 2; w++) {
        snprintf(line, sizeof line, "cd %s && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL %s -s -n "
                 "-B V=1 OUT=%s %s/build/common/softmax.o %s/build/common/fast/fast_matmul.o",
                 SOURCE_DIR, ways[w], out, out, out);
        RunResult r = run_command_line(line);
        cr_assert_eq(r.status, 0, "%s: %s", line, r.err);
        const char *clear = strstr(r.out, "-O1 -std=c11 -ffp-contract=off -c -o");
        const char *fast = strstr(r.out, "-O1 -std=c11 -ffp-contract=off -ffp-contract=fast");
        cr_expect(clear != NULL && strstr(clear, "softmax.o") != NULL,
                  "%s: common/softmax.c is not built with them:\n%s", ways[w], r.out);
        cr_expect(fast != NULL && strstr(fast, "fast_matmul.o") != NULL,
                  "%s: common/fast/ does not turn contraction on after them:\n%s", ways[w],
                  r.out);
        run_result_free(&r);
    }
    scratch_dir_remove(out);
}
