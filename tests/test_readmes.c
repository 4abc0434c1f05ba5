#define _POSIX_C_SOURCE 200809L
/*
 * test_readmes.c - every output a chapter quotes is what its program prints.
 *
 * A chapter README marks a quoted output with an HTML comment naming the
 * command, followed by a fenced block:
 *
 *     <!-- output: 03_self_attention/self_attention --seed 3 -->
 *     ```text
 *     ...exactly what the program prints, or a contiguous part of it...
 *     ```
 *
 * This test runs each marked command and checks that the block appears,
 * character for character, in what the program printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static const char *const chapters[] = {
    "01_dot_product", "02_softmax_mask", "03_self_attention",
    "04_transpose_qkv", "05_multihead", "06_permutation_invariance",
};

static const char MARK[] = "<!-- output: ";

/* Check every marked block of one README; returns how many were checked. */
static int check_readme(const char *chapter)
{
    char path[256];
    snprintf(path, sizeof path, "%s/README.md", chapter);
    char *text = read_text_file(path, NULL);
    if (text == NULL)
        return 0;
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

        char *cmd = strndup(cmd_start, (size_t)(cmd_end - cmd_start));
        char *quoted = strndup(body, (size_t)(body_end - body));
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

Test(readmes, chapter_01_quotes_match)   { cr_expect_gt(check_readme(chapters[0]), 0); }
Test(readmes, chapter_02_quotes_match)   { cr_expect_gt(check_readme(chapters[1]), 0); }
Test(readmes, chapter_03_quotes_match)   { cr_expect_gt(check_readme(chapters[2]), 0); }
Test(readmes, chapter_04_quotes_match)   { cr_expect_gt(check_readme(chapters[3]), 0); }
Test(readmes, chapter_05_quotes_match)   { cr_expect_gt(check_readme(chapters[4]), 0); }
Test(readmes, chapter_06_quotes_match)   { cr_expect_gt(check_readme(chapters[5]), 0); }
