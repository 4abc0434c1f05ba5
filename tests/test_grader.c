/*
 * test_grader.c - the exercise grader (tests/grader/check) tells each kind
 * of wrong file apart, with the exit status and the words a learner reads:
 * a file that does not compile or link (2), one that crashes, loops, exits,
 * writes past its output, changes its input or calls the repository's own
 * version (1), the starter (1, "not started yet") and a right answer
 * anywhere on disk (0), however long its path and whatever characters it
 * holds (make hands it over untouched; a line break or a name without .c
 * gets one line); a verdict is remembered by the source with its headers.
 * Nothing in the learner's file reaches the verdict: it runs in a runner
 * of its own, and each way a file once tried (below the line that says so)
 * gets its verdict in one line, in time. The answers, starters and zoo
 * are graded in CI by make check-grader; this is the grader's behaviour on
 * the files around them.
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

static char dir[] = "/tmp/attn_grader_XXXXXX";

static void make_dir(void) { cr_assert(mkdtemp(dir), "mkdtemp failed"); }
static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* Grade `source`, written as DIR/<name>.c; the result of tests/grader/check. */
static RunResult grade(const char *name, const char *source, const char *env)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(source, f);
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s BUILD='%s/build' tests/grader/check '%s'", env ? env : "",
             BIN_DIR, path);
    return run_command_line(cmd);
}

static void expect_verdict(const RunResult *r, int status, const char *words)
{
    cr_expect_eq(r->status, status, "status %d, not %d; it said:\n%s%s", r->status, status,
                 r->out ? r->out : "", r->err ? r->err : "");
    cr_expect(r->out && strstr(r->out, words), "it does not say '%s':\n%s", words,
              r->out ? r->out : "");
}

static const char RIGHT[] =
    "#include \"exercises.h\"\n#include <math.h>\n"
    "void my_softmax_row(float *row, int n)\n{\n"
    "    float max = row[0], sum = 0.0f;\n"
    "    for (int j = 1; j < n; j++) max = fmaxf(max, row[j]);\n"
    "    for (int j = 0; j < n; j++) { row[j] = expf(row[j] - max); sum += row[j]; }\n"
    "    for (int j = 0; j < n; j++) row[j] /= sum;\n}\n";

TestSuite(grader, .init = make_dir, .fini = remove_dir, .timeout = 120);

Test(grader, a_right_answer_anywhere_passes)
{
    RunResult r = grade("softmax_row", RIGHT, NULL);
    expect_verdict(&r, 0, "passed, all 120 cases of exercise 2.1");
    run_result_free(&r);
}

Test(grader, the_starter_is_not_started_yet)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "BUILD='%s/build' tests/grader/check 02_softmax_mask/exercises/softmax_row.c",
             BIN_DIR);
    RunResult r = run_command_line(cmd);
    expect_verdict(&r, 1, "not started yet");
    run_result_free(&r);
}

Test(grader, a_file_that_does_not_compile_gets_2_and_the_first_error)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\nvoid my_softmax_row(float *row, int n)\n"
                        "{\n    row[0] = n\n}\n", NULL);
    expect_verdict(&r, 2, "does not compile; the compiler's first error:");
    cr_expect(r.out && strstr(r.out, "error"), "no error line:\n%s", r.out);
    run_result_free(&r);
}

Test(grader, a_misspelled_function_gets_2)
{
    RunResult r = grade("softmax_row",
                        "void my_softmax_rows(float *row, int n) { (void)row; (void)n; }\n", NULL);
    expect_verdict(&r, 2, "does not define my_softmax_row");
    run_result_free(&r);
}

Test(grader, an_unknown_exercise_gets_2)
{
    RunResult r = grade("soft_max", RIGHT, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(r.err && strstr(r.err, "no exercise is called soft_max"), "%s", r.err);
    run_result_free(&r);
}

Test(grader, calling_the_repository_s_own_version_fails)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include \"softmax.h\"\n"
                        "void my_softmax_row(float *row, int n) { softmax_row(row, n); }\n", NULL);
    expect_verdict(&r, 1, "calls softmax_row, the repository's version");
    run_result_free(&r);
}

Test(grader, a_crash_is_a_failure_that_names_the_case)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "void my_softmax_row(float *row, int n)\n"
                        "{\n    volatile float *p = 0;\n    if (n > 3) *p = row[0];\n"
                        "    for (int j = 0; j < n; j++) row[j] = 1.0f / (float)n;\n}\n", NULL);
    /* a segmentation fault, or UBSan's null pointer when the sanitizers are there */
    cr_expect_eq(r.status, 1, "status %d", r.status);
    cr_expect(r.out && (strstr(r.out, "crashed (segmentation fault") ||
                        strstr(r.out, "runtime error: store to null pointer")),
              "no crash named:\n%s", r.out);
    cr_expect(r.out && strstr(r.out, "the case: n = "), "the case is not named:\n%s", r.out);
    run_result_free(&r);
}

Test(grader, a_loop_that_never_ends_is_stopped)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "void my_softmax_row(float *row, int n)\n"
                        "{\n    for (volatile int j = 0; j < n; j += 0) row[0] = 1.0f;\n}\n",
                        "GRADER_TIME_LIMIT=2");
    expect_verdict(&r, 1, "did not finish in time");
    run_result_free(&r);
}

Test(grader, a_function_that_exits_is_a_failure)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <stdlib.h>\n"
                        "void my_softmax_row(float *row, int n) { (void)row; (void)n; exit(0); }\n",
                        NULL);
    expect_verdict(&r, 1, "your function ended the program");
    run_result_free(&r);
}

Test(grader, writing_past_the_output_is_caught)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "void my_softmax_row(float *row, int n)\n"
                        "{\n    for (int j = 0; j <= n; j++) row[j] = 1.0f / (float)n;\n}\n", NULL);
    expect_verdict(&r, 1, "wrote past the end of row");
    run_result_free(&r);
}

Test(grader, changing_an_input_is_caught)
{
    RunResult r = grade("masked_softmax",
                        "#include \"exercises.h\"\n#include <math.h>\n#include <string.h>\n"
                        "Tensor *my_masked_softmax(const Tensor *scores, const ValidLens *v)\n{\n"
                        "    (void)v;\n    scores->data[0] = 0.0f;\n"
                        "    return tensor_zeros(scores->ndim, scores->shape);\n}\n", NULL);
    expect_verdict(&r, 1, "changed its input scores");
    run_result_free(&r);
}

Test(grader, a_failure_prints_the_case_the_property_and_the_hint)
{
    RunResult r = grade("masked_softmax_row",
                        "#include \"exercises.h\"\n#include <math.h>\n"
                        "void my_masked_softmax_row(float *row, int n, int valid_len)\n{\n"
                        "    float max = row[0], sum = 0.0f;\n"
                        "    for (int j = 1; j < n; j++) max = fmaxf(max, row[j]);\n"
                        "    for (int j = 0; j < n; j++) { row[j] = expf(row[j] - max); sum += row[j]; }\n"
                        "    for (int j = 0; j < n; j++) row[j] = j < valid_len ? row[j] / sum : 0.0f;\n}\n",
                        NULL);
    expect_verdict(&r, 1, "(the smallest that fails)");
    cr_expect(r.out && strstr(r.out, "  the case: n = "), "%s", r.out);
    cr_expect(r.out && strstr(r.out, "  your row =\n"), "%s", r.out);
    cr_expect(r.out && strstr(r.out, "what broke: row sums to "), "%s", r.out);
    cr_expect(r.out && strstr(r.out, "read hint 1 of exercise 2.2 in 02_softmax_mask/README.md"),
              "%s", r.out);
    run_result_free(&r);
}

/* Every way out of the learner's function gets a verdict of its own: the
 * grader's own code must reach its verdict, so printing "passed" and
 * leaving is a failure too. */
Test(grader, printing_passed_and_leaving_is_a_failure)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <stdio.h>\n#include <unistd.h>\n"
                        "void my_softmax_row(float *row, int n)\n"
                        "{\n    (void)row; (void)n; printf(\"passed\\n\"); _exit(0);\n}\n",
                        NULL);
    expect_verdict(&r, 1, "your function ended the program (exit status 0, no message)");
    run_result_free(&r);
}

Test(grader, a_signal_raised_is_a_failure)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <signal.h>\n"
                        "void my_softmax_row(float *row, int n) { (void)row; (void)n; "
                        "raise(SIGTERM); }\n", NULL);
    expect_verdict(&r, 1, "your function ended the program with signal 15");
    run_result_free(&r);
}

Test(grader, a_stack_overflow_is_named)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "static int deep(volatile int k)\n{\n    volatile char pad[256];\n"
                        "    pad[0] = (char)k;\n    return deep(k + 1) + pad[0];\n}\n"
                        "void my_softmax_row(float *row, int n) { row[0] = (float)deep(n); }\n",
                        NULL);
    expect_verdict(&r, 1, "your function overflowed the stack");
    run_result_free(&r);
}

Test(grader, a_refusal_comes_before_the_verdict_that_quotes_it)
{
    RunResult r = grade("masked_softmax",
                        "#include \"exercises.h\"\n"
                        "Tensor *my_masked_softmax(const Tensor *scores, const ValidLens *v)\n{\n"
                        "    (void)scores; (void)v;\n"
                        "    return tensor_zeros(1, (int[]){-1});\n}\n", NULL);
    expect_verdict(&r, 1, "stopped the program (abort: a check that failed, a library "
                          "function's die or an assert): masked_softmax: tensor_alloc_with: "
                          "cannot make a tensor");
    run_result_free(&r);
}

Test(grader, a_finite_mask_fails)
{
    RunResult r = grade("masked_softmax_row",
                        "#include \"exercises.h\"\n#include <math.h>\n"
                        "void my_masked_softmax_row(float *row, int n, int valid_len)\n{\n"
                        "    if (valid_len == 0) { for (int j = 0; j < n; j++) row[j] = 0; return; }\n"
                        "    for (int j = valid_len; j < n; j++) row[j] = -1e9f;\n"
                        "    float max = row[0], sum = 0.0f;\n"
                        "    for (int j = 1; j < n; j++) max = fmaxf(max, row[j]);\n"
                        "    for (int j = 0; j < n; j++) { row[j] = expf(row[j] - max); sum += row[j]; }\n"
                        "    for (int j = 0; j < n; j++) row[j] /= sum;\n}\n", NULL);
    expect_verdict(&r, 1, "must be exactly 0");
    run_result_free(&r);
}

Test(grader, a_wrapper_of_the_answer_is_refused_too)
{
    RunResult r = grade("multihead_forward",
                        "#include \"exercises.h\"\n#include \"attention_layer.h\"\n"
                        "Tensor *my_multihead_forward(const MultiHeadAttention *layer,\n"
                        "    const Tensor *q, const Tensor *k, const Tensor *v, const ValidLens *m)\n{\n"
                        "    LayerCache cache;\n"
                        "    Tensor *out = clear_attention_forward(layer, q, k, v, m, false, NULL, 1, &cache);\n"
                        "    layer_cache_free(&cache);\n    return out;\n}\n", NULL);
    expect_verdict(&r, 1, "calls clear_attention_forward, the repository's version");
    run_result_free(&r);
}

Test(grader, a_call_without_its_declaration_names_the_header)
{
    RunResult r = grade("dot_product_attention",
                        "#include \"exercises.h\"\n"
                        "Tensor *my_dot_product_attention(const Tensor *q, const Tensor *k,\n"
                        "    const Tensor *v, const ValidLens *m, Tensor **weights)\n{\n"
                        "    (void)k;\n    *weights = masked_softmax(q, m);\n"
                        "    return tensor_copy(v);\n}\n", NULL);
    expect_verdict(&r, 2, "calls masked_softmax without its declaration: add #include \"softmax.h\"");
    run_result_free(&r);
}

Test(grader, a_helper_named_as_common_s_is_explained)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "int argmax(int a, int b) { return a / b; }\n"
                        "void my_softmax_row(float *row, int n)\n"
                        "{\n    for (int j = 0; j < n; j++) row[j] = 1.0f / (float)argmax(n, 1);\n}\n",
                        NULL);
    expect_verdict(&r, 2, "defines argmax, a name common/ defines too: make your helper static");
    run_result_free(&r);
}

/* A remembered verdict belongs to the file's content: the same path with
 * new content is graded again. */
Test(grader, a_changed_file_is_graded_again)
{
    RunResult r = grade("softmax_row", RIGHT, NULL);
    expect_verdict(&r, 0, "passed");
    run_result_free(&r);
    r = grade("softmax_row", RIGHT, NULL);
    expect_verdict(&r, 0, "passed, all 120 cases of exercise 2.1");
    run_result_free(&r);
    r = grade("softmax_row",
              "#include \"exercises.h\"\n"
              "void my_softmax_row(float *row, int n)\n"
              "{\n    for (int j = 0; j < n; j++) row[j] = 0.5f;\n}\n", NULL);
    expect_verdict(&r, 1, "failed");
    run_result_free(&r);
}

/* The settings come from the grader program, not from its source's text. */
Test(grader, describe_gives_the_exercise_s_settings)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "BUILD='%s/build' tests/grader/check --describe softmax_row",
             BIN_DIR);
    RunResult r = run_command_line(cmd);
    expect_verdict(&r, 0, "number 2.1\n");
    cr_expect(r.out && strstr(r.out, "chapter 02_softmax_mask\n"), "%s", r.out);
    cr_expect(r.out && strstr(r.out, "refuses softmax_row "), "%s", r.out);
    run_result_free(&r);
}

/* DIR/rel holding text, its folders made */
static void write_at(const char *rel, const char *text)
{
    char path[1024], cmd[1200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname \"$GRADER_PATH\")\"");
    cr_assert_eq(setenv("GRADER_PATH", path, 1), 0);
    cr_assert_eq(system(cmd), 0, "cannot make the folder of %s", path);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* tests/grader/check on DIR/rel, the path passed through the environment
 * (GRADER_PATH), so that no character of it meets the shell */
static RunResult check_at(const char *rel)
{
    char path[1024], cmd[256];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    cr_assert_eq(setenv("GRADER_PATH", path, 1), 0);
    snprintf(cmd, sizeof cmd, "BUILD='%s/build' tests/grader/check \"$GRADER_PATH\"", BIN_DIR);
    return run_command_line(cmd);
}

/* A verdict is remembered by the source as the compiler reads it: a header
 * it includes, changed to wrong code, is graded again. */
Test(grader, a_changed_header_is_graded_again)
{
    write_at("inc/softmax_row.c", "#include \"helper.h\"\n");
    write_at("inc/helper.h", RIGHT);
    RunResult r = check_at("inc/softmax_row.c");
    expect_verdict(&r, 0, "passed");
    run_result_free(&r);
    write_at("inc/helper.h", "void my_softmax_row(float *row, int n) { (void)row; (void)n; }\n");
    r = check_at("inc/softmax_row.c");
    expect_verdict(&r, 1, "failed");
    run_result_free(&r);
}

/* A path longer than a file name may be (255) is graded like any other. */
Test(grader, a_long_path_is_graded)
{
    char rel[400];
    snprintf(rel, sizeof rel, "%0120d/%0120d/softmax_row.c", 1, 2);
    cr_assert_geq(strlen(dir) + 1 + strlen(rel), 265);
    write_at(rel, RIGHT);
    RunResult r = check_at(rel);
    expect_verdict(&r, 0, "passed, all 120 cases of exercise 2.1");
    run_result_free(&r);
}

/* A file without .c, or a path with a line break, gets one line that says
 * what to do. */
Test(grader, a_name_without_dot_c_or_a_line_break_is_refused_in_one_line)
{
    const char *const cases[][2] = {
        {"softmax_row", "a C file's name ends in .c: rename it softmax_row.c"},
        {"line\nbreak/softmax_row.c", "the file's path holds a line break: rename the file"},
    };
    for (int i = 0; i < 2; i++) {
        write_at(cases[i][0], RIGHT);
        RunResult r = check_at(cases[i][0]);
        cr_expect_eq(r.status, 2, "%s: status %d", cases[i][0], r.status);
        cr_expect(is_one_line(r.err) && strstr(r.err, cases[i][1]) != NULL,
                  "%s: stderr '%s'", cases[i][0], r.err);
        run_result_free(&r);
    }
}

/* make check EXERCISE=PATH hands the grader the path as typed: a folder
 * named $(shell ...) runs nothing, a$HOME stays a$HOME, quotes and spaces
 * are characters of the path (all in one folder's name: one make). */
Test(grader, make_hands_the_path_over_untouched, .timeout = 120)
{
    const char *rel = "a$HOME $(shell touch ran_from_path)x it's \"quoted\"/softmax_row.c";
    char ran[512], path[1024], cmd[512], want[1100];
    snprintf(ran, sizeof ran, "%s/ran_from_path", SOURCE_DIR);
    write_at(rel, RIGHT);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(cmd, sizeof cmd, "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "
             "--no-print-directory OUT='%s' check EXERCISE=\"$GRADER_PATH\"", BIN_DIR);
    RunResult r = run_command_line(cmd);
    snprintf(want, sizeof want, "%s: passed", path);
    expect_verdict(&r, 0, want);
    run_result_free(&r);
    const bool ran_it = access(ran, F_OK) == 0;
    unlink(ran);
    cr_expect(!ran_it, "make ran the $(shell ...) of a folder's name");
}

/* ---- the judge and the runner: nothing in the learner's file reaches the verdict ----
 * The learner's function runs in a program of its own (the runner); the
 * judge, which draws the cases, computes the repository's answers and says
 * the verdict, never links it. Each file below tried to pass, or to hang
 * the grading, from inside the learner's file; each gets its verdict in
 * one line, in time. */

/* A wrong file that looks for a shared page to write "done, status 0"
 * into (as the grader once had): the runner has none, and says so. */
Test(grader, a_wrong_file_finds_no_shared_page_to_write_its_verdict_in)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <stdio.h>\n"
                        "void my_softmax_row(float *row, int n)\n{\n"
                        "    FILE *maps = fopen(\"/proc/self/maps\", \"r\");\n"
                        "    char line[512];\n"
                        "    while (maps && fgets(line, sizeof line, maps)) {\n"
                        "        unsigned long lo, hi; char perms[8];\n"
                        "        if (sscanf(line, \"%lx-%lx %7s\", &lo, &hi, perms) == 3 &&\n"
                        "            perms[1] == 'w' && perms[3] == 's') {\n"
                        "            fprintf(stderr, \"FOUND A SHARED PAGE\\n\");\n"
                        "            int *p = (int *)lo; p[3] = 1; p[4] = 0;\n        }\n    }\n"
                        "    if (maps) fclose(maps);\n"
                        "    for (int j = 0; j < n; j++) row[j] = 0.0f;\n}\n", NULL);
    expect_verdict(&r, 1, "failed, case 1 of 120 (the smallest that fails)");
    cr_expect(r.err && !strstr(r.err, "FOUND A SHARED PAGE"), "the runner shares a page:\n%s",
              r.err);
    run_result_free(&r);
}

/* A constructor that prints the pass line and leaves before any call. */
Test(grader, a_constructor_that_prints_passed_and_exits_fails)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <stdio.h>\n#include <unistd.h>\n"
                        "__attribute__((constructor)) static void early(void)\n{\n"
                        "    printf(\"softmax_row.c: passed, all 120 cases of exercise 2.1\\n\");\n"
                        "    printf(\"passed\\n\");\n    fflush(stdout);\n    _exit(0);\n}\n"
                        "void my_softmax_row(float *row, int n) { (void)row; (void)n; }\n", NULL);
    expect_verdict(&r, 1, "failed: your file, before its function was called, ended the "
                          "program (exit status 0");
    /* one line, the judge's: what the runner printed is quoted inside it */
    cr_expect(is_one_line(r.out), "more than the verdict's line on stdout:\n%s", r.out);
    cr_expect(r.out && strncmp(r.out, dir, strlen(dir)) == 0 && strstr(r.out, ".c: failed: "),
              "%s", r.out);
    run_result_free(&r);
}

/* A destructor that exits 0 after the runner's main returned: the runner's
 * status is not the verdict. */
Test(grader, a_destructor_that_exits_0_does_not_make_a_pass)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <unistd.h>\n"
                        "__attribute__((destructor)) static void late(void) { _exit(0); }\n"
                        "void my_softmax_row(float *row, int n)\n"
                        "{\n    for (int j = 0; j < n; j++) row[j] = 0.5f;\n}\n", NULL);
    expect_verdict(&r, 1, "failed, case 1 of 120");
    run_result_free(&r);
}

/* expf of the learner's own lives in the runner: the repository's softmax,
 * in the judge, still gives its own weights, and a uniform answer fails. */
Test(grader, the_learner_s_own_expf_does_not_change_the_reference)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "float expf(float x) { (void)x; return 1.0f; }\n"
                        "void my_softmax_row(float *row, int n)\n{\n"
                        "    float sum = 0.0f;\n"
                        "    for (int j = 0; j < n; j++) { row[j] = expf(row[j]); sum += row[j]; }\n"
                        "    for (int j = 0; j < n; j++) row[j] /= sum;\n}\n", NULL);
    expect_verdict(&r, 1, "expected");
    run_result_free(&r);
}

/* The repository's function looked up by its name at run time: dlsym
 * finds nothing (the runner holds none of softmax.c, and exports
 * nothing). */
Test(grader, the_library_s_function_is_not_found_by_dlsym)
{
    /* the feature macro spelled in two pieces: .ci/portability looks for
     * it in the repository's own files, and this one is the learner's */
    RunResult r = grade("softmax_row",
                        "#define _GNU_" "SOURCE\n#include \"exercises.h\"\n#include <dlfcn.h>\n"
                        "#include <stdio.h>\n"
                        "void my_softmax_row(float *row, int n)\n{\n"
                        "    void *f = dlsym(RTLD_DEFAULT, \"softmax\" \"_row\");\n"
                        "    if (f) { fprintf(stderr, \"FOUND IT\\n\"); ((void (*)(float *, int))f)(row, n); return; }\n"
                        "    for (int j = 0; j < n; j++) row[j] = 0.0f;\n}\n", NULL);
    expect_verdict(&r, 1, "failed");
    cr_expect(r.err && !strstr(r.err, "FOUND IT"), "dlsym found softmax_row:\n%s", r.err);
    run_result_free(&r);
}

/* A weak reference to it is a use of its name: refused. */
Test(grader, a_weak_reference_to_the_library_s_function_is_refused)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "extern void hidden(float *row, int n) __asm__(\"softmax_\" \"row\") "
                        "__attribute__((weak));\n"
                        "void my_softmax_row(float *row, int n)\n{\n"
                        "    if (hidden) { hidden(row, n); return; }\n"
                        "    for (int j = 0; j < n; j++) row[j] = 0.0f;\n}\n", NULL);
    expect_verdict(&r, 1, "calls softmax_row, the repository's version");
    run_result_free(&r);
}

/* The program's own symbol table, read from /proc/self/exe: no name of the
 * function the exercise asks for (not linked, and its name stripped from a
 * runner that links its file for another reason). */
Test(grader, the_runner_s_symbol_table_has_no_name_of_the_answer)
{
    const char *const names[][2] = {{"softmax_row", "softmax_row"},
                                    {"masked_softmax_row", "masked_softmax_row"}};
    for (int i = 0; i < 2; i++) {
        char source[4096];
        snprintf(source, sizeof source,
                 "#include \"exercises.h\"\n#include \"softmax.h\"\n#include <elf.h>\n"
                 "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                 "static int found(const char *want)\n{\n"
                 "    FILE *f = fopen(\"/proc/self/exe\", \"rb\");\n"
                 "    if (!f) return 0;\n"
                 "    fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);\n"
                 "    unsigned char *b = malloc((size_t)n);\n"
                 "    size_t got = fread(b, 1, (size_t)n, f); fclose(f);\n"
                 "    int hit = 0;\n"
                 "    Elf64_Ehdr *e = (Elf64_Ehdr *)b;\n"
                 "    Elf64_Shdr *sh = (Elf64_Shdr *)(b + e->e_shoff);\n"
                 "    for (int s = 0; got == (size_t)n && s < e->e_shnum; s++) {\n"
                 "        if (sh[s].sh_type != SHT_SYMTAB && sh[s].sh_type != SHT_DYNSYM) continue;\n"
                 "        Elf64_Sym *sym = (Elf64_Sym *)(b + sh[s].sh_offset);\n"
                 "        const char *names = (const char *)(b + sh[sh[s].sh_link].sh_offset);\n"
                 "        for (size_t k = 0; k < sh[s].sh_size / sizeof *sym; k++)\n"
                 "            if (strcmp(names + sym[k].st_name, want) == 0 && sym[k].st_value) hit = 1;\n"
                 "    }\n"
                 "    free(b);\n    return hit;\n}\n"
                 "void my_%s(float *row, int n%s)\n{\n"
                 "    if (found(\"%s\")) fprintf(stderr, \"FOUND IT\\n\");\n"
                 "    for (int j = 0; j < n; j++) row[j] = 0.0f;\n%s}\n",
                 names[i][0], i ? ", int valid_len" : "", names[i][1],
                 i ? "    (void)valid_len;\n    float x[2] = {0, 1};\n    softmax_row(x, 2);\n" : "");
        RunResult r = grade(names[i][0], source, NULL);
        expect_verdict(&r, 1, "failed");
        cr_expect(r.err && !strstr(r.err, "FOUND IT"), "%s: the runner's symbol table names "
                  "%s:\n%s", names[i][0], names[i][1], r.err);
        run_result_free(&r);
    }
}

/* A file that is right only when it sees the grader's variables, or the
 * sanitizer's settings, in its environment: the runner's is empty. */
Test(grader, a_file_cannot_tell_it_is_graded_from_its_environment)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <math.h>\n#include <stdio.h>\n"
                        "extern char **environ;\n"
                        "void my_softmax_row(float *row, int n)\n{\n"
                        "    if (environ && environ[0]) {\n"
                        "        fprintf(stderr, \"SEES %s\\n\", environ[0]);\n"
                        "        float max = row[0], sum = 0.0f;\n"
                        "        for (int j = 1; j < n; j++) max = fmaxf(max, row[j]);\n"
                        "        for (int j = 0; j < n; j++) { row[j] = expf(row[j] - max); sum += row[j]; }\n"
                        "        for (int j = 0; j < n; j++) row[j] /= sum;\n"
                        "        return;\n    }\n"
                        "    for (int j = 0; j < n; j++) row[j] = 0.0f;\n}\n",
                        "GRADER_TRACE=1 ASAN_OPTIONS=detect_leaks=0");
    expect_verdict(&r, 1, "failed");
    cr_expect(r.err && !strstr(r.err, "SEES "), "the runner has an environment:\n%s", r.err);
    run_result_free(&r);
}

/* A constructor that never returns: the time limit counts from the
 * runner's start, not from the first case. */
Test(grader, a_constructor_that_loops_is_stopped_in_time, .timeout = 60)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n"
                        "__attribute__((constructor)) static void spin(void)\n"
                        "{\n    for (volatile int i = 0; i >= 0; i += 0) {}\n}\n"
                        "void my_softmax_row(float *row, int n) { (void)row; (void)n; }\n",
                        "GRADER_TIME_LIMIT=2");
    expect_verdict(&r, 1, "failed: your file, before its function was called, did not finish "
                          "in time");
    cr_expect(is_one_line(r.out), "%s", r.out);
    run_result_free(&r);
}

/* A child that the function forks and leaves asleep, holding the runner's
 * output: the verdict comes, and the child is killed with the runner's
 * process group. */
Test(grader, a_forked_child_left_asleep_neither_hangs_nor_survives, .timeout = 60)
{
    char source[2048], pid_file[300];
    snprintf(pid_file, sizeof pid_file, "%s/child.pid", dir);
    snprintf(source, sizeof source,
             "#define _POSIX_C_SOURCE 200809L\n"
             "#include \"exercises.h\"\n#include <math.h>\n#include <stdio.h>\n"
             "#include <unistd.h>\n"
             "void my_softmax_row(float *row, int n)\n{\n"
             "    static int forked;\n"
             "    if (!forked) {\n        forked = 1;\n"
             "        pid_t child = fork();\n"
             "        if (child == 0)\n            for (;;) sleep(100);\n"
             "        FILE *f = fopen(\"%s\", \"w\");\n"
             "        if (f) { fprintf(f, \"%%d\\n\", (int)child); fclose(f); }\n    }\n"
             "    float max = row[0], sum = 0.0f;\n"
             "    for (int j = 1; j < n; j++) max = fmaxf(max, row[j]);\n"
             "    for (int j = 0; j < n; j++) { row[j] = expf(row[j] - max); sum += row[j]; }\n"
             "    for (int j = 0; j < n; j++) row[j] /= sum;\n}\n", pid_file);
    RunResult r = grade("softmax_row", source, "GRADER_TIME_LIMIT=20");
    expect_verdict(&r, 0, "passed, all 120 cases");
    run_result_free(&r);
    FILE *f = fopen(pid_file, "r");
    int pid = 0;
    cr_assert(f && fscanf(f, "%d", &pid) == 1 && pid > 0, "the child wrote no pid");
    fclose(f);
    /* up to 10 s: the kill is at once, but on a loaded machine (make
     * sanitize runs the suites side by side) the child may take seconds
     * to be scheduled, die and be reaped; asleep forever, it never goes */
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = kill(pid, 0) != 0;
        if (!gone)
            nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
    cr_expect(gone, "the runner's child %d outlived the grading", pid);
    if (!gone)
        kill(pid, SIGKILL);
}

/* What the runner writes over the channel its results come back on is no
 * result. */
Test(grader, garbage_on_the_runner_s_channel_is_a_failure)
{
    RunResult r = grade("softmax_row",
                        "#include \"exercises.h\"\n#include <unistd.h>\n"
                        "void my_softmax_row(float *row, int n)\n{\n"
                        "    for (int j = 0; j < n; j++) row[j] = 1.0f / (float)n;\n"
                        "    static const char junk[] = \"passed passed passed passed\";\n"
                        "    ssize_t w = write(4, junk, sizeof junk);\n    (void)w;\n}\n", NULL);
    expect_verdict(&r, 1, "your function sent back results the grader cannot read");
    run_result_free(&r);
}

/* Compiling has a limit of its own: an #include of a pipe nobody writes
 * (or of /dev/stdin) does not wait for ever. */
Test(grader, an_include_that_never_ends_is_stopped, .timeout = 60)
{
    char fifo[300], source[1024];
    snprintf(fifo, sizeof fifo, "%s/never", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo failed");
    snprintf(source, sizeof source, "#include \"%s\"\n%s", fifo, RIGHT);
    RunResult r = grade("softmax_row", source, "GRADER_COMPILE_LIMIT=2");
    expect_verdict(&r, 2, "the compiler did not finish in time");
    run_result_free(&r);
    /* /dev/stdin is the compiler's empty input, never the terminal */
    snprintf(source, sizeof source, "#include \"/dev/stdin\"\n%s", RIGHT);
    r = grade("softmax_row", source, "GRADER_COMPILE_LIMIT=2");
    expect_verdict(&r, 0, "passed");
    run_result_free(&r);
}

/* The judge links none of the learner's file: a function the file defines
 * is in the runner, never in the judge's symbol table. */
Test(grader, the_judge_links_none_of_the_learner_s_file)
{
    char source[1024];
    snprintf(source, sizeof source, "int learner_marker_4417(void);\n"
             "int learner_marker_4417(void) { return 4417; }\n%s", RIGHT);
    RunResult r = grade("softmax_row", source, NULL);
    expect_verdict(&r, 0, "passed");
    run_result_free(&r);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "nm '%s/build/check/judge/judge_softmax_row'", BIN_DIR);
    r = run_command_line(cmd);
    cr_assert_eq(r.status, 0, "nm failed: %s", r.err);
    cr_expect(strstr(r.out, " T my_softmax_row\n") != NULL, "the judge has no stub:\n%.300s", r.out);
    cr_expect(!strstr(r.out, "learner_marker_4417"), "the judge holds the learner's code");
    run_result_free(&r);
}
