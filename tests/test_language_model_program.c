/*
 * test_language_model_program.c - chapter 06's language_model as a learner
 * runs it: a short training on a small text, saved and read back with the
 * same held-out loss, and every bad input (a text that is missing, empty,
 * binary or too short, a context longer than the text, a model whose
 * vocabulary does not fit the text, weights whose loss is not a number,
 * options out of range, a named pipe, a saved set whose sizes break the
 * options' limits, --from with sizing options) ending in one line and exit
 * 1 or 2; --size's two presets, each exactly its values, with the options
 * given beside it winning; --plot's loss curve holding every look, a full
 * disk stopping the run at its first output, and a text without a newline.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
        {"--size medium", "--size 'medium': expected small or large"},
        {"--size LARGE", "--size 'LARGE': expected small or large"},
        {"--size", "--size needs a value"},
        {"--ladder --bench", "--ladder trains six models of its own"},
    };
    expect_bad_options(LM, cases, sizeof cases / sizeof cases[0]);
}

/* The default of option in --help's text: "4" from "  --layers N  ... (default 4)". */
static void help_default(const char *help, const char *option, char *value, size_t len)
{
    char line[64];
    snprintf(line, sizeof line, "\n  %s ", option);
    const char *at = strstr(help, line);
    cr_assert(at != NULL, "--help lists no %s:\n%s", option, help);
    const char *end = strchr(at + 1, '\n'), *open = strstr(at, "(default ");
    cr_assert(open != NULL && open < end, "--help gives %s no default", option);
    open += strlen("(default ");
    const size_t n = (size_t)(strchr(open, ')') - open);
    cr_assert(n < len);
    memcpy(value, open, n);
    value[n] = '\0';
}

/* --size small and large set exactly their values, which --help prints as
 * the defaults; an option given beside --size wins, before it or after.
 * Each of the two runs computes the large model's losses at step 0 and
 * parts 3 and 4: a few seconds natively, about 100 s each under ASan on a
 * two-core machine (make sanitize), hence the timeout. */
Test(language_model_program, sizes_set_their_presets_and_given_options_win, .timeout = 480)
{
    static const char *const options[] = {"--layers", "--heads", "--hiddens", "--context",
                                          "--batch", "--steps", "--lr", "--size"};
    static const char *const sizes[][8] = {
        {"4", "4", "128", "64", "12", "2000", "0.001", "small"},
        {"4", "8", "256", "128", "16", "2500", "0.001", "large"},
    };
    const char *const args[] = {"--help", "--size large --help"};
    for (int s = 0; s < 2; s++) {
        char line[256], value[32];
        snprintf(line, sizeof line, "%s/%s %s", BIN_DIR, LM, args[s]);
        RunResult r = run_command_line(line);
        cr_assert_eq(r.status, 0, "%s: %s", args[s], r.err);
        for (int o = 0; o < 8; o++) {
            help_default(r.out, options[o], value, sizeof value);
            cr_expect_str_eq(value, sizes[s][o], "%s: %s defaults to %s, not %s", args[s],
                             options[o], value, sizes[s][o]);
        }
        run_result_free(&r);
    }
    char dir[128];
    scratch_dir_make(dir, sizeof dir, "lm_sizes");
    write_shakespeare(dir, "text.txt", 20000);
    const char *const given[] = {"--size large --layers 2 --steps 0", "--layers 2 --steps 0 "
                                 "--size large"};
    for (int g = 0; g < 2; g++) {
        char line[256];
        snprintf(line, sizeof line, "--text @/text.txt --sample 0 %s", given[g]);
        RunResult r = run_in(dir, line);
        cr_assert_eq(r.status, 0, "%s: %s", given[g], r.err);
        cr_expect(strstr(r.out, "wte (58, 256) + wpe (128, 256), 2 blocks") != NULL &&
                      strstr(r.out, "attention with 8 heads of 32") != NULL &&
                      strstr(r.out, "Training: 0 AdamW steps of 16 windows of 128 characters; "
                                    "lr 0.001") != NULL &&
                      strstr(r.out, "then a cosine to 0.0001") != NULL,
                  "%s: part 1 reads\n%s", given[g], r.out);
        run_result_free(&r);
    }
    scratch_dir_remove(dir);
}

/* The smallest model, for the cases below: a second or less each. */
#define TINY "--layers 1 --heads 1 --hiddens 8 --context 8 --batch 2 --sample 10"

/* --plot's curve looks every 100 steps and at every --eval-every: with 150
 * the rows are 0, 100, 150, 200, 250, one more than steps / 100 + 2 (the
 * curve held that many, and the fifth was written past its end; make
 * sanitize runs this test and the same command under AddressSanitizer). */
Test(language_model_program, plot_curve_holds_every_look, .timeout = 60)
{
    char dir[128], path[256];
    scratch_dir_make(dir, sizeof dir, "lm_curve");
    write_shakespeare(dir, "text.txt", 20000);
    RunResult r = run_in(dir, "--text @/text.txt " TINY " --steps 250 --eval-every 150 "
                              "--plot @");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    snprintf(path, sizeof path, "%s/language_model_loss.dat", dir);
    char *dat = read_text_file(path, NULL);
    cr_assert(dat != NULL, "no %s", path);
    const int expected[] = {0, 100, 150, 200, 250};
    int rows = 0;
    for (const char *line = dat; line != NULL && *line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (*line == '#' || *line == '\0')
            continue;
        cr_assert_lt(rows, 5, "more than 5 rows:\n%s", dat);
        cr_expect_eq(atoi(line), expected[rows], "row %d is step %d:\n%s", rows, atoi(line),
                     dat);
        rows++;
    }
    cr_expect_eq(rows, 5, "%d rows:\n%s", rows, dat);
    free(dat);
    run_result_free(&r);
    scratch_dir_remove(dir);
}

/* A full disk stops the run at its first output, before any training: a
 * million steps would take hours. One line, said once. */
Test(language_model_program, full_disk_stops_at_the_first_output, .timeout = 30)
{
    char dir[128], line[1024];
    scratch_dir_make(dir, sizeof dir, "lm_full");
    write_shakespeare(dir, "text.txt", 20000);
    snprintf(line, sizeof line, "{ %s/%s --text %s/text.txt " TINY " --steps 1000000 "
             ">/dev/full; }", BIN_DIR, LM, dir);
    RunResult r = run_command_line(line);
    cr_expect_eq(r.status, 1, "status %d", r.status);
    cr_expect_str_eq(r.err, "language_model: cannot write the output: No space left on device\n");
    run_result_free(&r);
    scratch_dir_remove(dir);
}

/* A named pipe that nobody writes is refused at once, not waited on. Were
 * the program to wait in open(), a child opens the pipe's other end after
 * 10 s to let it go, and the time shows it (under 8 s: time enough for
 * a program under the sanitizers with the other suites beside it). */
Test(language_model_program, named_pipe_text_is_refused_at_once, .timeout = 30)
{
    char dir[128], path[256];
    scratch_dir_make(dir, sizeof dir, "lm_pipe");
    snprintf(path, sizeof path, "%s/pipe", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    const pid_t writer = fork();
    cr_assert(writer >= 0);
    if (writer == 0) {
        sleep(10);
        const int fd = open(path, O_WRONLY | O_NONBLOCK);   /* fails when no reader waits */
        _exit(fd >= 0 ? 0 : 1);
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    expect_failure(dir, "--text @/pipe " TINY, 1, "pipe: is not a regular file");
    clock_gettime(CLOCK_MONOTONIC, &end);
    kill(writer, SIGKILL);
    waitpid(writer, NULL, 0);
    const double seconds = (double)(end.tv_sec - start.tv_sec) +
                           1e-9 * (double)(end.tv_nsec - start.tv_nsec);
    cr_expect_lt(seconds, 8.0, "the program waited %.1f s on the pipe", seconds);
    scratch_dir_remove(dir);
}

/* dir/name.npy replaced by a float tensor of the shape given, filled with
 * small numbers */
static void write_floats(const char *dir, const char *name, int ndim, const int *shape)
{
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    Tensor *x = tensor_zeros(ndim, shape);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = 0.01f * (float)(i % 7);
    cr_assert_eq(npy_save(path, x, err, sizeof err), 0, "%s", err);
    tensor_free(x);
}

static void write_int(const char *dir, const char *name, int value)
{
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(npy_save_ints(path, &value, 1, (const int[]){1}, err, sizeof err), 0, "%s",
                 err);
}

/* A saved set whose sizes break the options' limits is refused, naming the
 * file (wpe.weight with one row once passed, and part 4 read memory it
 * never wrote); of three files that give num_hiddens, the one that differs
 * is named; sizing and training options do not mix with --from. */
Test(language_model_program, refuses_saved_sets_beyond_the_options_limits, .timeout = 60)
{
    char dir[128], model[160];
    scratch_dir_make(dir, sizeof dir, "lm_limits");
    snprintf(model, sizeof model, "%s/model", dir);
    mkdir(model, 0755);
    write_shakespeare(dir, "text.txt", 20000);
    RunResult trained = run_in(dir, "--text @/text.txt --layers 1 --heads 2 --hiddens 16 "
                                    "--context 8 --steps 0 --sample 0 --to @/model");
    cr_assert_eq(trained.status, 0, "stderr: %s", trained.err);
    const int V = 58;   /* the first 20,000 characters' vocabulary */
    cr_assert(strstr(trained.out, "wte (58, 16)") != NULL, "%s", trained.out);
    run_result_free(&trained);
    const char *from = "--text @/text.txt --sample 0 --from @/model";

    write_floats(model, "wpe.weight", 2, (const int[]){1, 16});
    expect_failure(dir, from, 1, "wpe.weight.npy: a context of 1 position, expected 2 to 512");
    write_floats(model, "wpe.weight", 2, (const int[]){513, 16});
    expect_failure(dir, from, 1, "wpe.weight.npy: a context of 513 positions, expected 2 to "
                                 "512");
    write_floats(model, "wpe.weight", 2, (const int[]){8, 16});

    write_floats(model, "wte.weight", 2, (const int[]){V, 17});
    expect_failure(dir, from, 1, "wte.weight.npy: expected shape (58, 16), got (58, 17)");
    write_floats(model, "wte.weight", 2, (const int[]){V, 16});
    write_floats(model, "ln_f.weight", 1, (const int[]){17});
    expect_failure(dir, from, 1, "ln_f.weight.npy: expected shape (16,), got (17,)");
    write_floats(model, "wpe.weight", 2, (const int[]){8, 18});
    expect_failure(dir, from, 1, "give num_hiddens 16, 18 and 17: no two agree");
    write_floats(model, "wpe.weight", 2, (const int[]){8, 16});
    write_floats(model, "ln_f.weight", 1, (const int[]){16});

    write_int(model, "num_heads", 65);
    expect_failure(dir, from, 1, "num_heads.npy: 65, expected 1 to 64");
    write_int(model, "num_heads", 2);
    RunResult loaded = run_in(dir, from);   /* whole again */
    cr_expect_eq(loaded.status, 0, "stderr: %s", loaded.err);
    run_result_free(&loaded);

    expect_failure(dir, "--text @/text.txt --from @/model --layers 2", 2,
                   "--from reads a trained model, its sizes from the saved set: it takes no "
                   "--size, --layers");
    expect_failure(dir, "--text @/text.txt --from @/model --steps 5", 2,
                   "it takes no --size, --layers, --heads, --hiddens, --context, --batch, "
                   "--steps, --lr or --eval-every");
    expect_failure(dir, "--text @/text.txt --from @/model --size small", 2, "it takes no --size");
    scratch_dir_remove(model);
    scratch_dir_remove(dir);
}

/* A text with no newline trains, and its samples start from its first
 * character; --help shows --prompt's default in words, on its own line. */
Test(language_model_program, text_without_a_newline_needs_no_prompt, .timeout = 60)
{
    char dir[128];
    scratch_dir_make(dir, sizeof dir, "lm_line");
    char text[4000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "to be or not to be, that is the question. "[i % 42];
    write_file(dir, "line.txt", text, sizeof text);
    RunResult r = run_in(dir, "--text @/line.txt " TINY " --steps 3 --eval-every 3");
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "step     3") != NULL, "%s", r.out);
    run_result_free(&r);
    expect_failure(dir, "--text @/line.txt " TINY " --steps 3 --prompt 'x'", 2,
                   "--prompt: character 0 (0x78) is not in the vocabulary");
    RunResult help = run_in(dir, "--help");
    const char *prompt = strstr(help.out, "--prompt TEXT");
    cr_assert(prompt != NULL, "%s", help.out);
    const char *next = strchr(prompt, '\n');
    cr_expect(strncmp(next, "\n                     vocabulary's first character", 50) == 0 &&
                  strncmp(strchr(next + 1, '\n'), "\n  --seed", 9) == 0,
              "--prompt's help is not two lines:\n%s", prompt);
    run_result_free(&help);
    scratch_dir_remove(dir);
}
