/*
 * test_language_model_program.c - chapter 06's language_model as a learner
 * runs it: a short training on a small text, saved and read back with the
 * same held-out loss, and every bad input (a text that is missing, empty,
 * binary or too short, a context longer than the text, a model whose
 * vocabulary does not fit the text, weights whose loss is not a number,
 * options out of range) ending in one line and exit 1 or 2.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"

#define LM "06_permutation_invariance/language_model"
#define SMALL "--layers 1 --heads 2 --hiddens 16 --context 16 --batch 4 --eval-every 10 " \
              "--sample 40"

/* dir/name holding the first n bytes of the chapter's Shakespeare, or the
 * bytes given */
static void write_file(const char *dir, const char *name, const void *bytes, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void write_shakespeare(const char *dir, const char *name, size_t n)
{
    size_t len = 0;
    char *text = read_text_file(SOURCE_DIR "/06_permutation_invariance/tinyshakespeare.txt",
                                &len);
    cr_assert(text != NULL && len == 1115394, "the chapter's tinyshakespeare.txt is missing");
    write_file(dir, name, text, n < len ? n : len);
    free(text);
}

/* The number after "it): " in part 3: the loss on the held-out text. */
static double held_out_loss(const char *out)
{
    const char *at = out != NULL ? strstr(out, "it): ") : NULL;
    cr_assert(at != NULL, "no held-out loss in:\n%s", out ? out : "(nothing)");
    return strtod(at + 5, NULL);
}

static RunResult run_in(const char *dir, const char *args)
{
    char line[1024];
    snprintf(line, sizeof line, "%s/%s %s", BIN_DIR, LM, args);
    char *at;
    while ((at = strchr(line, '@')) != NULL) {   /* '@' is the scratch directory */
        char rest[1024];
        snprintf(rest, sizeof rest, "%s%s", dir, at + 1);
        snprintf(at, sizeof line - (size_t)(at - line), "%s", rest);
    }
    return run_command_line(line);
}

static void expect_failure(const char *dir, const char *args, int status, const char *words)
{
    RunResult r = run_in(dir, args);
    cr_expect_eq(r.status, status, "%s: status %d, expected %d; stderr: %s", args, r.status,
                 status, r.err);
    cr_expect(is_one_line(r.err), "%s: stderr is not one line: '%s'", args, r.err);
    cr_expect(strstr(r.err, words) != NULL, "%s: stderr '%s' lacks '%s'", args, r.err, words);
    run_result_free(&r);
}

Test(language_model_program, trains_saves_and_reads_back_the_same_loss, .timeout = 120)
{
    char dir[128], args[512];
    scratch_dir_make(dir, sizeof dir, "lm_program");
    write_shakespeare(dir, "text.txt", 20000);
    mkdir(strcat(strcpy(args, dir), "/model"), 0755);
    RunResult trained = run_in(dir, "--text @/text.txt " SMALL " --steps 30 --to @/model");
    cr_assert_eq(trained.status, 0, "stderr: %s", trained.err);
    cr_expect(strstr(trained.out, "step    30") != NULL, "no last look at step 30");
    const double loss = held_out_loss(trained.out);
    /* 30 steps of a small model learn the letters' frequencies at least */
    cr_expect(loss > 1.0 && loss < log(62.0), "held-out loss %g", loss);
    RunResult loaded = run_in(dir, "--text @/text.txt --sample 40 --from @/model");
    cr_assert_eq(loaded.status, 0, "stderr: %s", loaded.err);
    cr_expect_eq(held_out_loss(loaded.out), loss, "the loaded model's loss differs");
    cr_expect(strstr(loaded.out, "Part 2") == NULL, "--from trained again");
    run_result_free(&trained);
    run_result_free(&loaded);
    scratch_dir_remove(args);
    scratch_dir_remove(dir);
}

/* --kernels clear trains on the chapters' code and says so; its losses
 * are the fast path's within rounding */
Test(language_model_program, clear_kernels_train_as_the_fast_ones, .timeout = 120)
{
    char dir[128];
    scratch_dir_make(dir, sizeof dir, "lm_kernels");
    write_shakespeare(dir, "text.txt", 20000);
    RunResult clear = run_in(dir, "--text @/text.txt " SMALL " --steps 20 --kernels clear");
    RunResult fast = run_in(dir, "--text @/text.txt " SMALL " --steps 20");
    cr_assert_eq(clear.status, 0, "stderr: %s", clear.err);
    cr_assert_eq(fast.status, 0, "stderr: %s", fast.err);
    cr_expect(strstr(clear.out, "seed 0; on the clear kernels (--kernels).") != NULL,
              "--kernels clear does not say so:\n%s", clear.out);
    cr_expect(strstr(fast.out, "seed 0; on the fast kernels (--kernels).") != NULL,
              "the default is not the fast path:\n%s", fast.out);
    const double loss_clear = held_out_loss(clear.out), loss_fast = held_out_loss(fast.out);
    cr_expect(fabs(loss_clear - loss_fast) < 1e-3, "held-out loss %.5f clear, %.5f fast",
              loss_clear, loss_fast);
    run_result_free(&clear);
    run_result_free(&fast);
    scratch_dir_remove(dir);
}

/* --ladder: six rungs in a table, the last the model the program trains
 * with the same options, to the printed digit */
Test(language_model_program, the_ladder_ends_at_the_model, .timeout = 120)
{
    char dir[128];
    scratch_dir_make(dir, sizeof dir, "lm_ladder");
    write_shakespeare(dir, "text.txt", 20000);
    RunResult ladder = run_in(dir, "--text @/text.txt " SMALL " --steps 20 --ladder");
    RunResult model = run_in(dir, "--text @/text.txt " SMALL " --steps 20");
    cr_assert_eq(ladder.status, 0, "stderr: %s", ladder.err);
    cr_assert_eq(model.status, 0, "stderr: %s", model.err);
    const char *rows[] = {"  1. bigram", "  2. one causal", "  3. more heads", "  4. the MLP",
                          "  5. residuals", "  6. layer norm", "For scale, the bigram counted"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        cr_expect(strstr(ladder.out, rows[i]) != NULL, "no '%s' in:\n%s", rows[i], ladder.out);
    const char *last = strstr(ladder.out, "  6. layer norm: the page's model");
    cr_assert(last != NULL);
    char expected[32];
    snprintf(expected, sizeof expected, "%.4f\n", held_out_loss(model.out));
    const char *eol = strchr(last, '\n');
    cr_assert(eol != NULL);
    cr_expect(strncmp(eol - strlen(expected) + 1, expected, strlen(expected)) == 0,
              "the last rung's loss is not the model's %s: %.*s", expected, (int)(eol - last),
              last);
    run_result_free(&ladder);
    run_result_free(&model);
    scratch_dir_remove(dir);
}

Test(language_model_program, refuses_texts_it_cannot_learn, .timeout = 60)
{
    char dir[128];
    scratch_dir_make(dir, sizeof dir, "lm_texts");
    write_file(dir, "empty.txt", "", 0);
    write_file(dir, "nul.txt", "to be\0or not", 12);
    write_file(dir, "latin1.txt", "caf\xe9 au lait", 12);
    write_file(dir, "same.txt", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
               160);
    write_shakespeare(dir, "short.txt", 300);
    write_shakespeare(dir, "text.txt", 3000);
    expect_failure(dir, "--text @/missing.txt", 1, "cannot be read");
    expect_failure(dir, "--text @/empty.txt", 1, "is empty");
    expect_failure(dir, "--text @/nul.txt", 1, "is not text: byte 5 is 0x00");
    expect_failure(dir, "--text @/latin1.txt", 1, "not UTF-8");
    expect_failure(dir, "--text @/same.txt --context 4", 1, "one repeated character");
    expect_failure(dir, "--text @/short.txt", 1, "too short for a context of 64");
    expect_failure(dir, "--text @/text.txt --context 512", 1, "too short for a context of 512");
    expect_failure(dir, "--text @", 1, "is not a regular file");
    scratch_dir_remove(dir);
}

Test(language_model_program, refuses_models_that_do_not_fit, .timeout = 120)
{
    char dir[128], model[160];
    scratch_dir_make(dir, sizeof dir, "lm_models");
    snprintf(model, sizeof model, "%s/model", dir);
    mkdir(model, 0755);
    write_shakespeare(dir, "text.txt", 20000);
    RunResult trained = run_in(dir, "--text @/text.txt " SMALL " --steps 2 --to @/model");
    cr_assert_eq(trained.status, 0, "stderr: %s", trained.err);
    run_result_free(&trained);
    /* a character the model never saw: '~' is nowhere in the plays */
    write_file(dir, "tilde.txt", "~~~~", 4);
    char text[24000];
    size_t len = 0;
    char *plays = read_text_file(SOURCE_DIR "/06_permutation_invariance/tinyshakespeare.txt",
                                 &len);
    cr_assert(plays != NULL);
    memcpy(text, plays, 20000);
    text[10000] = '~';
    free(plays);
    write_file(dir, "other.txt", text, 20000);
    expect_failure(dir, "--text @/other.txt --from @/model", 1,
                   "byte 10000 (0x7e) is not in the model's vocabulary");
    expect_failure(dir, "--text @/text.txt --from @/model --prompt '~'", 2,
                   "--prompt: character 0 (0x7e) is not in the vocabulary");
    expect_failure(dir, "--text @/text.txt --from @/missing", 2, "--from");
    expect_failure(dir, "--text @/text.txt --from @/model --bench", 2,
                   "takes neither --to nor --bench");
    /* finite weights so large that the loss is not a number */
    char path[256];
    snprintf(path, sizeof path, "%s/blocks.0.mlp.fc.weight.npy", model);
    npy_fill_alternating(path, 1e38f);
    expect_failure(dir, "--text @/text.txt --from @/model", 1,
                   "the model's loss on the text is not a number");
    /* and weights that are not numbers at all: refused as the files are read */
    snprintf(path, sizeof path, "%s/wte.weight.npy", model);
    npy_fill_alternating(path, NAN);
    expect_failure(dir, "--text @/text.txt --from @/model", 1, "the data must be finite");
    scratch_dir_remove(model);
    scratch_dir_remove(dir);
}

Test(language_model_program, refuses_options_out_of_range)
{
    const char *const cases[][2] = {
        {"--heads 3", "--heads"},
        {"--layers 9", "--layers"},
        {"--context 1", "--context"},
        {"--temperature -1", "--temperature"},
        {"--lr 0", "--lr"},
        {"--steps -1", "--steps"},
        {"--prompt ''", "--prompt is empty"},
        {"--eval-every 0", "--eval-every"},
        {"--batch 0", "--batch"},
        {"--kernels slow", "--kernels 'slow': expected clear or fast"},
        {"--ladder --bench", "--ladder trains six models of its own"},
    };
    expect_bad_options(LM, cases, sizeof cases / sizeof cases[0]);
}
