/*
 * grader.h - what every exercise's grader is made of (the learner runs it
 * with `make check`; the top README says how).
 *
 * An exercise NAME is three files: the starter NN_chapter/exercises/NAME.c
 * (compiles, fails), the worked answer NN_chapter/exercises/answers/NAME.c,
 * and its grader tests/grader/NAME.c, which defines `exercise` below.
 *
 * Grading takes two programs. The judge is grader.c (main, the cases and
 * the report) with tests/grader/NAME.c and common/: it draws the cases,
 * computes the repository's answers, compares and says the verdict, and
 * never links or loads the learner's code. The runner is the learner's
 * file with judge/runner.c and only what the file calls of common/ (no
 * name of the exercise's answer in it). In the judge, my_NAME is a stub
 * (judge/stubs.awk writes it from the declaration in exercises_0N.h) that
 * sends the arguments, with the memory they point into (an input's data,
 * an output with its guard zones), over a pipe to the runner, which calls
 * the learner's function and sends back that memory and the results; a
 * grade_case reads as if it called the function itself. The runner starts
 * with an empty environment in a process group of its own, which the
 * judge kills at the end; the time limit counts from its start. Whatever
 * the runner does (constructors, its own expf, exit, fork, a hang, bytes
 * written to the channel) makes its results wrong, late or missing, and
 * each of those is a verdict of the judge's, in one line.
 *
 * A grader draws its cases from a fixed seed, case by case: case i always
 * gets the same numbers, so a failure can be run again. The first cases are
 * the edges (valid_len 0 and full, T = 1, n_k = 1, H = 1, odd sizes), then
 * sizes and magnitudes grow, up to scores of 1e4. Every case is held to the
 * chapter's properties (rows sum to 1, masked weights exactly 0, shapes)
 * and to the repository's own function, within a stated tolerance.
 *
 * grader.c runs every case quietly, then runs the smallest failing one
 * again and prints it: the inputs, the expected value, the learner's value,
 * which property broke and which hint of the chapter's page to read.
 *
 * In a grade_case function, checks that fail do not return: the case ends
 * there. Every tensor a case makes is handed to case_input or case_keep,
 * which free it when the case ends. Every buffer a learner's function gets
 * is one a case_* call registered (the stub finds it there and sends it
 * whole), or a tensor, or memory judge/stubs.awk knows the size of.
 */
#ifndef GRADER_H
#define GRADER_H

#include <stdbool.h>
#include <stddef.h>

#include "random.h"
#include "tensor.h"
#include "valid_lens.h"

typedef struct {
    const char *name;      /* the file's name without .c: masked_softmax */
    const char *chapter;   /* the folder of the page: 02_softmax_mask */
    const char *number;    /* the exercise's number on the page: "2.2" */
    int num_cases;         /* at least 100 */
    /* Draw case `index` from rng, call the learner's function, check it. */
    void (*grade_case)(Rng *rng, int index);
    /* The repository's functions that compute what the exercise asks for,
     * space-separated: a file that calls one of them, or any function of
     * common/ that calls one (tests/grader/check finds those), fails. */
    const char *refuses;
    /* The page of the chapter whose exercise section holds it and its
     * hints: "streaming.md"; NULL for the chapter's README.md. */
    const char *page;
} Exercise;

extern const Exercise exercise;   /* each tests/grader/NAME.c defines one */

/* ---- describing a case --------------------------------------------------- */
/* One line that says what the case is: "B = 2, T = 3, n_k = 4, scores up to 1e4". */
void case_describe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An input: printed with a failing case, checked unchanged after the
 * learner's call, freed when the case ends. Returns t. */
Tensor *case_input(const char *name, Tensor *t);
ValidLens *case_valid_lens(const char *name, ValidLens *valid_lens);
/* A list of integers (a permutation, cache positions), shown like a tensor. */
int *case_ints(const char *name, int *values, int count);
/* Freed when the case ends (expected values, the learner's result). */
Tensor *case_keep(Tensor *t);
ValidLens *case_keep_valid_lens(ValidLens *valid_lens);
/* Scratch memory of n floats for a learner's function to write into: NaN
 * in every slot (an untouched one fails), and guard zones of n floats (64
 * at least) on both sides that case_called checks; past them the sanitizer
 * sees the block's end. Freed when the case ends. */
float *case_output(const char *name, size_t n);
/* The same for n ints, each -12345 before the call. */
int *case_output_ints(const char *name, size_t n);

/* Call right before and right after the learner's function: checks that it
 * left its inputs and the guard zones alone, and whether it is still the
 * starter (not_started). */
void case_calling(void);
void case_called(void);

/* ---- checks: each returns only when it holds ------------------------------ */
/* hint: which of the exercise's three hints to point to (1, 2 or 3). */
void expect_tensor(const char *name, const Tensor *got, int ndim, const int *shape, int hint);
/* |got - expected| <= atol + rtol * |expected| everywhere; NaN never passes. */
void expect_close(const char *name, const Tensor *expected, const Tensor *got,
                  double atol, double rtol, int hint);
/* The same for n floats in plain arrays, shaped (ndim, shape) for the report. */
void expect_close_floats(const char *name, const float *expected, const float *got,
                         int ndim, const int *shape, double atol, double rtol, int hint);
/* Integers equal, element by element. */
void expect_equal_ints(const char *name, const int *expected, const int *got, int count,
                       int hint);
/* weights (..., n_k) as rows of n_k: every row with a valid key sums to 1
 * within 1e-5, a row with none sums to 0. valid_lens may be NULL; rows are
 * taken as (B, T, n_k) for it. */
void expect_rows_sum_to_one(const char *name, const Tensor *weights,
                            const ValidLens *valid_lens, int hint);
/* Every weight of a key at or past its query's valid_len is exactly 0. */
void expect_masked_zero(const char *name, const Tensor *weights,
                        const ValidLens *valid_lens, int hint);
/* Every element finite. */
void expect_finite(const char *name, const Tensor *got, int hint);
/* A property of the exercise's own: when ok is false the case fails with
 * the message (printf-style). */
void expect_that(bool ok, int hint, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- drawing cases --------------------------------------------------------- */
/* An integer in [low, high]. */
int draw_int(Rng *rng, int low, int high);
/* The size of case `index` of `count`: the first cases small, then up to
 * high, so that the smallest failing case is small to read. */
int draw_size(Rng *rng, int index, int count, int low, int high);
/* A scale for case `index`: 1 most of the time, up to 1e4 for every fourth
 * case after the first few (where a softmax without its maximum overflows). */
float draw_scale(Rng *rng, int index);
/* The last LARGE_CASES cases of `count` are large: sizes in the hundreds
 * for a row, odd ones for a layer, past any buffer a learner might fix. */
enum { LARGE_CASES = 3 };
bool large_case(int index, int count);
/* Every tenth case, from the sixth on, probes the mask (mask_probe below). */
bool mask_probe_case(int index);
/* The magnitude a mask probe uses: 1e5, or 1e30 every other probe. */
float mask_probe_magnitude(int index);
/* Fills a row of n scores with kept ones (j < valid_len) near -magnitude
 * and masked ones near +magnitude: a mask of any finite value above
 * -magnitude then leaves weight on a masked key, and only a masked weight
 * of exactly 0 passes. Near: within magnitude * 1e-5, drawn. */
void mask_probe_row(Rng *rng, float *row, int n, int valid_len, float magnitude);
/* A tensor of normal values times scale. */
Tensor *draw_normal(Rng *rng, float scale, int ndim, const int *shape);
/* valid_lens for (B, T) queries of n_k keys: 1-D when two_d is false.
 * Lengths include 0 and n_k often. */
ValidLens *draw_valid_lens(Rng *rng, int batch, int num_queries, int num_keys, bool two_d);

#endif
