/*
 * test_output.c - standard output is checked like a file: a program whose
 * output cannot be written (a full disk: /dev/full) says so in one line on
 * stderr and exits 1, instead of exiting 0 with its output lost.
 *
 * Every program of the repository is found in the Makefile's list of them
 * (find_programs), so a new program is covered without touching this file.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

/* Run "BIN_DIR/program args" with stdout on /dev/full; returns the exit
 * status and what it wrote on stderr (the caller frees). */
static char *run_into_full_disk(const char *program, const char *args, int *status)
{
    char err_path[] = "/tmp/full_err_XXXXXX";
    int fd = mkstemp(err_path);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/%s %s </dev/null >/dev/full 2>%s", BIN_DIR, program, args,
             err_path);
    int raw = system(cmd);
    *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    char *err = read_text_file(err_path, NULL);
    unlink(err_path);
    return err;
}

static void expect_one_line_failure(const char *program, const char *args)
{
    int status;
    char *err = run_into_full_disk(program, args, &status);
    char expected[256];
    const char *name = strrchr(program, '/') + 1;
    snprintf(expected, sizeof expected, "%s: cannot write the output: No space left on device\n",
             name);
    cr_expect_eq(status, 1, "%s %s > /dev/full: status %d", program, args, status);
    cr_expect_str_eq(err ? err : "", expected, "%s %s > /dev/full", program, args);
    free(err);
}

Test(output, help_of_every_program_into_a_full_disk, .timeout = 60)
{
    char names[64][320];
    int count = find_programs(names, 64);
    cr_assert_geq(count, 15, "found only %d programs", count);
    for (int i = 0; i < count; i++)
        expect_one_line_failure(names[i], "--help");
}

/* Arguments that keep a program's run short; the others run as they are. */
static const char *quick_args(const char *program)
{
    static const char *const quick[][2] = {
        {"03_self_attention/cost", "--cost-max 256"},
        {"05_multihead/train", "--steps 3 --examples 10"},
        {"05_multihead/heads_experiment", "--steps 3 --examples 10 --seeds 1"},
        {"05_multihead/head_importance", "--steps 3 --examples 10 --orders 1"},
        {"05_multihead/bench", "--config 1,8,8,2 --repeats 1"},
        {"05_multihead/decode", "--no-timings"},
        {"05_multihead/layer_files", "--from tests/fixtures/multihead/bias_2d --heads 4"},
        {"05_multihead/decode_files", "--from tests/fixtures/decode/heads4_kv2 --heads 4 "
                                      "--kv-heads 2"},
        {"05_multihead/train_bench", "--countries 8 --hiddens 8 --heads 2 --batch 4"},
        {"06_permutation_invariance/positions", "--steps 3 --examples 10 --seeds 1"},
        {"06_permutation_invariance/induction_heads", "--steps 10 --examples 10 --seeds 1 "
                                                      "--batch 4"},
        {"06_permutation_invariance/language_model", "--steps 2 --layers 1 --hiddens 16 "
                                                     "--heads 2 --context 16 --batch 2 "
                                                     "--sample 10"},
    };
    for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++)
        if (strcmp(program, quick[i][0]) == 0)
            return quick[i][1];
    return "";
}

Test(output, every_program_run_into_a_full_disk, .timeout = 240)
{
    char names[64][320];
    int count = find_programs(names, 64);
    cr_assert_geq(count, 20, "found only %d programs", count);
    for (int i = 0; i < count; i++)
        expect_one_line_failure(names[i], quick_args(names[i]));
}

/* A reader that stops early ends the program quietly, as with any Unix
 * tool: SIGPIPE, and nothing on stderr. */
Test(output, a_closed_pipe_ends_quietly, .timeout = 60)
{
    char cmd[512], err_path[] = "/tmp/pipe_err_XXXXXX";
    int fd = mkstemp(err_path);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s/06_permutation_invariance/permutation_invariance 2>%s "
             "| head -c 1 >/dev/null", BIN_DIR, err_path);
    cr_expect_eq(system(cmd), 0);
    char *err = read_text_file(err_path, NULL);
    cr_expect_str_eq(err ? err : "(unreadable)", "");
    free(err);
    unlink(err_path);
}
