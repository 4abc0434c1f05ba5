#define _POSIX_C_SOURCE 200809L   /* sigaction, alarm */
/*
 * grader.c - the exercise grader's main: every case quietly, then the
 * smallest failing case again, printed for a learner to read (grader.h).
 *
 *   grader [--one-line] [--file PATH]
 *
 * PATH names the learner's file in the messages. Exit status: 0 when every
 * case passes, 1 when one fails, crashes or the function is not started.
 * (tests/grader/check builds this program around the learner's file and
 * adds status 2 for a file that does not compile or link.)
 */
#include "grader.h"
#include "exercises.h"

#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    SEED = 20261128,        /* every grader draws its cases from this seed */
    MAX_ITEMS = 32,         /* tensors and lists one case may hold */
    GUARD = 16,             /* floats of guard zone on each side of an output */
    PRINT_MAX = 120,        /* a tensor larger than this is shown by its shape */
    TIME_LIMIT = 60,        /* seconds for every case together */
};

/* A guard zone's bits: 1e38, a float that a function reading past its
 * output (a loop that runs one step too far) takes into its maximum or its
 * sum, so the result shows it; a write there is found by its bits. */
static const uint32_t GUARD_BITS = 0x7e967699u;

typedef enum {
    ITEM_INPUT, ITEM_VALID_LENS, ITEM_INTS, ITEM_KEEP, ITEM_KEEP_VALID_LENS, ITEM_OUTPUT
} ItemKind;

typedef struct {
    ItemKind kind;
    const char *name;
    Tensor *tensor;          /* ITEM_INPUT, ITEM_KEEP */
    ValidLens *valid_lens;   /* ITEM_VALID_LENS */
    int *ints;               /* ITEM_INTS: the caller's, not freed */
    float *block;            /* ITEM_OUTPUT: guards, n floats, guards */
    size_t count;            /* elements (ITEM_INTS, ITEM_OUTPUT, ITEM_VALID_LENS) */
    void *copy;              /* what an input held before the call */
} Item;

static struct {
    const char *file;        /* the learner's file, for messages */
    bool one_line;
    bool verbose;            /* the second run of the chosen case: print */
    int index;               /* the case running now */
    char description[256];
    Item items[MAX_ITEMS];
    int num_items;
    size_t case_size;        /* input elements: which failing case is smallest */
    volatile sig_atomic_t in_call;
    jmp_buf fail_jump;
    char reason[512];        /* what broke, for the one-line report */
} g;

static bool started_flag = true;

void not_started(void) { started_flag = false; }

/* ---- the report --------------------------------------------------------------- */

static void print_named(const char *name, const Tensor *t)
{
    char buf[64];
    if (t->size > PRINT_MAX) {
        printf("  %s: shape %s (too large to print)\n", name,
               shape_str(buf, sizeof buf, t->ndim, t->shape));
        return;
    }
    printf("  %s =\n  ", name);
    /* tensor_fprint writes several lines; indent each by two spaces */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) {
        tensor_fprint(stdout, t);
        printf("\n");
        return;
    }
    tensor_fprint(mem, t);
    fclose(mem);
    for (const char *c = text; *c; c++) {
        putchar(*c);
        if (*c == '\n' && c[1])
            printf("  ");
    }
    printf("\n");
    free(text);
}

static void print_ints(const char *name, const int *values, size_t count)
{
    printf("  %s = tensor([", name);
    for (size_t i = 0; i < count; i++)
        printf("%s%d", i ? ", " : "", values[i]);
    printf("])\n");
}

static void print_valid_lens(const char *name, const ValidLens *v)
{
    if (!v) {
        printf("  %s = None (every key)\n", name);
        return;
    }
    if (v->ndim == 1) {
        print_ints(name, v->data, (size_t)v->shape[0]);
        return;
    }
    printf("  %s = tensor([", name);
    for (int b = 0; b < v->shape[0]; b++) {
        printf("%s[", b ? ", " : "");
        for (int q = 0; q < v->shape[1]; q++)
            printf("%s%d", q ? ", " : "", v->data[b * v->shape[1] + q]);
        printf("]");
    }
    printf("])\n");
}

/* The head of a failing case's report: which case, what it is, its inputs. */
static void report_head(void)
{
    printf("%s: failed, case %d of %d (the smallest that fails)\n", g.file, g.index + 1,
           exercise.num_cases);
    printf("  the case: %s\n", g.description);
    for (int i = 0; i < g.num_items; i++) {
        const Item *it = &g.items[i];
        if (it->kind == ITEM_INPUT)
            print_named(it->name, it->tensor);
        else if (it->kind == ITEM_VALID_LENS)
            print_valid_lens(it->name, it->valid_lens);
        else if (it->kind == ITEM_INTS)
            print_ints(it->name, it->ints, it->count);
    }
}

/* The case fails: say why (verbose: after the details the check printed),
 * then leave the case. */
static _Noreturn void fail_case(int hint, const char *reason)
{
    snprintf(g.reason, sizeof g.reason, "%s", reason);
    if (g.verbose && !g.one_line) {
        printf("  what broke: %s\n", reason);
        printf("  read hint %d of exercise %s in %s/README.md\n", hint, exercise.number,
               exercise.chapter);
    }
    longjmp(g.fail_jump, 1);
}

static bool reporting(void) { return g.verbose && !g.one_line; }

/* ---- a case's items ------------------------------------------------------------ */

static Item *add_item(ItemKind kind, const char *name)
{
    if (g.num_items == MAX_ITEMS) {
        fprintf(stderr, "grader: more than %d items in one case\n", MAX_ITEMS);
        exit(1);
    }
    Item *it = &g.items[g.num_items++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->name = name;
    return it;
}

void case_describe(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(g.description, sizeof g.description, fmt, args);
    va_end(args);
}

Tensor *case_input(const char *name, Tensor *t)
{
    Item *it = add_item(ITEM_INPUT, name);
    it->tensor = t;
    it->copy = tensor_copy(t);
    g.case_size += t->size;
    return t;
}

ValidLens *case_valid_lens(const char *name, ValidLens *valid_lens)
{
    Item *it = add_item(ITEM_VALID_LENS, name);
    it->valid_lens = valid_lens;
    if (valid_lens) {
        it->count = (size_t)valid_lens->shape[0] * (valid_lens->ndim == 2 ? valid_lens->shape[1] : 1);
        it->copy = checked_malloc("case_valid_lens", it->count, sizeof(int));
        memcpy(it->copy, valid_lens->data, it->count * sizeof(int));
    }
    return valid_lens;
}

int *case_ints(const char *name, int *values, int count)
{
    Item *it = add_item(ITEM_INTS, name);
    it->ints = values;
    it->count = (size_t)count;
    it->copy = checked_malloc("case_ints", (size_t)count + 1, sizeof(int));
    memcpy(it->copy, values, (size_t)count * sizeof(int));
    g.case_size += (size_t)count;
    return values;
}

Tensor *case_keep(Tensor *t)
{
    Item *it = add_item(ITEM_KEEP, "kept");
    it->tensor = t;
    return t;
}

ValidLens *case_keep_valid_lens(ValidLens *valid_lens)
{
    Item *it = add_item(ITEM_KEEP_VALID_LENS, "kept");
    it->valid_lens = valid_lens;
    return valid_lens;
}

float *case_output(const char *name, size_t n)
{
    Item *it = add_item(ITEM_OUTPUT, name);
    it->count = n;
    it->block = checked_malloc("case_output", n + 2 * GUARD, sizeof(float));
    for (size_t i = 0; i < n + 2 * GUARD; i++)
        memcpy(&it->block[i], &GUARD_BITS, sizeof GUARD_BITS);
    for (size_t i = 0; i < n; i++)
        it->block[GUARD + i] = NAN;
    return it->block + GUARD;
}

static void end_case(void)
{
    for (int i = 0; i < g.num_items; i++) {
        Item *it = &g.items[i];
        if (it->kind == ITEM_INPUT || it->kind == ITEM_KEEP)
            tensor_free(it->tensor);
        if (it->kind == ITEM_INPUT)
            tensor_free(it->copy);
        else
            free(it->copy);
        if (it->kind == ITEM_VALID_LENS || it->kind == ITEM_KEEP_VALID_LENS)
            valid_lens_free(it->valid_lens);
        free(it->block);
    }
    g.num_items = 0;
    g.case_size = 0;
    g.description[0] = '\0';
}

/* With GRADER_TRACE set, every call is announced on stderr first: when a
 * sanitizer stops the program inside the learner's function, check reads
 * the last announcement to say which case it was. */
void case_calling(void)
{
    static int trace = -1;
    if (trace < 0)
        trace = getenv("GRADER_TRACE") != NULL;
    if (trace)
        fprintf(stderr, "grader: case %d of %d: %s\n", g.index + 1, exercise.num_cases,
                g.description);
    g.in_call = 1;
}

void case_called(void)
{
    g.in_call = 0;
    if (!started_flag)
        return;   /* main says "not started yet" after this case */
    char reason[256], index[64];
    for (int i = 0; i < g.num_items; i++) {
        const Item *it = &g.items[i];
        if (it->kind == ITEM_INPUT) {
            const Tensor *before = it->copy;
            for (size_t j = 0; j < before->size; j++)
                if (memcmp(&before->data[j], &it->tensor->data[j], sizeof(float)) != 0) {
                    snprintf(reason, sizeof reason,
                             "your function changed its input %s at %s: an input is only read",
                             it->name, tensor_index_str(index, sizeof index, j, before->ndim,
                                                        before->shape));
                    if (reporting())
                        report_head();
                    fail_case(1, reason);
                }
        } else if ((it->kind == ITEM_VALID_LENS && it->valid_lens) || it->kind == ITEM_INTS) {
            const int *now = it->kind == ITEM_INTS ? it->ints : it->valid_lens->data;
            if (memcmp(it->copy, now, it->count * sizeof(int)) != 0) {
                snprintf(reason, sizeof reason,
                         "your function changed its input %s: an input is only read", it->name);
                if (reporting())
                    report_head();
                fail_case(1, reason);
            }
        } else if (it->kind == ITEM_OUTPUT) {
            for (size_t j = 0; j < 2 * GUARD; j++) {
                size_t at = j < GUARD ? j : GUARD + it->count + (j - GUARD);
                if (memcmp(&it->block[at], &GUARD_BITS, sizeof GUARD_BITS) != 0) {
                    if (j < GUARD)
                        snprintf(reason, sizeof reason,
                                 "your function wrote before the start of %s, %zu floats early",
                                 it->name, GUARD - j);
                    else
                        snprintf(reason, sizeof reason,
                                 "your function wrote past the end of %s (%zu floats), at "
                                 "index %zu", it->name, it->count, it->count + (j - GUARD));
                    if (reporting())
                        report_head();
                    fail_case(1, reason);
                }
            }
        }
    }
}

/* ---- checks -------------------------------------------------------------------- */

void expect_that(bool ok, int hint, const char *fmt, ...)
{
    if (ok)
        return;
    char reason[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(reason, sizeof reason, fmt, args);
    va_end(args);
    if (reporting())
        report_head();
    fail_case(hint, reason);
}

void expect_tensor(const char *name, const Tensor *got, int ndim, const int *shape, int hint)
{
    char want[64], have[64];
    expect_that(got != NULL, hint, "your function returned NULL for %s, not a tensor", name);
    shape_str(want, sizeof want, ndim, shape);
    expect_that(tensor_has_shape(got, ndim, shape), hint, "%s has shape %s, must be %s", name,
                shape_str(have, sizeof have, got->ndim, got->shape), want);
}

static bool close_enough(float expected, float got, double atol, double rtol)
{
    if (isnan(got) || isnan(expected))
        return isnan(got) && isnan(expected);
    if (isinf(expected))
        return got == expected;
    return fabs((double)got - (double)expected) <= atol + rtol * fabs((double)expected);
}

void expect_close_floats(const char *name, const float *expected, const float *got, int ndim,
                         const int *shape, double atol, double rtol, int hint)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    for (size_t j = 0; j < n; j++) {
        if (close_enough(expected[j], got[j], atol, rtol))
            continue;
        char index[64], reason[512];
        tensor_index_str(index, sizeof index, j, ndim, shape);
        snprintf(reason, sizeof reason,
                 "%s%s is %.6g, expected %.6g (tolerance %.0e + %.0e * |expected|)", name, index,
                 (double)got[j], (double)expected[j], atol, rtol);
        if (reporting()) {
            report_head();
            Tensor *e = tensor_from(expected, ndim, shape), *y = tensor_from(got, ndim, shape);
            char label[96];
            snprintf(label, sizeof label, "expected %s", name);
            print_named(label, e);
            snprintf(label, sizeof label, "your %s", name);
            print_named(label, y);
            tensor_free(e);
            tensor_free(y);
        }
        fail_case(hint, reason);
    }
}

void expect_close(const char *name, const Tensor *expected, const Tensor *got, double atol,
                  double rtol, int hint)
{
    expect_tensor(name, got, expected->ndim, expected->shape, hint);
    expect_close_floats(name, expected->data, got->data, expected->ndim, expected->shape, atol,
                        rtol, hint);
}

void expect_equal_ints(const char *name, const int *expected, const int *got, int count,
                       int hint)
{
    for (int i = 0; i < count; i++) {
        if (expected[i] == got[i])
            continue;
        char reason[256];
        snprintf(reason, sizeof reason, "%s[%d] is %d, expected %d", name, i, got[i],
                 expected[i]);
        if (reporting()) {
            report_head();
            print_ints("expected", expected, (size_t)count);
            print_ints("yours", got, (size_t)count);
        }
        fail_case(hint, reason);
    }
}

/* The valid_len of row r of weights (B, T, n_k) (the whole row when NULL). */
static int row_valid_len(const Tensor *w, const ValidLens *v, size_t row)
{
    int n_k = w->shape[w->ndim - 1];
    if (!v)
        return n_k;
    int num_queries = w->ndim >= 3 ? w->shape[w->ndim - 2] : 1;
    return valid_len_at(v, (int)(row / (size_t)num_queries), (int)(row % (size_t)num_queries));
}

static void show_result(const char *name, const Tensor *t)
{
    if (reporting()) {
        report_head();
        char label[96];
        snprintf(label, sizeof label, "your %s", name);
        print_named(label, t);
    }
}

/* "weights[0, 1]": the row r of w by its index, or the name alone for 1-D w. */
static const char *row_name(char *buf, size_t len, const char *name, const Tensor *w, size_t r)
{
    char index[64] = "";
    if (w->ndim > 1)
        tensor_index_str(index, sizeof index, r, w->ndim - 1, w->shape);
    snprintf(buf, len, "%s%s", name, index);
    return buf;
}

void expect_rows_sum_to_one(const char *name, const Tensor *w, const ValidLens *v, int hint)
{
    int n_k = w->shape[w->ndim - 1];
    size_t rows = n_k ? w->size / (size_t)n_k : 0;
    for (size_t r = 0; r < rows; r++) {
        double sum = 0;
        for (int j = 0; j < n_k; j++)
            sum += w->data[r * (size_t)n_k + (size_t)j];
        int valid = row_valid_len(w, v, r);
        double want = valid > 0 ? 1.0 : 0.0;
        if (fabs(sum - want) <= 1e-5)
            continue;
        char row[96], reason[256];
        row_name(row, sizeof row, name, w, r);
        if (valid > 0)
            snprintf(reason, sizeof reason, "%s sums to %.6g, must sum to 1", row, sum);
        else
            snprintf(reason, sizeof reason,
                     "%s has no valid key (valid_len 0) and sums to %.6g, must be all zeros",
                     row, sum);
        show_result(name, w);
        fail_case(hint, reason);
    }
}

void expect_masked_zero(const char *name, const Tensor *w, const ValidLens *v, int hint)
{
    int n_k = w->shape[w->ndim - 1];
    size_t rows = n_k ? w->size / (size_t)n_k : 0;
    for (size_t r = 0; r < rows; r++) {
        int valid = row_valid_len(w, v, r);
        for (int j = valid; j < n_k; j++) {
            float x = w->data[r * (size_t)n_k + (size_t)j];
            if (x == 0.0f)
                continue;
            char row[96], reason[256];
            snprintf(reason, sizeof reason,
                     "%s: masked weight at key %d is %.6g, must be exactly 0 (valid_len %d)",
                     row_name(row, sizeof row, name, w, r), j, (double)x, valid);
            show_result(name, w);
            fail_case(hint, reason);
        }
    }
}

void expect_finite(const char *name, const Tensor *got, int hint)
{
    size_t at = tensor_first_non_finite(got);
    if (at == SIZE_MAX)
        return;
    char index[64], reason[256];
    snprintf(reason, sizeof reason, "%s%s is %s", name,
             tensor_index_str(index, sizeof index, at, got->ndim, got->shape),
             non_finite_name(got->data[at]));
    show_result(name, got);
    fail_case(hint, reason);
}

/* ---- drawing cases --------------------------------------------------------------- */

int draw_int(Rng *rng, int low, int high)
{
    return low + (int)rng_below(rng, (uint32_t)(high - low + 1));
}

int draw_size(Rng *rng, int index, int count, int low, int high)
{
    /* the limit grows from low to high over the first 60% of the cases */
    double reach = (index + 1) / (0.6 * count);
    int limit = low + (int)((high - low) * (reach < 1 ? reach : 1));
    return draw_int(rng, low, limit);
}

float draw_scale(Rng *rng, int index)
{
    (void)rng;
    if (index < 8)
        return 1.0f;
    switch (index % 4) {
    case 3:  return 1e4f;
    case 2:  return 30.0f;
    default: return 1.0f;
    }
}

Tensor *draw_normal(Rng *rng, float scale, int ndim, const int *shape)
{
    Tensor *t = tensor_normal(rng, 0.0f, 1.0f, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] *= scale;
    return t;
}

ValidLens *draw_valid_lens(Rng *rng, int batch, int num_queries, int num_keys, bool two_d)
{
    int count = two_d ? batch * num_queries : batch;
    int *lens = checked_malloc("draw_valid_lens", (size_t)count, sizeof(int));
    for (int i = 0; i < count; i++) {
        switch (rng_below(rng, 4)) {
        case 0:  lens[i] = 0; break;
        case 1:  lens[i] = num_keys; break;
        default: lens[i] = draw_int(rng, 1, num_keys); break;
        }
    }
    ValidLens *v = two_d ? valid_lens_2d(lens, batch, num_queries) : valid_lens_1d(lens, batch);
    free(lens);
    return v;
}

/* ---- crashes, exits and loops inside the learner's function ------------------------ */

static void say(const char *text) { (void)!write(STDOUT_FILENO, text, strlen(text)); }

static void say_case_number(void)
{
    char digits[16];
    int n = 0, value = g.index + 1;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n)
        (void)!write(STDOUT_FILENO, &digits[--n], 1);
}

static void on_signal(int sig)
{
    const char *what = sig == SIGSEGV ? "crashed (segmentation fault: a read or write outside "
                                        "a tensor, or through NULL)"
                     : sig == SIGBUS  ? "crashed (bus error)"
                     : sig == SIGFPE  ? "crashed (arithmetic error: an integer division by zero?)"
                     : sig == SIGABRT ? "stopped (abort)"
                     : sig == SIGALRM ? "did not finish in time (a loop that never ends?)"
                                      : "stopped by a signal";
    if (!g.one_line) {
        say(g.file);
        say(": failed, case ");
    } else {
        say("failed: case ");
    }
    say_case_number();
    say(g.in_call || sig == SIGALRM ? ": your function " : ": the grader ");
    say(what);
    say("\n");
    if (!g.one_line) {
        say("  the case: ");
        say(g.description);
        say("\n");
    }
    _exit(1);
}

static void on_exit_call(void)
{
    if (!g.in_call)
        return;
    fflush(stderr);
    if (g.one_line)
        printf("failed: case %d: your function ended the program (its message is above)\n",
               g.index + 1);
    else
        printf("%s: failed, case %d of %d: your function ended the program; a call it made "
               "refused its arguments (the message above)\n  the case: %s\n",
               g.file, g.index + 1, exercise.num_cases, g.description);
    fflush(stdout);
    _exit(1);
}

static void catch_crashes(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    int signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGALRM};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        sigaction(signals[i], &sa, NULL);
    atexit(on_exit_call);
    /* GRADER_TIME_LIMIT (seconds) shortens the limit, for the grader's own tests */
    const char *limit = getenv("GRADER_TIME_LIMIT");
    alarm(limit && atoi(limit) > 0 ? (unsigned)atoi(limit) : TIME_LIMIT);
}

/* ---- main ----------------------------------------------------------------------------- */

/* Run case `index`; true when it passes. */
static bool run_case(int index)
{
    g.index = index;
    Rng rng = rng_new_stream(SEED, (uint64_t)index + 1);
    bool passed = false;
    if (setjmp(g.fail_jump) == 0) {
        exercise.grade_case(&rng, index);
        passed = true;
    }
    g.in_call = 0;
    return passed;
}

int main(int argc, char **argv)
{
    g.file = exercise.name;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--one-line") == 0)
            g.one_line = true;
        else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc)
            g.file = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--one-line] [--file PATH]\n", argv[0]);
            return 2;
        }
    }
    program_name(exercise.name);
    setvbuf(stdout, NULL, _IOLBF, 0);
    catch_crashes();

    /* pass 1: every case, quietly; keep the smallest that fails */
    int failing = -1, failures = 0;
    size_t failing_size = SIZE_MAX;
    for (int i = 0; i < exercise.num_cases; i++) {
        bool passed = run_case(i);
        size_t size = g.case_size;
        end_case();
        if (!started_flag) {
            if (g.one_line)
                printf("not started yet\n");
            else
                printf("%s: not started yet. Write my_%s there, delete its not_started() line, "
                       "and run this again; the hints are under exercise %s in "
                       "%s/README.md.\n",
                       g.file, exercise.name, exercise.number, exercise.chapter);
            return 1;
        }
        if (!passed) {
            failures++;
            if (size < failing_size) {
                failing = i;
                failing_size = size;
            }
        }
    }
    if (failing < 0) {
        if (g.one_line)
            printf("passed\n");
        else
            printf("%s: passed, all %d cases of exercise %s\n", g.file, exercise.num_cases,
                   exercise.number);
        return 0;
    }

    /* pass 2: the smallest failing case again, printed */
    g.verbose = true;
    run_case(failing);
    end_case();
    if (g.one_line)
        printf("failed: case %d of %d: %s\n", failing + 1, exercise.num_cases, g.reason);
    else
        printf("  (%d of the %d cases fail)\n", failures, exercise.num_cases);
    return 1;
}
