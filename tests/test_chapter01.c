/* test_chapter01.c - the dictionary story runs and finds Tokyo. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

Test(chapter01, japan_gives_tokyo)
{
    RunResult r = run_program("01_dot_product/dot_product", "");
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "capital[\"Japan\"]  ->  \"Tokyo\"") != NULL);
    cr_expect(strstr(r.out, "similarity = queries @ keys^T = tensor([[1.0000, 0.0000, 0.0000]])") != NULL);
    cr_expect(strstr(r.out, "one-hot at 0: \"Tokyo\"") != NULL);
    cr_expect(strstr(r.out, "max |S - S^T| = 0\n") != NULL, "Q K^T with Q = K is exactly symmetric");
    run_result_free(&r);
}

Test(chapter01, other_keys_and_a_missing_key)
{
    RunResult r = run_program("01_dot_product/dot_product", "--query USA");
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "one-hot at 1: \"Washington D.C.\"") != NULL);
    run_result_free(&r);
    r = run_program("01_dot_product/dot_product", "--query France");
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "KeyError: 'France'") != NULL);
    cr_expect(strstr(r.out, "answer = similarity @ values  = tensor([[0.0000, 0.0000, 0.0000]])") != NULL);
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

/* The accuracy column of noisy_query's table, one value per noise level. */
static int read_accuracies(const char *out, double *acc, int max)
{
    int n = 0;
    const char *line = strstr(out, "right value found");
    while (line && (line = strchr(line, '\n')) != NULL && n < max) {
        double noise, value;
        line++;
        if (sscanf(line, " %lf %lf%%", &noise, &value) != 2)
            break;
        acc[n++] = value;
    }
    return n;
}

Test(chapter01, noisy_query_solution)
{
    RunResult r = run_program("01_dot_product/noisy_query", "--trials 1000");
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "(chance: 33.3%)") != NULL);
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
