/* test_chapter01.c - the dictionary story: every key finds its value, a
 * missing key gets zeros, and the noisy lookup behaves. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

/* The numbers of "name = tensor(...)" in out, compared with expected. */
static void expect_tensor(const char *out, const char *name, int occurrence,
                          const double *expected, int count, double tolerance)
{
    double got[64];
    int n = tensor_numbers_in(out, name, occurrence, got, 64);
    cr_assert_eq(n, count, "'%s' has %d numbers, expected %d in:\n%s", name, n, count, out);
    for (int i = 0; i < count; i++)
        cr_expect(fabs(got[i] - expected[i]) <= tolerance, "%s[%d] = %g, expected %g", name, i,
                  got[i], expected[i]);
}

static const double ONE_HOT[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};

/* Each key finds its own value: similarity and answer one-hot at the key. */
Test(chapter01, every_key_finds_its_value)
{
    static const char *const words[] = {"Japan", "USA", "British"};
    for (int k = 0; k < 3; k++) {
        char args[64];
        snprintf(args, sizeof args, "--query %s", words[k]);
        RunResult r = run_program("01_dot_product/dot_product", args);
        cr_expect_eq(r.status, 0, "%s: stderr: %s", args, r.err);
        expect_tensor(r.out, "similarity = queries @ keys^T", 0, ONE_HOT[k], 3, 0.0);
        expect_tensor(r.out, "answer = similarity @ values ", 0, ONE_HOT[k], 3, 0.0);
        /* Q K^T with Q = K is symmetric to the last bit */
        double s[9];
        cr_assert_eq(tensor_numbers_in(r.out, "similarity = keys @ keys^T (3, 3)", 0, s, 9), 9);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                cr_expect_eq(s[i * 3 + j], s[j * 3 + i], "S[%d][%d] != S[%d][%d]", i, j, j, i);
        run_result_free(&r);
    }
}

/* A word that is no key: zeros with 0/1 similarities, the uniform average
 * of the values once softmax makes the weights. */
Test(chapter01, missing_key_gives_zeros_then_the_average)
{
    RunResult r = run_program("01_dot_product/dot_product", "--query France");
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    static const double zeros[3] = {0, 0, 0}, third[3] = {1 / 3.0, 1 / 3.0, 1 / 3.0};
    expect_tensor(r.out, "similarity = queries @ keys^T", 0, zeros, 3, 0.0);
    expect_tensor(r.out, "answer = similarity @ values ", 0, zeros, 3, 0.0);
    expect_tensor(r.out, "softmax(similarity)         ", 0, third, 3, 5e-5);
    expect_tensor(r.out, "softmax(similarity) @ values", 0, third, 3, 5e-5);
    run_result_free(&r);
    /* a key that matches gets no such line: its weights are not uniform */
    r = run_program("01_dot_product/dot_product", "");
    double w[3];
    cr_expect_eq(tensor_numbers_in(r.out, "softmax(similarity)         ", 0, w, 3), -1);
    run_result_free(&r);
}

Test(chapter01, bad_options_exit_2_with_one_line)
{
    static const char *const cases[][2] = {
        {"--query Germany", "not in the vocabulary"},
        {"--query", "--query needs a value"},
        {"--seed -3", "--seed expects a whole number"},
        {"--seed 12x", "--seed expects a whole number"},
        {"--frobnicate", "unknown option '--frobnicate'"},
    };
    expect_bad_options("01_dot_product/dot_product", cases, sizeof cases / sizeof cases[0]);
}

/* The accuracy column of noisy_query's table, one value per noise level:
 * the lines that hold a number and a percentage. */
static int read_accuracies(const char *out, double *acc, int max)
{
    int n = 0;
    for (const char *line = out; line && *line && n < max; line = strchr(line, '\n')) {
        double noise, value;
        char percent;
        if (*line == '\n')
            line++;
        if (sscanf(line, " %lf %lf%c", &noise, &value, &percent) == 3 && percent == '%')
            acc[n++] = value;
    }
    return n;
}

Test(chapter01, noisy_query_solution)
{
    RunResult r = run_program("01_dot_product/noisy_query", "--trials 1000");
    cr_expect_eq(r.status, 0);
    double acc[8];
    int n = read_accuracies(r.out, acc, 8);
    cr_assert_eq(n, 6, "six noise levels in:\n%s", r.out);
    /* no noise: the right key always wins */
    cr_expect_eq(acc[0], 100.0);
    /* more noise never helps (up to sampling error of 1000 trials) */
    for (int i = 1; i < n; i++)
        cr_expect(acc[i] <= acc[i - 1] + 3.0, "level %d: %.1f%% after %.1f%%", i, acc[i], acc[i - 1]);
    /* a lot of noise: close to chance, 1 in 3, and far from perfect */
    cr_expect(acc[n - 1] > 33.3 - 5.0 && acc[n - 1] < 33.3 + 12.0, "noise 4: %.1f%%", acc[n - 1]);
    run_result_free(&r);

    /* 20 keys: chance is 5%, and the noisiest level comes close to it */
    r = run_program("01_dot_product/noisy_query", "--keys 20 --dim 8 --trials 1000");
    cr_expect_eq(r.status, 0);
    n = read_accuracies(r.out, acc, 8);
    cr_assert_eq(n, 6);
    cr_expect(acc[n - 1] < 5.0 + 8.0, "20 keys, noise 4: %.1f%%", acc[n - 1]);
    run_result_free(&r);
    r = run_program("01_dot_product/noisy_query", "--keys 1");
    cr_expect_eq(r.status, 2);
    run_result_free(&r);
}
