/*
 * test_output.c - standard output is checked like a file: a program whose
 * output cannot be written (a full disk: /dev/full) says so in one line on
 * stderr and exits 1, instead of exiting 0 with its output lost.
 *
 * Every program in the chapter folders is found the way the Makefile finds
 * them (an executable file without a dot in its name), so a new program is
 * covered without touching this file.
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

/* Every built program of every chapter folder: "03_self_attention/streaming". */
static int find_programs(char names[][320], int max)
{
    static const char *const chapters[] = {
        "01_dot_product", "02_softmax_mask", "03_self_attention",
        "04_transpose_qkv", "05_multihead", "06_permutation_invariance",
    };
    int count = 0;
    for (size_t c = 0; c < sizeof chapters / sizeof chapters[0]; c++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/%s", BIN_DIR, chapters[c]);
        DIR *d = opendir(dir);
        cr_assert_not_null(d, "cannot list %s", dir);
        struct dirent *e;
        while ((e = readdir(d)) != NULL && count < max) {
            char path[512];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (strchr(e->d_name, '.') == NULL && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                (st.st_mode & S_IXUSR))
                snprintf(names[count++], sizeof names[0], "%s/%s", chapters[c], e->d_name);
        }
        closedir(d);
    }
    return count;
}

Test(output, help_of_every_program_into_a_full_disk, .timeout = 60)
{
    char names[64][320];
    int count = find_programs(names, 64);
    cr_assert_geq(count, 15, "found only %d programs", count);
    for (int i = 0; i < count; i++)
        expect_one_line_failure(names[i], "--help");
}

Test(output, every_chapter_run_into_a_full_disk, .timeout = 120)
{
    static const char *const programs[] = {
        "01_dot_product/dot_product", "02_softmax_mask/softmax_mask",
        "03_self_attention/self_attention", "04_transpose_qkv/transpose_qkv",
        "05_multihead/multihead", "06_permutation_invariance/permutation_invariance",
    };
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        expect_one_line_failure(programs[i], "");
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
