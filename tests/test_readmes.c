#define _POSIX_C_SOURCE 200809L
/*
 * test_readmes.c - the pages a learner reads: every output they quote is
 * what its program prints, and each keeps its shape and its word budget.
 *
 * A page marks a quoted output with an HTML comment naming the command,
 * followed by a fenced block:
 *
 *     <!-- output: 03_self_attention/self_attention --seed 3 -->
 *     ```text
 *     ...exactly what the program prints, or a contiguous part of it...
 *     ```
 *
 * Every .md file of a chapter folder is checked this way: the README (the
 * chapter's core story and its exercises) and each optional page beside
 * it. The shape of the pages is checked too: a chapter README's story, to
 * "## Exercises", is at most 3000 words and the whole file at most 4200; an
 * optional page at most 3000 words, opening with what you will learn, what
 * you need and how long it takes, and listed under "Going further" in its
 * chapter's README and in the top README; the top README at most 1500
 * words. Words are counted as `wc -w` counts them.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static const char *const chapters[] = {
    "01_dot_product", "02_softmax_mask", "03_self_attention",
    "04_transpose_qkv", "05_multihead", "06_permutation_invariance",
};
enum { NUM_CHAPTERS = sizeof chapters / sizeof chapters[0], MAX_PAGES = 16 };

enum {
    STORY_WORDS = 3000,        /* a chapter README, from the top to "## Exercises" */
    README_WORDS = 4200,       /* a chapter README, whole */
    PAGE_WORDS = 3000,         /* an optional page */
    TOP_README_WORDS = 1500,
};

static const char MARK[] = "<!-- output: ";

/* The optional pages of a chapter folder (every .md but README.md), sorted,
 * into names; returns how many. */
static int chapter_pages(const char *chapter, char names[][64])
{
    DIR *dir = opendir(chapter);
    cr_assert(dir, "cannot open %s", chapter);
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".md") != 0 ||
            strcmp(e->d_name, "README.md") == 0)
            continue;
        cr_assert_lt(n, MAX_PAGES, "%s: more than %d pages", chapter, MAX_PAGES);
        cr_assert_lt(len, 64, "%s/%s: name too long", chapter, e->d_name);
        strcpy(names[n++], e->d_name);
    }
    closedir(dir);
    qsort(names, (size_t)n, 64, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* Check every marked block of one page; returns how many were checked. */
static int check_quotes(const char *path)
{
    char *text = read_text_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    int checked = 0;
    for (char *p = strstr(text, MARK); p; p = strstr(p + 1, MARK)) {
        char *cmd_start = p + strlen(MARK);
        char *cmd_end = strstr(cmd_start, " -->");
        cr_assert(cmd_end, "%s: unterminated output marker", path);
        char *fence = strstr(cmd_end, "```");
        cr_assert(fence, "%s: output marker without a fenced block", path);
        char *body = strchr(fence, '\n');
        cr_assert(body, "%s: fenced block has no body", path);
        body++;
        char *body_end = strstr(body, "```");
        cr_assert(body_end, "%s: unterminated fenced block", path);
        /* A block indented inside a list item: drop the indent of its fence
         * from every line, as Markdown does. */
        size_t indent = 0;
        while (fence - indent > text && fence[-(long)indent - 1] == ' ')
            indent++;
        while (body_end > body && body_end[-1] == ' ')
            body_end--;

        char *cmd = strndup(cmd_start, (size_t)(cmd_end - cmd_start));
        char *quoted = malloc((size_t)(body_end - body) + 1);
        cr_assert(cmd && quoted);
        size_t q = 0;
        for (const char *line = body; line < body_end;) {
            const char *eol = memchr(line, '\n', (size_t)(body_end - line));
            const char *next = eol ? eol + 1 : body_end;
            size_t skip = 0;
            while (skip < indent && line + skip < next && line[skip] == ' ')
                skip++;
            memcpy(quoted + q, line + skip, (size_t)(next - line) - skip);
            q += (size_t)(next - line) - skip;
            line = next;
        }
        quoted[q] = '\0';

        char *program = cmd, *args = strchr(cmd, ' ');
        if (args)
            *args++ = '\0';
        RunResult r = run_program(program, args ? args : "");
        cr_expect_eq(r.status, 0, "%s: '%s' exited with %d: %s", path, cmd_start, r.status,
                     r.err ? r.err : "");
        cr_expect(r.out && strstr(r.out, quoted),
                  "%s quotes output of '%s %s' that the program does not print now;"
                  " first quoted line: %.80s", path, program, args ? args : "", quoted);
        run_result_free(&r);
        free(cmd);
        free(quoted);
        checked++;
    }
    free(text);
    return checked;
}

/* The README of a chapter and every page beside it; the README quotes at least
 * one output. */
static void check_chapter_quotes(const char *chapter)
{
    char path[256], pages[MAX_PAGES][64];
    snprintf(path, sizeof path, "%s/README.md", chapter);
    cr_expect_gt(check_quotes(path), 0, "%s quotes no output", path);
    int n = chapter_pages(chapter, pages);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%.63s", chapter, pages[i]);
        check_quotes(path);
    }
}

Test(readmes, chapter_01_quotes_match) { check_chapter_quotes(chapters[0]); }
Test(readmes, chapter_02_quotes_match) { check_chapter_quotes(chapters[1]); }
Test(readmes, chapter_03_quotes_match) { check_chapter_quotes(chapters[2]); }
Test(readmes, chapter_04_quotes_match) { check_chapter_quotes(chapters[3]); }
Test(readmes, chapter_05_quotes_match) { check_chapter_quotes(chapters[4]); }
Test(readmes, chapter_06_quotes_match) { check_chapter_quotes(chapters[5]); }
