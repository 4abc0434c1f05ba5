/*
 * test_inside.c - a learner's pieces inside the language model (make
 * 06_permutation_invariance EXERCISE=FILE|DIR, tests/grader/inside_run;
 * 06_permutation_invariance/your_gpt.md): the worked answers plugged in
 * train to the repository's losses, the program names them first and is
 * dated so that a plain make builds the repository's again, and a piece
 * that fails its grader is refused before anything is linked.
 *
 * The learner's build goes to a scratch folder (INSIDE_OUT, INSIDE_WORK),
 * never over the programs the other tests run. Skipped under the
 * sanitizers: make sanitize builds common/ with flags this make call does
 * not know, and the learner's objects would not link with them.
 */
#include "platform_names.h"   /* first: mkdtemp */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"

#define LM "06_permutation_invariance/language_model"
#define ANSWERS_06 "06_permutation_invariance/exercises/answers/"

/* A small model, a few steps: seconds, not minutes. */
static const char SMALL[] = "--steps 6 --eval-every 3 --sample 20 --layers 1 --heads 2 "
                            "--hiddens 16 --context 16";

typedef struct {
    char dir[128];
    RunResult run;   /* make's, with the learner's program run by it */
} Inside;

/* make 06_permutation_invariance EXERCISE=exercise, the program built into
 * a scratch folder and run with args (spaces in args become make's colons) */
static Inside inside_build(const char *exercise, const char *args)
{
    Inside in = {0};
    scratch_dir_make(in.dir, sizeof in.dir, "inside");
    cr_assert(in.dir[0], "cannot make a scratch folder");
    char run_args[256];
    snprintf(run_args, sizeof run_args, "language_model:%s", args);
    for (char *p = run_args; *p; p++)
        if (*p == ' ')
            *p = ':';
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL INSIDE_OUT='%s/out' INSIDE_WORK='%s/work' "
             "make -s --no-print-directory OUT='%s' 06_permutation_invariance "
             "EXERCISE='%s' RUN_ARGS='%s'",
             in.dir, in.dir, BIN_DIR, exercise, run_args);
    in.run = run_command_line(cmd);
    return in;
}

static void inside_free(Inside *in)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", in->dir);
    RunResult r = run_command_line(cmd);
    run_result_free(&r);
    run_result_free(&in->run);
}

/* The losses a run printed ("training loss X   held-out loss Y"), in order. */
static int losses_of(const char *out, double *losses, int max)
{
    int n = 0;
    for (const char *p = out; p && n + 1 < max && (p = strstr(p, "training loss ")); p++) {
        double train, held_out;
        if (sscanf(p, "training loss %lf held-out loss %lf", &train, &held_out) == 2) {
            losses[n++] = train;
            losses[n++] = held_out;
        }
    }
    return n;
}

/* The learner's run and the repository's program print the same losses
 * (to 1e-4), after the line that names the learner's pieces. */
static void expect_library_losses(const Inside *in, const char *args, const char *yours)
{
    cr_assert_eq(in->run.status, 0, "make with EXERCISE failed: %s", in->run.err);
    cr_expect(strstr(in->run.out, yours), "the program does not say '%s':\n%.400s", yours,
              in->run.out);
    RunResult library = run_program(LM, args);
    cr_assert_eq(library.status, 0, "%s", library.err);
    cr_expect(!strstr(library.out, "yours:"), "the repository's program names a learner");
    double want[64], got[64];
    int n_want = losses_of(library.out, want, 64), n_got = losses_of(in->run.out, got, 64);
    cr_expect_gt(n_want, 2, "no losses in the repository's run");
    cr_expect_eq(n_got, n_want, "%d losses printed with the answers, %d without", n_got,
                 n_want);
    for (int i = 0; i < n_want && i < n_got; i++)
        cr_expect(got[i] - want[i] <= 1e-4 && want[i] - got[i] <= 1e-4,
                  "loss %d is %.4f with the answers, %.4f without", i, got[i], want[i]);
    run_result_free(&library);
    // the learner's program is older than its sources: a plain make replaces it
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/out/" LM, in->dir);
    cr_assert_eq(stat(path, &st), 0, "no program at %s", path);
    cr_expect_lt((long long)st.st_mtime, 978307200LL, "the learner's program is not dated 2000");
}

Test(inside, three_answers_train_to_the_library_s_losses, .timeout = 120)
{
    if (UNDER_ASAN)
        cr_skip_test("the sanitizers' build of common/ does not link with the learner's");
    /* linear takes the fast path's place: the attention layer goes clear */
    Inside in = inside_build(ANSWERS_06 "embed_tokens.c 05_multihead/exercises/answers/linear.c "
                             ANSWERS_06 "sample_token.c", SMALL);
    expect_library_losses(&in, SMALL,
                          "yours: embed_tokens, linear, sample_token (3 of 20); the "
                          "library's: the rest\n");
    inside_free(&in);
}

Test(inside, a_failing_piece_is_refused_and_nothing_is_built, .timeout = 120)
{
    if (UNDER_ASAN)
        cr_skip_test("the sanitizers' build of common/ does not link with the learner's");
    Inside in = inside_build(ANSWERS_06 "sample_token.c "
                             "06_permutation_invariance/exercises/zoo/warmup_from_zero/"
                             "lr_schedule.c", SMALL);
    cr_expect_neq(in.run.status, 0, "a failing piece was plugged in");
    cr_expect(strstr(in.run.err, "warmup_from_zero/lr_schedule.c: not run inside") &&
                  strstr(in.run.err, "the grader says: failed") &&
                  strstr(in.run.err, "nothing built"),
              "the refusal does not give the verdict: %s", in.run.err);
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/out/" LM, in.dir);
    cr_expect_neq(stat(path, &st), 0, "a program was built: %s", path);
    snprintf(path, sizeof path, "%s/work", in.dir);
    cr_expect_neq(stat(path, &st), 0, "something was compiled: %s", path);
    inside_free(&in);
}

/* make test-long: every worked answer that is a piece of the model, the
 * page's model for 100 steps (minutes on the learner's plain loops) */
Test(long_inside, every_answer_trains_to_the_library_s_losses, .timeout = 1800)
{
    if (UNDER_ASAN)
        cr_skip_test("the sanitizers' build of common/ does not link with the learner's");
    static const char args[] = "--steps 100 --eval-every 50 --sample 200";
    Inside in = inside_build("02_softmax_mask/exercises/answers 05_multihead/exercises/answers "
                             ANSWERS_06, args);
    expect_library_losses(&in, args, "(20 of 20); the library's: none\n");
    inside_free(&in);
}
