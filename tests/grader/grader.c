#include "platform_names.h"   /* first: strsignal and the rest under strict POSIX, and on macOS */
/*
 * grader.c - the judge's main: every case quietly, then the smallest
 * failing case again, printed for a learner to read (grader.h).
 *
 *   grader --runner PROGRAM [--one-line] [--file PATH]
 *   grader --describe        the exercise's settings: name, chapter, number,
 *                            cases, and the repository functions it refuses
 *
 * PROGRAM is the runner that holds the learner's function (judge/runner.c,
 * built by tests/grader/check); PATH names the learner's file in the
 * messages. Exit status: 0 when every case passes, 1 when one fails, the
 * runner crashes, ends, hangs or answers what cannot be read, or the
 * function is not started, 3 when a sanitizer stopped the runner (check
 * reads the report). (tests/grader/check builds the two programs and adds
 * status 2 for a file that does not compile or link.)
 */
#include "grader.h"
#include "exercises.h"
#define JUDGE   /* judge/sides.h: the judge's side of each call */
#include "judge/sides.h"

#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    SEED = 20261128,        /* every grader draws its cases from this seed */
    MAX_ITEMS = 32,         /* tensors and lists one case may hold */
    GUARD_MIN = 64,         /* elements of guard zone on each side of an output, at least */
    UNWRITTEN_INT = -12345, /* an int output's slots before the call */
    PRINT_MAX = 120,        /* a tensor larger than this is shown by its shape */
    TIME_LIMIT = 60,        /* seconds for every case together */
};

/* A guard zone's bits: 1e38, a float that a function reading past its
 * output (a loop that runs one step too far) takes into its maximum or its
 * sum, so the result shows it; a write there is found by its bits. */
static const uint32_t GUARD_BITS = 0x7e967699u;
_Static_assert(sizeof(float) == 4 && sizeof(int) == 4, "a guard zone is checked 4 bytes at a time");

typedef enum {
    ITEM_INPUT, ITEM_VALID_LENS, ITEM_INTS, ITEM_KEEP, ITEM_KEEP_VALID_LENS, ITEM_OUTPUT,
    ITEM_OUTPUT_INTS
} ItemKind;

typedef struct {
    ItemKind kind;
    const char *name;
    Tensor *tensor;          /* ITEM_INPUT, ITEM_KEEP */
    ValidLens *valid_lens;   /* ITEM_VALID_LENS */
    int *ints;               /* ITEM_INTS: the caller's, not freed */
    float *block;            /* ITEM_OUTPUT: guards, n floats, guards */
    int *int_block;          /* ITEM_OUTPUT_INTS: guards, n ints, guards */
    size_t guard;            /* elements of guard zone on each side */
    size_t count;            /* elements (ITEM_INTS, ITEM_OUTPUT(_INTS), ITEM_VALID_LENS) */
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

/* Notes, where the waiting parent sees it, whether the learner's function
 * is running (the child's side of run_in_child below). */
static void note_call(bool in_call);


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

/* The file that holds the exercise's hints, in its chapter's folder. */
static const char *exercise_page(void) { return exercise.page ? exercise.page : "README.md"; }

/* The case fails: say why (verbose: after the details the check printed),
 * then leave the case. */
static _Noreturn void fail_case(int hint, const char *reason)
{
    snprintf(g.reason, sizeof g.reason, "%s", reason);
    if (g.verbose && !g.one_line) {
        printf("  what broke: %s\n", reason);
        printf("  read hint %d of exercise %s in %s/%s\n", hint, exercise.number,
               exercise.chapter, exercise_page());
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
        it->copy = checked_malloc(it->count, sizeof(int));
        memcpy(it->copy, valid_lens->data, it->count * sizeof(int));
    }
    return valid_lens;
}

int *case_ints(const char *name, int *values, int count)
{
    Item *it = add_item(ITEM_INTS, name);
    it->ints = values;
    it->count = (size_t)count;
    it->copy = checked_malloc((size_t)count + 1, sizeof(int));
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

/* A guard zone as long as the output (a row past its end is still seen). */
static size_t guard_for(size_t n) { return n > GUARD_MIN ? n : GUARD_MIN; }

float *case_output(const char *name, size_t n)
{
    Item *it = add_item(ITEM_OUTPUT, name);
    it->count = n;
    it->guard = guard_for(n);
    it->block = checked_malloc(n + 2 * it->guard, sizeof(float));
    for (size_t i = 0; i < n + 2 * it->guard; i++)
        memcpy(&it->block[i], &GUARD_BITS, sizeof GUARD_BITS);
    for (size_t i = 0; i < n; i++)
        it->block[it->guard + i] = NAN;
    return it->block + it->guard;
}

int *case_output_ints(const char *name, size_t n)
{
    Item *it = add_item(ITEM_OUTPUT_INTS, name);
    it->count = n;
    it->guard = guard_for(n);
    it->int_block = checked_malloc(n + 2 * it->guard, sizeof(int));
    for (size_t i = 0; i < n + 2 * it->guard; i++)
        memcpy(&it->int_block[i], &GUARD_BITS, sizeof GUARD_BITS);
    for (size_t i = 0; i < n; i++)
        it->int_block[it->guard + i] = UNWRITTEN_INT;
    return it->int_block + it->guard;
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
        free(it->int_block);
    }
    g.num_items = 0;
    g.case_size = 0;
    g.description[0] = '\0';
}

void case_calling(void) { note_call(true); }

void case_called(void)
{
    note_call(false);
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
        } else if (it->kind == ITEM_OUTPUT || it->kind == ITEM_OUTPUT_INTS) {
            const void *block = it->kind == ITEM_OUTPUT ? (const void *)it->block
                                                        : (const void *)it->int_block;
            for (size_t j = 0; j < 2 * it->guard; j++) {
                size_t at = j < it->guard ? j : it->guard + it->count + (j - it->guard);
                if (memcmp((const char *)block + at * 4, &GUARD_BITS, sizeof GUARD_BITS) != 0) {
                    if (j < it->guard)
                        snprintf(reason, sizeof reason,
                                 "your function wrote before the start of %s, %zu elements "
                                 "early", it->name, it->guard - j);
                    else
                        snprintf(reason, sizeof reason,
                                 "your function wrote past the end of %s (%zu elements), at "
                                 "index %zu", it->name, it->count, it->count + (j - it->guard));
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

bool large_case(int index, int count) { return index >= count - LARGE_CASES; }

bool mask_probe_case(int index) { return index >= 5 && index % 10 == 5; }

float mask_probe_magnitude(int index) { return index % 20 == 5 ? 1e5f : 1e30f; }

void mask_probe_row(Rng *rng, float *row, int n, int valid_len, float magnitude)
{
    for (int j = 0; j < n; j++) {
        float near = magnitude * (1.0f + 1e-5f * rng_normal(rng));
        row[j] = j < valid_len ? -near : near;
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
    int *lens = checked_malloc((size_t)count, sizeof(int));
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

/* ---- the runner: the learner's function in a program of its own ------------------- */
/*
 * The cases run in a child of the judge (the judge's own code: a grader
 * that trips over a strange result is named as such); the parent only
 * waits, within the time limit. The child starts the runner (judge/runner.c,
 * the learner's file and what it calls of common/, nothing else) in a
 * process group of its own with an empty environment, and each call of
 * my_NAME is a message to it and its answer (judge/sides.h, made from
 * exercises_0N.h by judge/stubs.awk). The runner shares no memory with the
 * judge: whatever it does, its answers can only be wrong, late or missing,
 * and the verdict is always the judge's. A runner that ends, or whose
 * answer cannot be read, ends the grading: the parent says how, naming the
 * case that was running. What the runner wrote on stdout and stderr (a
 * library's refusal, a sanitizer's report) is read by the parent, quoted in
 * the verdict when it is the reason, and passed on on stderr.
 */

/* What the child tells the parent, in memory they share (the runner never
 * sees it: it is another program). */
typedef struct {
    int index;                 /* the case running now; -1 before the first */
    int in_call;               /* inside the learner's function */
    int stack_overflow;        /* the runner said: a fault next to its stack */
    int done;                  /* the grader's code reached its verdict */
    int status;                /* that verdict: 0 passed, 1 failed */
    int runner_ended;          /* the runner ended: runner_status says how */
    int runner_status;
    int unreadable;            /* the runner's answer could not be read */
    pid_t runner_group;        /* the runner's process group, killed at the end */
    char description[256];
} Shared;

static Shared *shared;
static const char *runner_path;

static void note_call(bool in_call)
{
    g.in_call = in_call;
    if (shared) {
        shared->index = g.index;
        shared->in_call = in_call;
        memcpy(shared->description, g.description, sizeof shared->description);
    }
}

enum { MAX_REGIONS = 256 };
#define NO_REGION UINT32_MAX

struct Wire {
    WireOut args;
    struct {
        unsigned char *base;
        size_t bytes;
    } regions[MAX_REGIONS];
    uint32_t count;
    unsigned char *buf;        /* the answer */
    size_t cap, len;
    WireIn in;
};
static struct Wire wire;
static struct {
    pid_t pid;
    int requests, answers;
} runner;

/* The runner is gone, or said what cannot be read: the child ends, and the
 * parent says which (Shared). */
static _Noreturn void runner_failed(bool unreadable)
{
    int status = 0;
    /* the channel ended: the runner ends too, soon, unless it closed the
     * channel or garbled it and lives on (then its answer is what fails) */
    for (int i = 0; i < 20 && !unreadable; i++) {
        if (waitpid(runner.pid, &status, WNOHANG) == runner.pid) {
            shared->runner_ended = 1;
            shared->runner_status = status;
            fflush(stdout);
            _exit(1);
        }
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    kill(-runner.pid, SIGKILL);
    waitpid(runner.pid, &status, 0);
    shared->unreadable = 1;
    fflush(stdout);
    _exit(1);
}

/* Asked while no answer comes: is the runner still there? (A child of its
 * own may hold the channel open after it ended.) */
static bool runner_alive(void)
{
    int status;
    if (waitpid(runner.pid, &status, WNOHANG) != runner.pid)
        return true;
    shared->runner_ended = 1;
    shared->runner_status = status;
    fflush(stdout);
    _exit(1);
}

/* The next frame from the runner; a word that it overflowed its stack is
 * noted and read past. */
static WireIn receive_frame(void)
{
    for (;;) {
        if (!wire_receive(runner.answers, &wire.buf, &wire.cap, &wire.len, runner_alive))
            runner_failed(false);
        WireIn in = {wire.buf, wire.len, 0, false};
        uint32_t tag = wire_take_u32(&in);
        if (tag == WIRE_STACK) {
            shared->stack_overflow = 1;
            continue;
        }
        in.at = 0;   /* the caller reads the tag again */
        return in;
    }
}

/* Start the runner: fd 3 its requests, fd 4 its answers, stdout and stderr
 * the child's stderr (read by the parent), nothing in its environment. */
static void start_runner(void)
{
    int requests[2], answers[2];
    if (pipe(requests) != 0 || pipe(answers) != 0) {
        fprintf(stderr, "grader: cannot make the pipes to the runner\n");
        exit(2);
    }
    signal(SIGPIPE, SIG_IGN);   /* a runner gone is seen as such, not as a signal */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "grader: cannot start the runner\n");
        exit(2);
    }
    if (pid == 0) {
        setsid();
        signal(SIGPIPE, SIG_DFL);
        int in = fcntl(requests[0], F_DUPFD, 10), out = fcntl(answers[1], F_DUPFD, 10);
        int null = open("/dev/null", O_RDONLY);
        if (in < 0 || out < 0 || null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0 ||
            dup2(in, 3) < 0 || dup2(out, 4) < 0)
            _exit(127);
        long max = sysconf(_SC_OPEN_MAX);
        for (int fd = 5; fd < (max > 0 && max < 4096 ? max : 4096); fd++)
            close(fd);
        char *const argv[] = {(char *)"runner", NULL};
        char *const envp[] = {NULL};
        const char *path = runner_path ? runner_path : "runner";
        execve(path, argv, envp);
        fprintf(stderr, "grader: cannot run %s\n", path);
        _exit(127);
    }
    runner.pid = pid;
    shared->runner_group = pid;
    close(requests[0]);
    close(answers[1]);
    runner.requests = requests[1];
    runner.answers = answers[0];
    WireIn in = receive_frame();
    if (wire_take_u32(&in) != WIRE_READY)
        runner_failed(true);
}

static void stop_runner(void)
{
    close(runner.requests);
    close(runner.answers);
    kill(-runner.pid, SIGKILL);
    waitpid(runner.pid, NULL, 0);
}

Wire *judge_begin(void)
{
    wire_reset(&wire.args);
    wire.count = 0;
    return &wire;
}

void jput_int(Wire *w, int v) { wire_u32(&w->args, (uint32_t)v); }
void jput_size(Wire *w, size_t v) { wire_u64(&w->args, v); }
void jput_float(Wire *w, float v) { wire_f32(&w->args, v); }
void jput_double(Wire *w, double v) { wire_f64(&w->args, v); }

/* The region that holds p: one of this call's, a case's item (an output
 * with its guard zones), or `bytes` of its own (-1: the grader's mistake). */
static void put_pointer(Wire *w, const void *p, long long bytes)
{
    if (!p) {
        wire_u32(&w->args, NO_REGION);
        wire_u64(&w->args, 0);
        return;
    }
    const unsigned char *at = p;
    uint32_t r = 0;
    for (; r < w->count; r++)
        if (at >= w->regions[r].base && at < w->regions[r].base + w->regions[r].bytes)
            break;
    if (r == w->count) {
        unsigned char *base = NULL;
        size_t size = 0;
        for (int i = 0; i < g.num_items && !base; i++) {
            const Item *it = &g.items[i];
            unsigned char *b = NULL;
            size_t n = 0;
            if ((it->kind == ITEM_INPUT || it->kind == ITEM_KEEP) && it->tensor)
                b = (unsigned char *)it->tensor->data, n = it->tensor->size * sizeof(float);
            else if (it->kind == ITEM_OUTPUT)
                b = (unsigned char *)it->block, n = (it->count + 2 * it->guard) * sizeof(float);
            else if (it->kind == ITEM_OUTPUT_INTS)
                b = (unsigned char *)it->int_block, n = (it->count + 2 * it->guard) * sizeof(int);
            else if (it->kind == ITEM_INTS)
                b = (unsigned char *)it->ints, n = it->count * sizeof(int);
            else if ((it->kind == ITEM_VALID_LENS || it->kind == ITEM_KEEP_VALID_LENS) &&
                     it->valid_lens) {
                const ValidLens *v = it->valid_lens;
                b = (unsigned char *)v->data;
                n = (size_t)v->shape[0] * (v->ndim == 2 ? (size_t)v->shape[1] : 1) * sizeof(int);
            }
            if (b && at >= b && at < b + n)
                base = b, size = n;
        }
        if (!base && bytes >= 0)
            base = (unsigned char *)at, size = (size_t)bytes;
        if (!base || w->count == MAX_REGIONS) {
            fprintf(stderr, "grader: my_%s: an argument points into memory no case_* call "
                    "registered (the grader's mistake)\n", exercise.name);
            exit(2);
        }
        w->regions[r].base = base;
        w->regions[r].bytes = size;
        w->count++;
    }
    wire_u32(&w->args, r);
    wire_u64(&w->args, (uint64_t)(at - w->regions[r].base));
}

void jput_floats(Wire *w, const float *p, long count)
{
    put_pointer(w, p, count < 0 ? -1 : (long long)count * (long long)sizeof(float));
}

void jput_ints(Wire *w, const int *p, long count)
{
    put_pointer(w, p, count < 0 ? -1 : (long long)count * (long long)sizeof(int));
}

void jput_floats_array(Wire *w, float *const *p, int count)
{
    wire_u32(&w->args, (uint32_t)count);
    for (int i = 0; i < count; i++)
        put_pointer(w, p[i], -1);
}

void jput_tensor(Wire *w, const Tensor *t)
{
    wire_u32(&w->args, t != NULL);
    if (!t)
        return;
    wire_u32(&w->args, (uint32_t)t->ndim);
    for (int i = 0; i < TENSOR_MAX_DIMS; i++)
        wire_u32(&w->args, (uint32_t)(i < t->ndim ? t->shape[i] : 0));
    put_pointer(w, t->data, (long long)(t->size * sizeof(float)));
}

void jput_tensor_out(Wire *w, Tensor **out) { (void)w; (void)out; }

void jput_valid_lens(Wire *w, const ValidLens *v)
{
    wire_u32(&w->args, v != NULL);
    if (!v)
        return;
    wire_u32(&w->args, (uint32_t)v->ndim);
    wire_u32(&w->args, (uint32_t)v->shape[0]);
    wire_u32(&w->args, (uint32_t)(v->ndim == 2 ? v->shape[1] : 0));
    put_pointer(w, v->data,
                (long long)((size_t)v->shape[0] * (v->ndim == 2 ? (size_t)v->shape[1] : 1) *
                            sizeof(int)));
}

void jput_mha(Wire *w, const MultiHeadAttention *m)
{
    const int sizes[] = {m->query_size, m->key_size, m->value_size, m->num_hiddens,
                         m->num_heads, m->num_kv_heads};
    for (int i = 0; i < 6; i++)
        jput_int(w, sizes[i]);
    jput_float(w, m->dropout);
    jput_int(w, m->bias);
    const Tensor *fields[] = {m->W_q, m->W_k, m->W_v, m->W_o, m->b_q, m->b_k, m->b_v, m->b_o};
    for (int i = 0; i < 8; i++)
        jput_tensor(w, fields[i]);
}

void jput_kv_cache(Wire *w, const KVCache *c)
{
    const int ints[] = {c->batch_size, c->num_kv_heads, c->capacity, c->head_size, c->length};
    for (int i = 0; i < 5; i++)
        jput_int(w, ints[i]);
    long n = (long)c->batch_size * c->num_kv_heads * c->capacity * c->head_size;
    jput_floats(w, c->keys, n);
    jput_floats(w, c->values, n);
}

void jput_block(Wire *w, const Block *b)
{
    jput_tensor(w, b->ln1_weight);
    jput_tensor(w, b->ln1_bias);
    jput_mha(w, b->attn);
    const Tensor *fields[] = {b->ln2_weight, b->ln2_bias, b->fc_weight, b->fc_bias,
                              b->proj_weight, b->proj_bias};
    for (int i = 0; i < 6; i++)
        jput_tensor(w, fields[i]);
}

void jput_block_cache(Wire *w, const BlockCache *cache) { (void)w; (void)cache; }

void jput_rng(Wire *w, const Rng *rng) { wire_bytes(&w->args, rng, sizeof *rng); }

void jput_function(Wire *w, GraderFunction f)
{
    uint32_t i = 0;
    while (i < GRADER_FUNCTIONS && grader_functions[i] != f)
        i++;
    if (i == GRADER_FUNCTIONS) {
        fprintf(stderr, "grader: my_%s: a function not in judge/functions.c\n", exercise.name);
        exit(2);
    }
    wire_u32(&w->args, i);
}

void judge_call(Wire *w)
{
    static WireOut frame;
    wire_reset(&frame);
    wire_u32(&frame, WIRE_CALL);
    wire_u32(&frame, w->count);
    for (uint32_t r = 0; r < w->count; r++) {
        wire_u64(&frame, w->regions[r].bytes);
        wire_bytes(&frame, w->regions[r].base, w->regions[r].bytes);
    }
    wire_bytes(&frame, w->args.data, w->args.len);
    if (!wire_send(runner.requests, &frame))
        runner_failed(false);
    w->in = receive_frame();
    WireIn *in = &w->in;
    if (wire_take_u32(in) != WIRE_REPLY)
        runner_failed(true);
    if (wire_take_u32(in))
        started_flag = false;
    if (wire_take_u32(in) != w->count)
        runner_failed(true);
    for (uint32_t r = 0; r < w->count; r++) {
        const void *p = wire_take(in, w->regions[r].bytes);
        if (!p)
            runner_failed(true);
        memcpy(w->regions[r].base, p, w->regions[r].bytes);
    }
}

/* A tensor as the runner sent it; NULL for none (and *bad when it makes no
 * sense: no shape of 1 to 4 dimensions, or not as many numbers). */
static Tensor *take_tensor(WireIn *in)
{
    if (!wire_take_u32(in))
        return NULL;
    Tensor *t = checked_calloc(1, sizeof *t);
    t->ndim = (int)wire_take_u32(in);
    size_t size = 1;
    bool sane = t->ndim >= 1 && t->ndim <= TENSOR_MAX_DIMS;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        t->shape[i] = (int)wire_take_u32(in);
        if (i < t->ndim && sane) {
            sane = t->shape[i] >= 0 && (t->shape[i] == 0 || size <= SIZE_MAX / (size_t)t->shape[i]);
            size *= sane ? (size_t)t->shape[i] : 1;
        }
    }
    t->size = wire_take_u64(in);
    const void *p = sane && t->size == size ? wire_take(in, size * sizeof(float)) : NULL;
    if (!p) {
        in->bad = true;
        free(t);
        return NULL;
    }
    t->data = checked_malloc(size ? size : 1, sizeof(float));
    memcpy(t->data, p, size * sizeof(float));
    return t;
}

static ValidLens *take_valid_lens(WireIn *in)
{
    if (!wire_take_u32(in))
        return NULL;
    ValidLens *v = checked_calloc(1, sizeof *v);
    v->ndim = (int)wire_take_u32(in);
    v->shape[0] = (int)wire_take_u32(in);
    v->shape[1] = (int)wire_take_u32(in);
    uint64_t count = wire_take_u64(in);
    bool sane = (v->ndim == 1 || v->ndim == 2) && v->shape[0] >= 0 && v->shape[1] >= 0 &&
                count == (uint64_t)v->shape[0] * (uint64_t)(v->ndim == 2 ? v->shape[1] : 1);
    const void *p = sane ? wire_take(in, count * sizeof(int)) : NULL;
    if (!p) {
        in->bad = true;
        free(v);
        return NULL;
    }
    v->data = checked_malloc(count ? count : 1, sizeof(int));
    memcpy(v->data, p, count * sizeof(int));
    return v;
}

void jback_tensor_out(Wire *w, Tensor **out)
{
    Tensor *t = take_tensor(&w->in);
    if (out)
        *out = t;
    else
        tensor_free(t);
}

void jback_kv_cache(Wire *w, KVCache *cache) { cache->length = (int)wire_take_u32(&w->in); }

void jback_block_cache(Wire *w, BlockCache *c)
{
    Tensor **fields[] = {&c->h1, &c->mean1, &c->rstd1, &c->x_mid, &c->h2, &c->mean2,
                         &c->rstd2, &c->f, &c->g};
    for (int i = 0; i < 9; i++)
        *fields[i] = take_tensor(&w->in);
    MultiHeadCache *m = &c->attn.clear;
    /* the inputs the layer's cache borrows live as long as the case */
    m->queries = case_keep(take_tensor(&w->in));
    m->keys = case_keep(take_tensor(&w->in));
    m->values = case_keep(take_tensor(&w->in));
    Tensor **owned[] = {&m->Q, &m->K, &m->V, &m->attention.weights,
                        &m->attention.dropout_scale, &m->concat};
    for (int i = 0; i < 6; i++)
        *owned[i] = take_tensor(&w->in);
    m->valid_lens = case_keep_valid_lens(take_valid_lens(&w->in));
    c->attn.other = NULL;
    c->attn.other_free = NULL;
}

void jback_rng(Wire *w, Rng *rng)
{
    const void *p = wire_take(&w->in, sizeof *rng);
    if (p)
        memcpy(rng, p, sizeof *rng);
}

Tensor *jret_tensor(Wire *w) { return take_tensor(&w->in); }
ValidLens *jret_valid_lens(Wire *w) { return take_valid_lens(&w->in); }
int jret_int(Wire *w) { return (int)wire_take_u32(&w->in); }
size_t jret_size(Wire *w) { return (size_t)wire_take_u64(&w->in); }
float jret_float(Wire *w) { return wire_take_f32(&w->in); }
double jret_double(Wire *w) { return wire_take_f64(&w->in); }

void judge_end(Wire *w)
{
    if (w->in.bad || w->in.at != w->in.len)
        runner_failed(true);
}

static volatile sig_atomic_t timed_out;
static void on_alarm(int sig) { (void)sig; timed_out = 1; }

/* The first line of text that is not empty, or "". */
static void first_message(const char *text, char *line, size_t len)
{
    line[0] = '\0';
    for (const char *at = text; *at;) {
        const char *end = strchr(at, '\n');
        size_t n = end ? (size_t)(end - at) : strlen(at);
        if (n > 0) {
            snprintf(line, len, "%.*s", (int)n, at);
            return;
        }
        at += n + (end != NULL);
    }
}

static bool sanitizer_report(const char *text)
{
    return strstr(text, "ERROR: AddressSanitizer") || strstr(text, "ERROR: LeakSanitizer") ||
           strstr(text, ": runtime error: ");
}

/* What ended the runner (or the child), in words: "crashed (...)", ... */
static void say_how_it_ended(int wait_status, const char *message, char *what, size_t len)
{
    if (timed_out) {
        snprintf(what, len, "did not finish in time (a loop that never ends?)");
    } else if (shared->unreadable) {
        snprintf(what, len, "sent back results the grader cannot read (something wrote "
                            "over the channel they come back on)");
    } else if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        if (sig == SIGSEGV && shared->stack_overflow)
            snprintf(what, len, "overflowed the stack (a recursion that never stops, or a "
                                "local array too large for the stack?)");
        else if (sig == SIGSEGV)
            snprintf(what, len, "crashed (segmentation fault: a read or write outside a "
                                "tensor, or through NULL)");
        else if (sig == SIGBUS)
            snprintf(what, len, "crashed (bus error: a read or write outside a tensor)");
        else if (sig == SIGFPE)
            snprintf(what, len, "crashed (arithmetic error: an integer division by zero?)");
        else if (sig == SIGABRT)
            snprintf(what, len, "stopped the program (abort: an assert that failed?)%s%s",
                     message[0] ? ": " : "", message);
        else
            snprintf(what, len, "ended the program with signal %d (%s): a function returns "
                                "to its caller, it never raises or kills", sig, strsignal(sig));
    } else if (message[0]) {
        snprintf(what, len, "ended the program (exit status %d) with this message: %s",
                 WEXITSTATUS(wait_status), message);
    } else {
        snprintf(what, len, "ended the program (exit status %d, no message): a function "
                            "returns to its caller; exit and _exit end the whole program",
                 WEXITSTATUS(wait_status));
    }
}

/* Run the grader (run_cases) in a child and wait for it; the status to exit
 * with. */
static int run_in_child(int (*run_cases)(void))
{
    /* memory the child writes and the parent reads: a shared mapping of a
     * file no name points to (POSIX has no anonymous shared mapping) */
    FILE *backing = tmpfile();
    shared = backing != NULL && ftruncate(fileno(backing), sizeof *shared) == 0
                 ? mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED,
                        fileno(backing), 0)
                 : MAP_FAILED;
    if (backing != NULL)
        fclose(backing);   /* the mapping keeps the file alive */
    FILE *errors = tmpfile();
    if (shared == MAP_FAILED || !errors) {
        fprintf(stderr, "grader: cannot prepare the child that runs the cases\n");
        return 2;
    }
    memset(shared, 0, sizeof *shared);
    shared->index = -1;

    /* the time limit counts from here: the runner starts next */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;   /* no SA_RESTART: waitpid returns at the alarm */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    const char *limit = getenv("GRADER_TIME_LIMIT");   /* shorter, for the grader's tests */
    alarm(limit && atoi(limit) > 0 ? (unsigned)atoi(limit) : TIME_LIMIT);
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "grader: cannot start the child that runs the cases\n");
        return 2;
    }
    if (child == 0) {
        dup2(fileno(errors), STDERR_FILENO);
        start_runner();
        int status = run_cases();
        stop_runner();
        fflush(stdout);
        shared->status = status;
        shared->done = 1;
        _exit(status);
    }

    /* the parent: wait, within the time limit */
    int wait_status = 0;
    while (waitpid(child, &wait_status, 0) < 0) {
        if (timed_out)
            kill(child, SIGKILL);
    }
    alarm(0);
    if (shared->runner_group > 0)
        kill(-shared->runner_group, SIGKILL);   /* the runner, and whatever it started */
    if (shared->runner_ended)
        wait_status = shared->runner_status;

    /* what the child and the runner wrote on stderr, passed on */
    char *text = NULL;
    size_t text_len = 0;
    FILE *mem = open_memstream(&text, &text_len);
    rewind(errors);
    char chunk[4096];
    for (size_t n; (n = fread(chunk, 1, sizeof chunk, errors)) > 0;) {
        if (mem)
            fwrite(chunk, 1, n, mem);
    }
    fclose(errors);
    if (mem)
        fclose(mem);
    const char *written = text ? text : "";

    int status;
    const char *who = shared->index < 0 ? "your file, before its function was called,"
                      : shared->in_call || timed_out || shared->runner_ended || shared->unreadable
                          ? "your function"
                          : "the grader, reading what your function returned,";
    if (shared->done && !timed_out) {
        fputs(written, stderr);
        status = shared->status;
    } else if (!timed_out && shared->runner_ended && WIFEXITED(wait_status) &&
               WEXITSTATUS(wait_status) == 3 && sanitizer_report(written)) {
        /* a sanitizer stopped it: check reads the report and this line */
        fprintf(stderr, "grader: case %d of %d: %s\n", shared->index + 1, exercise.num_cases,
                shared->description);
        fputs(written, stderr);
        status = 3;
    } else {
        fputs(written, stderr);
        char message[256], what[512];
        first_message(written, message, sizeof message);
        say_how_it_ended(wait_status, message, what, sizeof what);
        if (shared->index < 0 && g.one_line)
            printf("failed: %s %s\n", who, what);
        else if (shared->index < 0)
            printf("%s: failed: %s %s\n", g.file, who, what);
        else if (g.one_line)
            printf("failed: case %d: %s %s\n", shared->index + 1, who, what);
        else
            printf("%s: failed, case %d of %d: %s %s\n  the case: %s\n", g.file,
                   shared->index + 1, exercise.num_cases, who, what, shared->description);
        status = 1;
    }
    free(text);
    munmap(shared, sizeof *shared);
    return status;
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
    note_call(false);
    return passed;
}

/* Every case quietly, then the smallest failing one again, printed; the
 * exit status (in the child). */
static int run_cases(void)
{
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
                       "%s/%s.\n",
                       g.file, exercise.name, exercise.number, exercise.chapter, exercise_page());
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

/* --describe: the exercise's settings, read by tests/grader/check. */
static void describe(void)
{
    printf("name %s\nchapter %s\nnumber %s\ncases %d\nrefuses %s\npage %s\n", exercise.name,
           exercise.chapter, exercise.number, exercise.num_cases,
           exercise.refuses ? exercise.refuses : "", exercise_page());
}

int main(int argc, char **argv)
{
    g.file = exercise.name;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--one-line") == 0)
            g.one_line = true;
        else if (strcmp(argv[i], "--describe") == 0) {
            describe();
            return 0;
        } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc)
            g.file = argv[++i];
        else if (strcmp(argv[i], "--runner") == 0 && i + 1 < argc)
            runner_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s --runner PROGRAM [--one-line] [--file PATH] | --describe\n",
                    argv[0]);
            return 2;
        }
    }
    if (!runner_path) {
        fprintf(stderr, "%s: --runner PROGRAM: the learner's runner to grade\n", argv[0]);
        return 2;
    }
    program_name(exercise.name);
    setvbuf(stdout, NULL, _IOLBF, 0);
    return run_in_child(run_cases);
}
