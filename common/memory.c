/* memory.c - allocation that cannot fail silently, and a run's memory
 * checked before its work. See memory.h. */
#define _POSIX_C_SOURCE 200809L
#include "memory.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "error.h"
#include "platform.h"

static atomic_size_t allocations;

size_t memory_allocations(void)
{
    return atomic_load_explicit(&allocations, memory_order_relaxed);
}

void memory_counted(void)
{
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

void *checked_calloc(size_t count, size_t elem)
{
    memory_counted();
    if (elem != 0 && count > SIZE_MAX / elem)
        die("cannot allocate %zu x %zu bytes: the size overflows", count, elem);
    void *p = calloc(count ? count : 1, elem ? elem : 1);
    if (p == NULL)
        die("out of memory allocating %zu bytes (%.1f MB)",
            count * elem, (double)(count * elem) / 1e6);
    return p;
}

void *checked_malloc(size_t count, size_t elem)
{
    memory_counted();
    if (elem != 0 && count > SIZE_MAX / elem)
        die("cannot allocate %zu x %zu bytes: the size overflows", count, elem);
    void *p = malloc(count * elem > 0 ? count * elem : 1);
    if (p == NULL)
        die("out of memory allocating %zu bytes (%.1f MB)",
            count * elem, (double)(count * elem) / 1e6);
    return p;
}

/* The smaller of the physical memory and the address-space limit. */
size_t memory_available(const char **what)
{
    const double memory = platform_memory_bytes();
    size_t bytes = SIZE_MAX;
    *what = "no limit known";
    if (memory > 0.0 && memory < (double)SIZE_MAX) {
        bytes = (size_t)memory;
        *what = "the machine's memory";
    }
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < bytes) {
        bytes = (size_t)limit.rlim_cur;
        *what = "the memory limit (ulimit -v)";
    }
    return bytes;
}

/* bytes_text with digits after the point (none for plain bytes) */
static void bytes_text_digits(char *buf, size_t len, double bytes, int digits)
{
    static const char *const units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    while (bytes >= 1000.0 && u < 6) {
        bytes /= 1000.0;
        u++;
    }
    snprintf(buf, len, "%.*f %s", u == 0 ? 0 : digits, bytes, units[u]);
}

void bytes_text(char *buf, size_t len, double bytes)
{
    bytes_text_digits(buf, len, bytes, 1);
}

int memory_check(double need, const char *detail, const char *hint, char *err, size_t err_len)
{
    /* need counts the tensors; the program itself, its libraries, stacks
     * and stdio buffers come on top (about 2 to 4 MB resident and mapped
     * here, more with threads): measured peaks of small runs passed the
     * tensors alone by that much */
    need += MEMORY_BASE_BYTES;
    const char *what;
    const double have = (double)memory_available(&what);
    if (need <= have)
        return 0;
    /* one digit, or as many more as it takes for "needs about 614.4 MB,
     * more than 614.4 MB" to show the two apart */
    char need_text[32], have_text[32];
    for (int digits = 1; digits == 1 || (digits <= 4 && strcmp(need_text, have_text) == 0);
         digits++) {
        bytes_text_digits(need_text, sizeof need_text, need, digits);
        bytes_text_digits(have_text, sizeof have_text, have, digits);
    }
    return error_format(err, err_len, NULL, "this run needs about %s of memory%s%s%s, more "
                        "than %s, %s: %s", need_text, detail ? " (" : "", detail ? detail : "",
                        detail ? ")" : "", what, have_text, hint);
}

int memory_require(double need, const char *detail, const char *hint)
{
    char err[512];
    if (memory_check(need, detail, hint, err, sizeof err) == 0)
        return 0;
    return fail("%s", err);
}
