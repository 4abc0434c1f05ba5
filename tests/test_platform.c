/*
 * test_platform.c - the platform file's answers (common/platform.c): the
 * units of memory figures, the directory exchange, the lock.
 */
#include "platform_names.h"   /* first: _SC_NPROCESSORS_ONLN, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "platform.h"

/* MemTotal from /proc/meminfo in bytes, 0 where there is no /proc */
static double proc_mem_total(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    double kb = 0.0;
    if (f == NULL)
        return 0.0;
    char line[256];
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "MemTotal: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024.0;
}

Test(platform, memory_is_the_machines_in_bytes)
{
    const double bytes = platform_memory_bytes(), proc = proc_mem_total();
    cr_assert_gt(bytes, 64e6, "platform_memory_bytes() = %.0f", bytes);
    /* /proc rounds to kB and leaves out the kernel's own pages: within 10% */
    if (proc > 0.0)
        cr_expect(bytes >= proc && bytes <= 1.1 * proc, "%.0f bytes, /proc says %.0f",
                  bytes, proc);
}

/* 48 MB touched make the peak at least 48 MB and raise it by at most about
 * that: not 48 GB (bytes counted as kB) nor 48 kB (kB counted as bytes).
 * The peak before may lie above what is resident then (under ASan, whose
 * start-up peaks early), so the rise itself can be less than 48 MB. */
Test(platform, peak_resident_memory_is_in_bytes)
{
    const double before = platform_peak_rss_bytes();
    enum { SIZE = 48 << 20 };
    volatile char *block = malloc(SIZE);
    cr_assert(block != NULL);
    for (size_t i = 0; i < SIZE; i += 4096)
        block[i] = (char)i;
    const double after = platform_peak_rss_bytes();
    free((void *)block);
    cr_expect(before > 1e6 && before < 4e9, "peak before: %.0f bytes", before);
    cr_expect(after >= SIZE && after <= before + 2.0 * SIZE,
              "peak %.0f bytes before touching %d bytes, %.0f after", before, SIZE, after);
}

Test(platform, cpu_count_is_sysconfs)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_expect_eq(platform_cpu_count(), online > 0 ? (int)online : 1);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* Two directories trade places: each name now holds the other's file. */
Test(platform, exchange_swaps_two_directories)
{
    char dir[64], a[128], b[128], path[256];
    scratch_dir_make(dir, sizeof dir, "attn_platform");
    cr_assert(dir[0]);
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    cr_assert_eq(mkdir(a, 0755), 0);
    cr_assert_eq(mkdir(b, 0755), 0);
    snprintf(path, sizeof path, "%s/from_a", a);
    write_text(path, "a");
    snprintf(path, sizeof path, "%s/from_b", b);
    write_text(path, "b");
    if (platform_exchange(a, b) != 0) {
        /* allowed only where the file system has no exchange: then the
         * names are left as they were */
        cr_expect_eq(errno, ENOTSUP, "exchange: %s", strerror(errno));
        snprintf(path, sizeof path, "%s/from_a", a);
        cr_expect_eq(access(path, F_OK), 0);
    } else {
        snprintf(path, sizeof path, "%s/from_b", a);
        cr_expect_eq(access(path, F_OK), 0, "a/ does not hold b's file after the exchange");
        snprintf(path, sizeof path, "%s/from_a", b);
        cr_expect_eq(access(path, F_OK), 0, "b/ does not hold a's file after the exchange");
    }
    /* a name that does not exist: -1 and ENOENT (or ENOTSUP), nothing moved */
    snprintf(path, sizeof path, "%s/missing", dir);
    errno = 0;
    cr_expect_eq(platform_exchange(a, path), -1);
    cr_expect(errno == ENOENT || errno == ENOTSUP, "errno %d", errno);
    cr_expect_eq(access(a, F_OK), 0);
    scratch_dir_remove(dir);
}

/* An exclusive lock keeps a second one, from another process, waiting. */
Test(platform, exclusive_lock_excludes_another_process)
{
    char dir[64], path[128];
    scratch_dir_make(dir, sizeof dir, "attn_platform");
    cr_assert(dir[0]);
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(platform_lock(fd, true), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* a new descriptor of the same file: a lock of its own, which must wait */
        close(fd);
        int mine = open(path, O_RDWR);
        _exit(mine >= 0 && platform_lock(mine, false) == 0 ? 0 : 1);
    }
    nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
    cr_expect_eq(waitpid(pid, NULL, WNOHANG), 0, "the child took a shared lock beside ours");
    close(fd);   /* releases ours: the child's shared lock now succeeds */
    int status = -1;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    scratch_dir_remove(dir);
}
