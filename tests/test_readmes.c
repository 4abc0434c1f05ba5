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
 * The command exits with status 0, or with the status the marker names
 * (`<!-- output, exit 1: ... -->`, the grader on a file that fails). A
 * command under tests/ (the exercise grader, tests/grader/check) runs from
 * the repository as it stands, on the objects of this build.
 *
 * Every .md file of a chapter folder is checked this way: the README (the
 * chapter's core story and its exercises) and each optional page beside
 * it, a test per page (suite quotes), so that the pages run in parallel;
 * a command quoted several times on a page runs once. The many-seed
 * experiments (LONG_COMMANDS below, minutes each) are left out of those
 * tests: suite long_quotes checks every quote of each, from one run, a
 * test per command; make test-long runs it, and CI does. The shape of the pages is checked too: a chapter README's story, to
 * "## Exercises", is at most 3000 words and the whole file at most 4200; an
 * optional page at most 3000 words, opening with what you will learn, what
 * you need and how long it takes, and listed under "Going further" in its
 * chapter's README and in the top README; the top README at most 1500
 * words; a chapter's exercises, from "## Exercises" to the next "## "
 * heading, at most 1200 words with their hints. Words are counted as
 * `wc -w` counts them.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    EXERCISE_WORDS = 1200,     /* a chapter's exercises, graded ones and hints included */
};

static const char MARK[] = "<!-- output";

/* Words as `wc -w` counts them: runs of characters that are not white space. */
static int count_words(const char *text, size_t len)
{
    int words = 0;
    bool in_word = false;
    for (size_t i = 0; i < len; i++) {
        bool space = isspace((unsigned char)text[i]);
        if (!space && !in_word)
            words++;
        in_word = !space;
    }
    return words;
}

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

/* Outputs already run in this test, by command: several blocks of a
 * chapter quote the same command (a default run, or one long experiment
 * quoted table by table), and each runs once. */
#define MAX_RUNS 64
static struct {
    char *cmd;
    RunResult result;
} runs[MAX_RUNS];
static int n_runs;

static const RunResult *run_once(const char *cmd)
{
    for (int i = 0; i < n_runs; i++)
        if (strcmp(runs[i].cmd, cmd) == 0)
            return &runs[i].result;
    cr_assert_lt(n_runs, MAX_RUNS, "more than %d distinct quoted commands", MAX_RUNS);
    char *copy = strdup(cmd);
    cr_assert(copy);
    char *args = strchr(copy, ' ');
    if (args)
        *args++ = '\0';
    if (strncmp(copy, "tests/", 6) == 0) {
        /* the grader: from the sources, on this build's objects */
        size_t len = 2 * strlen(cmd) + strlen(BIN_DIR) + 64;
        char *line = malloc(len);
        cr_assert(line);
        snprintf(line, len, "BUILD='%s/build' %s", BIN_DIR, cmd);
        runs[n_runs].result = run_command_line(line);
        free(line);
    } else {
        runs[n_runs].result = run_program(copy, args ? args : "");
    }
    free(copy);
    runs[n_runs].cmd = strdup(cmd);
    cr_assert(runs[n_runs].cmd);
    return &runs[n_runs++].result;
}

static void forget_runs(void)
{
    for (int i = 0; i < n_runs; i++) {
        free(runs[i].cmd);
        run_result_free(&runs[i].result);
    }
    n_runs = 0;
}

/* The many-seed experiments the pages quote, each with the name of its
 * test in suite long_quotes: minutes each, more than make test may take,
 * so their quotes are checked by make test-long (CI) from one run of each.
 * The same programs run in make test with fewer seeds and steps
 * (test_head_experiments.c, test_induction.c, test_relative_positions.c,
 * test_train.c), and each page's other quotes in suite quotes. */
#define LONG_COMMANDS(X)                                                                     \
    X(heads_16_seeds, "05_multihead/heads_experiment --seeds 16 --heads 1,2,4,8")            \
    X(heads_wider_mlp, "05_multihead/heads_experiment --seeds 16 --mlp 64 --lr 0.003 --steps 1500") \
    X(head_importance_16_seeds, "05_multihead/head_importance --seeds 16")                   \
    X(decode_sharing, "05_multihead/decode --sharing")                                       \
    X(positions_16_seeds, "06_permutation_invariance/positions --seeds 16")                  \
    X(relative_positions_train, "06_permutation_invariance/relative_positions --train")      \
    X(relative_positions_patience_20,                                                        \
      "06_permutation_invariance/relative_positions --train --patience 20")                  \
    X(induction_heads, "06_permutation_invariance/induction_heads")                          \
    X(induction_heads_seed_8, "06_permutation_invariance/induction_heads --seed 8")         \
    X(language_model, "06_permutation_invariance/language_model --sample 300")              \
    X(language_model_large, "06_permutation_invariance/language_model --size large --sample 300") \
    X(language_model_ladder, "06_permutation_invariance/language_model --ladder")           \
    X(language_model_context_8, "06_permutation_invariance/language_model --context 8 --sample 0") \
    X(language_model_context_8_batch_96,                                                     \
      "06_permutation_invariance/language_model --context 8 --batch 96 --sample 0")
#define LONG_COMMAND_TEXT(name, command) command,
static const char *const long_commands[] = {LONG_COMMANDS(LONG_COMMAND_TEXT)};
enum { NUM_LONG_COMMANDS = sizeof long_commands / sizeof long_commands[0] };

static bool is_long_command(const char *cmd)
{
    for (int i = 0; i < NUM_LONG_COMMANDS; i++)
        if (strcmp(cmd, long_commands[i]) == 0)
            return true;
    return false;
}

/* Which quotes of a page a test checks: only those of command `only`, or,
 * when it is NULL, every quote but those of a long command. */
/* Check the marked blocks of one page that `only` selects (above);
 * returns how many were checked. */
static int check_quotes(const char *path, const char *only)
{
    char *text = read_text_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    int checked = 0;
    for (char *p = strstr(text, MARK); p; p = strstr(p + 1, MARK)) {
        char *cmd_start = p + strlen(MARK);
        int expected_status = 0;
        if (strncmp(cmd_start, ", exit ", 7) == 0)
            expected_status = (int)strtol(cmd_start + 7, &cmd_start, 10);
        cr_assert(strncmp(cmd_start, ": ", 2) == 0, "%s: malformed output marker", path);
        cmd_start += 2;
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
        cr_assert(cmd);
        if (only != NULL ? strcmp(cmd, only) != 0 : is_long_command(cmd)) {
            free(cmd);
            continue;
        }
        char *quoted = malloc((size_t)(body_end - body) + 1);
        cr_assert(quoted);
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

        const RunResult *r = run_once(cmd);
        cr_expect_eq(r->status, expected_status, "%s: '%s' exited with %d, not %d: %s", path,
                     cmd, r->status, expected_status, r->err ? r->err : "");
        cr_expect(r->out && strstr(r->out, quoted),
                  "%s quotes output of '%s' that the program does not print now;"
                  " first quoted line: %.80s", path, cmd, quoted);
        free(cmd);
        free(quoted);
        checked++;
    }
    free(text);
    return checked;
}

/* The pages, a test each; a chapter's README quotes at least one output.
 * Every page of a chapter folder must be listed (pages_all_have_a_quote_test). */
#define PAGES(X)                                                             \
    X(chapter_01, "01_dot_product/README.md")                                \
    X(chapter_02, "02_softmax_mask/README.md")                               \
    X(chapter_02_bug_zoo, "02_softmax_mask/bug_zoo.md")                      \
    X(chapter_03, "03_self_attention/README.md")                             \
    X(chapter_03_additive, "03_self_attention/additive.md")                  \
    X(chapter_03_backward, "03_self_attention/backward.md")                  \
    X(chapter_03_streaming, "03_self_attention/streaming.md")                \
    X(chapter_04, "04_transpose_qkv/README.md")                              \
    X(chapter_05, "05_multihead/README.md")                                  \
    X(chapter_05_backward, "05_multihead/backward.md")                       \
    X(chapter_05_decoding, "05_multihead/decoding.md")                       \
    X(chapter_05_fast, "05_multihead/fast.md")                               \
    X(chapter_05_heads, "05_multihead/heads.md")                             \
    X(chapter_05_training, "05_multihead/training.md")                       \
    X(chapter_06, "06_permutation_invariance/README.md")                     \
    X(chapter_06_building_a_gpt, "06_permutation_invariance/building_a_gpt.md") \
    X(chapter_06_induction_heads, "06_permutation_invariance/induction_heads.md") \
    X(chapter_06_language_model, "06_permutation_invariance/language_model.md") \
    X(chapter_06_language_model_large, "06_permutation_invariance/language_model_large.md") \
    X(chapter_06_positions, "06_permutation_invariance/positions.md")        \
    X(chapter_06_relative_positions, "06_permutation_invariance/relative_positions.md") \
    X(chapter_06_your_gpt, "06_permutation_invariance/your_gpt.md")

static void check_page_quotes(const char *path)
{
    const int checked = check_quotes(path, NULL);
    if (strstr(path, "/README.md") != NULL)
        cr_expect_gt(checked, 0, "%s quotes no output", path);
    forget_runs();
}

#define PAGE_TEST(name, path) \
    Test(quotes, name) { check_page_quotes(path); }
PAGES(PAGE_TEST)

#define PAGE_PATH(name, path) path,
static const char *const quoted_pages[] = {PAGES(PAGE_PATH)};
enum { NUM_QUOTED_PAGES = sizeof quoted_pages / sizeof quoted_pages[0] };

Test(quotes, pages_all_have_a_quote_test)
{
    int pages_seen = 0;
    for (int c = 0; c < NUM_CHAPTERS; c++) {
        char path[256], pages[MAX_PAGES + 1][64];
        int n = chapter_pages(chapters[c], pages);
        strcpy(pages[n++], "README.md");
        for (int i = 0; i < n; i++, pages_seen++) {
            snprintf(path, sizeof path, "%s/%.63s", chapters[c], pages[i]);
            bool listed = false;
            for (int p = 0; p < NUM_QUOTED_PAGES; p++)
                listed = listed || strcmp(quoted_pages[p], path) == 0;
            cr_expect(listed, "%s has no test of its quotes: add it to PAGES in %s", path,
                      __FILE__);
        }
    }
    cr_expect_eq(pages_seen, NUM_QUOTED_PAGES, "PAGES lists %d pages, the chapters hold %d",
                 NUM_QUOTED_PAGES, pages_seen);

    /* and every long command is still quoted somewhere, as written */
    for (int i = 0; i < NUM_LONG_COMMANDS; i++) {
        char marker[256];
        snprintf(marker, sizeof marker, "output: %s -->", long_commands[i]);
        bool quoted = false;
        for (int p = 0; p < NUM_QUOTED_PAGES && !quoted; p++) {
            char *text = read_text_file(quoted_pages[p], NULL);
            cr_assert(text, "cannot read %s", quoted_pages[p]);
            quoted = strstr(text, marker) != NULL;
            free(text);
        }
        cr_expect(quoted, "no page quotes '%s': drop it from LONG_COMMANDS", long_commands[i]);
    }
}

/* Every quote of one long command, on whichever page, from one run of it. */
static void check_long_quotes(const char *command)
{
    int checked = 0;
    for (int p = 0; p < NUM_QUOTED_PAGES; p++)
        checked += check_quotes(quoted_pages[p], command);
    cr_expect_gt(checked, 0, "no page quotes '%s': drop it from LONG_COMMANDS", command);
    forget_runs();
}

#define LONG_TEST(name, command) \
    Test(long_quotes, name) { check_long_quotes(command); }
LONG_COMMANDS(LONG_TEST)

Test(readmes, word_counts_are_within_budget)
{
    size_t len;
    char *top = read_text_file("README.md", &len);
    cr_assert(top, "cannot read README.md");
    int words = count_words(top, len);
    cr_expect_leq(words, TOP_README_WORDS, "README.md has %d words, more than %d", words,
                  TOP_README_WORDS);
    free(top);

    for (int c = 0; c < NUM_CHAPTERS; c++) {
        char path[256], pages[MAX_PAGES][64];
        snprintf(path, sizeof path, "%s/README.md", chapters[c]);
        char *text = read_text_file(path, &len);
        cr_assert(text, "cannot read %s", path);
        const char *exercises = strstr(text, "\n## Exercises\n");
        cr_expect(exercises, "%s has no '## Exercises'", path);
        size_t story_len = exercises ? (size_t)(exercises - text) : len;
        int story = count_words(text, story_len), whole = count_words(text, len);
        cr_expect_leq(story, STORY_WORDS, "%s: the story to '## Exercises' has %d words, more than %d",
                      path, story, STORY_WORDS);
        cr_expect_leq(whole, README_WORDS, "%s has %d words, more than %d", path, whole,
                      README_WORDS);
        if (exercises) {
            const char *end = strstr(exercises + 1, "\n## ");
            size_t exercise_len = end ? (size_t)(end - exercises) : len - story_len;
            int words_there = count_words(exercises, exercise_len);
            cr_expect_leq(words_there, EXERCISE_WORDS, "%s: its exercises have %d words, more than %d",
                          path, words_there, EXERCISE_WORDS);
        }
        free(text);

        int n = chapter_pages(chapters[c], pages);
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%.63s", chapters[c], pages[i]);
            text = read_text_file(path, &len);
            cr_assert(text, "cannot read %s", path);
            words = count_words(text, len);
            cr_expect_leq(words, PAGE_WORDS, "%s has %d words, more than %d", path, words,
                          PAGE_WORDS);
            free(text);
        }
    }
}

Test(readmes, pages_open_with_learn_need_time_and_are_listed)
{
    char *top = read_text_file("README.md", NULL);
    cr_assert(top, "cannot read README.md");
    int pages_seen = 0;
    for (int c = 0; c < NUM_CHAPTERS; c++) {
        char path[256], pages[MAX_PAGES][64];
        snprintf(path, sizeof path, "%s/README.md", chapters[c]);
        char *readme = read_text_file(path, NULL);
        cr_assert(readme, "cannot read %s", path);
        const char *further = strstr(readme, "\n## Going further\n");
        int n = chapter_pages(chapters[c], pages);
        for (int i = 0; i < n; i++, pages_seen++) {
            snprintf(path, sizeof path, "%s/%.63s", chapters[c], pages[i]);
            char *text = read_text_file(path, NULL);
            cr_assert(text, "cannot read %s", path);
            /* the opening: everything before the first section heading */
            char *first_section = strstr(text, "\n## ");
            if (first_section)
                *first_section = '\0';
            cr_expect(strncmp(text, "# ", 2) == 0, "%s does not open with a title", path);
            cr_expect(strstr(text, "**What you will learn.**"),
                      "%s does not open with 'What you will learn'", path);
            cr_expect(strstr(text, "**What you need.**"), "%s does not open with 'What you need'",
                      path);
            cr_expect(strstr(text, "**How long.**"), "%s does not open with 'How long'", path);
            free(text);

            char link[160];
            snprintf(link, sizeof link, "](%.63s)", pages[i]);
            cr_expect(further && strstr(further, link),
                      "%s/README.md does not list %s under '## Going further'", chapters[c],
                      pages[i]);
            snprintf(link, sizeof link, "](%s/%.63s)", chapters[c], pages[i]);
            cr_expect(strstr(top, link), "README.md's map does not list %s/%s", chapters[c],
                      pages[i]);
        }
        free(readme);
    }
    cr_expect_geq(pages_seen, 7, "only %d optional pages", pages_seen);
    free(top);
}

/* Exercises are one numbered list, 1, 2, 3, ... (after a chapter's graded
 * exercises, below), and a chapter's "Next:" link is its last line. */
static void check_exercises(const char *path, bool next_last)
{
    char *text = read_text_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    char *section = strstr(text, "\n## Exercises\n");
    cr_assert(section, "%s has no '## Exercises'", path);
    char *end = strstr(section + 1, "\n## ");
    int expected = 1;
    bool in_fence = false;   /* a numbered line of quoted output is no exercise */
    for (char *line = section + 1; line && (!end || line < end); line = strchr(line, '\n')) {
        line++;
        const char *start = line + strspn(line, " ");
        if (strncmp(start, "```", 3) == 0)
            in_fence = !in_fence;
        int number;
        char dot;
        if (!in_fence && isdigit((unsigned char)line[0]) &&
            sscanf(line, "%d%c", &number, &dot) == 2 && dot == '.') {
            cr_expect_eq(number, expected, "%s: exercise %d is numbered %d", path, expected,
                         number);
            expected = number + 1;
        }
    }
    cr_expect(expected > 1 || strstr(section, "\n### "), "%s has no exercise", path);
    if (next_last) {
        size_t len = strlen(text);
        while (len > 0 && text[len - 1] == '\n')
            text[--len] = '\0';
        char *last = strrchr(text, '\n');
        cr_expect(last && strncmp(last + 1, "Next: ", 6) == 0,
                  "%s does not end with its 'Next:' link", path);
        cr_expect(strstr(text, "\nNext: ") == last, "%s has a 'Next:' link before its end",
                  path);
    }
    free(text);
}

Test(readmes, exercises_are_one_list_and_next_comes_last)
{
    for (int c = 0; c < NUM_CHAPTERS; c++) {
        char path[256], pages[MAX_PAGES][64];
        snprintf(path, sizeof path, "%s/README.md", chapters[c]);
        check_exercises(path, c + 1 < NUM_CHAPTERS);
        int n = chapter_pages(chapters[c], pages);
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%.63s", chapters[c], pages[i]);
            check_exercises(path, false);
        }
    }
}

/* One file's graded exercises, in its exercise_section (cut at the
 * next "## "): headings "### N.k Title (`NAME`)", each with the three
 * folded hints the grader points to and a link to its answer (never the
 * answer printed); NAME has a starter, an answer and a grader. A chapter's
 * README numbers them 1, 2, 3, ...; its pages go on from there, each
 * number once (seen[k]). Returns how many there are. */
static int check_graded(const char *path, char *section, int c, bool *seen, int max_k)
{
    int graded = 0;
    for (char *h = strstr(section, "\n### "); h; h = strstr(h + 1, "\n### ")) {
        int chapter, k, used = 0;
        if (sscanf(h + 5, "%d.%d %n", &chapter, &k, &used) != 2 || used == 0)
            continue;   /* "### More to try" */
        graded++;
        cr_expect(chapter == c + 1 && k >= 1 && k < max_k && !seen[k],
                  "%s: graded exercise %d.%d is not numbered %d.k, the next k of its chapter",
                  path, chapter, k, c + 1);
        if (k >= 1 && k < max_k)
            seen[k] = true;
        char *eol = strchr(h + 1, '\n'), *name = strstr(h + 1, "(`");
        cr_assert(eol && name && name < eol, "%s: exercise %d.%d names no file (`NAME`)",
                  path, chapter, k);
        name += 2;
        char file[64] = "";
        sscanf(name, "%63[a-z0-9_]", file);
        char *next = strstr(h + 1, "\n### ");
        size_t body_len = next ? (size_t)(next - h) : strlen(h);
        char *body = strndup(h, body_len);
        cr_assert(body);
        static const char *const hints[] = {"<summary>Hint 1", "<summary>Hint 2",
                                            "<summary>Hint 3"};
        for (int i = 0; i < 3; i++)
            cr_expect(strstr(body, hints[i]), "%s: exercise %d.%d has no folded %s", path,
                      chapter, k, hints[i] + 9);
        char link[128];
        snprintf(link, sizeof link, "](exercises/answers/%s.c)", file);
        cr_expect(strstr(body, link), "%s: exercise %d.%d does not link its answer %s", path,
                  chapter, k, link + 2);
        cr_expect(!strstr(body, "```c"), "%s: exercise %d.%d prints code; link the answer",
                  path, chapter, k);
        free(body);
        char homes[3][256];
        snprintf(homes[0], sizeof homes[0], "%s/exercises/%s.c", chapters[c], file);
        snprintf(homes[1], sizeof homes[1], "%s/exercises/answers/%s.c", chapters[c], file);
        snprintf(homes[2], sizeof homes[2], "tests/grader/%s.c", file);
        for (int i = 0; i < 3; i++)
            cr_expect(access(homes[i], F_OK) == 0, "%s: exercise %d.%d has no %s", path,
                      chapter, k, homes[i]);
    }
    return graded;
}

/* A file's graded exercises: its "## Graded exercises" section when it has
 * one (a page whose "## Exercises" are questions only), else its
 * "## Exercises", cut at the next "## " (NULL when neither). */
static char *exercise_section(char *text)
{
    char *section = strstr(text, "\n## Graded exercises\n");
    if (section == NULL)
        section = strstr(text, "\n## Exercises\n");
    if (section) {
        char *section_end = strstr(section + 1, "\n## ");
        if (section_end)
            *section_end = '\0';
    }
    return section;
}

/* Every chapter: at least three graded exercises in its README, numbered
 * in order, more on its pages; every starter of the chapter has its
 * heading in the README or on a page. */
Test(readmes, graded_exercises_have_three_hints_and_a_linked_answer)
{
    enum { MAX_K = 64 };
    for (int c = 0; c < NUM_CHAPTERS; c++) {
        char path[256], pages[MAX_PAGES][64];
        char *texts[MAX_PAGES + 1], *sections[MAX_PAGES + 1];
        bool seen[MAX_K] = {false};
        snprintf(path, sizeof path, "%s/README.md", chapters[c]);
        texts[0] = read_text_file(path, NULL);
        cr_assert(texts[0], "cannot read %s", path);
        sections[0] = exercise_section(texts[0]);
        cr_assert(sections[0], "%s has no '## Exercises'", path);
        int graded = check_graded(path, sections[0], c, seen, MAX_K);
        cr_expect_geq(graded, 3, "%s: %d graded exercises, at least 3 wanted", path, graded);
        for (int k = 1; k <= graded && k < MAX_K; k++)
            cr_expect(seen[k], "%s: graded exercise %d.%d is missing or out of order", path,
                      c + 1, k);
        int n = chapter_pages(chapters[c], pages);
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%.63s", chapters[c], pages[i]);
            texts[i + 1] = read_text_file(path, NULL);
            cr_assert(texts[i + 1], "cannot read %s", path);
            sections[i + 1] = exercise_section(texts[i + 1]);
            if (sections[i + 1])
                check_graded(path, sections[i + 1], c, seen, MAX_K);
        }

        char dir_path[256];
        snprintf(dir_path, sizeof dir_path, "%s/exercises", chapters[c]);
        DIR *dir = opendir(dir_path);
        cr_assert(dir, "%s has no exercises/", chapters[c]);
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            size_t len = strlen(e->d_name);
            if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0)
                continue;
            char heading[128];
            snprintf(heading, sizeof heading, "(`%.*s`)\n", (int)(len - 2), e->d_name);
            bool found = false;
            for (int i = 0; i <= n && !found; i++)
                found = sections[i] && strstr(sections[i], heading);
            cr_expect(found, "%s/%s has no exercise heading in %s/README.md or its pages",
                      dir_path, e->d_name, chapters[c]);
        }
        closedir(dir);
        for (int i = 0; i <= n; i++)
            free(texts[i]);
    }
}

/* A picture is a paragraph of its own: a blank line before its "![...](...)"
 * line and after it, or Markdown runs the next sentence into the image. */
static void check_images(const char *path)
{
    char *text = read_text_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    for (const char *p = strstr(text, "\n!["); p; p = strstr(p + 1, "\n![")) {
        const char *eol = strchr(p + 1, '\n');
        cr_expect(p > text && p[-1] == '\n', "%s: no blank line before the image at '%.60s'",
                  path, p + 1);
        cr_expect(eol == NULL || eol[1] == '\n' || eol[1] == '\0',
                  "%s: the line after the image '%.60s' is not blank", path, p + 1);
    }
    free(text);
}

/* check(path) on every page of every chapter folder, its README included. */
static void for_every_chapter_page(void (*check)(const char *path))
{
    for (int c = 0; c < NUM_CHAPTERS; c++) {
        char path[256], pages[MAX_PAGES + 1][64];
        int n = chapter_pages(chapters[c], pages);
        strcpy(pages[n++], "README.md");
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%.63s", chapters[c], pages[i]);
            check(path);
        }
    }
}

Test(readmes, images_stand_in_paragraphs_of_their_own)
{
    check_images("README.md");
    for_every_chapter_page(check_images);
}

/* How files are written, signals and memory limits are documented once, in
 * common/io/README.md; a chapter page links it and says no more. */
static void check_no_engineering(const char *path)
{
    static const char *const words[] = {
        ".lock", "lock file", "renamed into place", "rename(", "SIGINT", "SIGTERM",
        "130 or 143", "ulimit", "2 MB pages", "fuzz",
    };
    char *text = read_text_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        cr_expect(strstr(text, words[w]) == NULL,
                  "%s mentions '%s': that belongs on common/io/README.md", path, words[w]);
    free(text);
}

Test(readmes, chapter_pages_leave_the_engineering_to_common_io)
{
    for_every_chapter_page(check_no_engineering);
}

/* ---- listings of the source ------------------------------------------------
 * A page shows a function as it is in the source with a marker naming the
 * file and the function, followed by a fenced block:
 *
 *     <!-- source: common/learn/language_model.c block_forward -->
 *     ```c
 *     ...the function, from the line that names it to its closing brace...
 *     ```
 *
 * The block must be the function's lines exactly, so that the page cannot
 * drift from the code. */
static const char SOURCE_MARK[] = "<!-- source: ";

/* The definition of func in the text of a C file: from the line at column
 * 0 that names it (its return type before it, not a declaration) to the
 * first "}" at column 0 after it; NULL when there is none. */
static char *function_lines(const char *source, const char *func)
{
    const size_t len = strlen(func);
    for (const char *line = source; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        const char *next = eol != NULL ? eol + 1 : line + strlen(line);
        const char *at = strstr(line, func);
        const bool names_it = at != NULL && at < next && at > line && at[len] == '(' &&
                              (at[-1] == ' ' || at[-1] == '*') && isalpha((unsigned char)*line);
        if (names_it) {
            const char *end = strstr(line, "\n}\n");
            const char *semicolon = strchr(line, ';');
            if (end != NULL && (semicolon == NULL || semicolon > strchr(line, '{')))
                return strndup(line, (size_t)(end + 3 - line));
        }
        line = next;
    }
    return NULL;
}

/* Every listing of page path equal to its source; returns how many. */
static int check_listings(const char *path)
{
    char *text = read_text_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    int checked = 0;
    for (char *p = strstr(text, SOURCE_MARK); p; p = strstr(p + 1, SOURCE_MARK)) {
        char file[256], func[128];
        cr_assert(sscanf(p + strlen(SOURCE_MARK), "%255s %127s", file, func) == 2,
                  "%s: a source marker needs a file and a function", path);
        char *fence = strstr(p, "```c\n");
        cr_assert(fence != NULL, "%s: the listing of %s has no ```c block", path, func);
        char *body = fence + 5, *body_end = strstr(body, "```");
        cr_assert(body_end != NULL, "%s: the listing of %s is not closed", path, func);
        char *source = read_text_file(file, NULL);
        cr_assert(source != NULL, "%s: cannot read %s", path, file);
        char *lines = function_lines(source, func);
        cr_assert(lines != NULL, "%s: %s defines no %s", path, file, func);
        cr_expect(strlen(lines) == (size_t)(body_end - body) &&
                      strncmp(lines, body, strlen(lines)) == 0,
                  "%s: the listing of %s differs from %s; the source has:\n%s", path, func,
                  file, lines);
        free(lines);
        free(source);
        checked++;
    }
    free(text);
    return checked;
}

Test(readmes, listings_equal_their_source)
{
    int checked = 0;
    for (int p = 0; p < NUM_QUOTED_PAGES; p++) {
        const int n = check_listings(quoted_pages[p]);
        if (strcmp(quoted_pages[p], "06_permutation_invariance/building_a_gpt.md") == 0)
            cr_expect_gt(n, 0, "%s shows no block_forward", quoted_pages[p]);
        checked += n;
    }
    cr_expect_gt(checked, 0, "no page shows a listing");
}
