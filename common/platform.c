/* platform.c - what differs between systems, one short branch per system.
 * See platform.h. The only file that calls more than POSIX (the feature
 * macros of the others are set in platform_names.h). */
#if defined(__linux__)
/* Linux: syscall, madvise, mincore and flock are declared beside POSIX only when
 * asked for (glibc and musl alike). macOS and the BSDs declare everything
 * when no feature macro is set, so they get none. */
#define _GNU_SOURCE
#endif
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>       /* mmap: POSIX; MAP_ANONYMOUS: Linux, macOS, the BSDs */
#include <sys/resource.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/file.h>      /* flock */
#include <sys/prctl.h>     /* PR_SET_PDEATHSIG */
#include <sys/syscall.h>   /* SYS_renameat2 */
#endif
#if defined(__GLIBC__)
#include <malloc.h>        /* mallopt */
#endif
#if defined(__APPLE__)
#include <sys/file.h>      /* flock */
#include <sys/sysctl.h>    /* sysctlbyname */
#endif

double platform_memory_bytes(void)
{
#if defined(__APPLE__)
    /* macOS: sysconf has no _SC_PHYS_PAGES under POSIX; the kernel says it */
    unsigned long long bytes = 0;
    size_t len = sizeof bytes;
    return sysctlbyname("hw.memsize", &bytes, &len, NULL, 0) == 0 ? (double)bytes : 0.0;
#elif defined(_SC_PHYS_PAGES)
    /* Linux (glibc, musl) and most others: pages times the page size */
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (double)pages * (double)page_size : 0.0;
#else
    return 0.0;   /* unknown: the callers then check the ulimit alone */
#endif
}

double platform_peak_rss_bytes(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0.0;
#if defined(__APPLE__)
    return (double)usage.ru_maxrss;            /* macOS counts bytes */
#else
    return (double)usage.ru_maxrss * 1024.0;   /* Linux and the BSDs count kB */
#endif
}

double platform_resident_bytes(const void *p, size_t bytes)
{
#if defined(__linux__) || defined(__APPLE__)
    /* mincore: one byte per page of [p, p + bytes), its low bit set when
     * the page is in memory. It looks at this mapping alone, so neither
     * the allocator, a sanitizer's own memory nor other threads move it.
     * Asked a chunk of pages at a time, into the stack. */
    const long page_size = sysconf(_SC_PAGESIZE);
    if (p == NULL || page_size <= 0 || (uintptr_t)p % (uintptr_t)page_size != 0)
        return -1.0;
    enum { CHUNK_PAGES = 1024 };
#if defined(__APPLE__)
    char vec[CHUNK_PAGES];   /* macOS declares the vector as char */
#else
    unsigned char vec[CHUNK_PAGES];
#endif
    const size_t page = (size_t)page_size, pages = (bytes + page - 1) / page;
    double resident = 0.0;
    for (size_t first = 0; first < pages; first += CHUNK_PAGES) {
        const size_t n = pages - first < CHUNK_PAGES ? pages - first : CHUNK_PAGES;
        if (mincore((char *)p + first * page, n * page, vec) != 0)
            return -1.0;
        for (size_t i = 0; i < n; i++)
            resident += (vec[i] & 1) ? (double)page : 0.0;
    }
    return resident;
#else
    (void)p;
    (void)bytes;
    return -1.0;   /* others: no such call; callers say "unknown" */
#endif
}

void *platform_map_zeroed(size_t bytes)
{
#if defined(MAP_ANONYMOUS)
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#else
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
#endif
    return p == MAP_FAILED ? NULL : p;
}

void platform_unmap(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes);
}

int platform_cpu_count(void)
{
#if defined(_SC_NPROCESSORS_ONLN)
    /* Linux, macOS and the BSDs all have the name, though POSIX does not */
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 && online < 4096 ? (int)online : 1;
#else
    return 1;
#endif
}

void platform_advise_huge_pages(void *p, size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Linux: transparent huge pages, when the kernel has them switched on */
    if (p != NULL)
        madvise(p, bytes, MADV_HUGEPAGE);
#else
    /* macOS and others: no request a program can make for this memory */
    (void)p;
    (void)bytes;
#endif
}

void platform_keep_freed_memory(void)
{
#if defined(__GLIBC__)
    /* glibc gives the top of its heap back past 128 kB and serves blocks
     * over 128 kB with mmap, unmapped when freed: raise both limits */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#else
    /* musl and macOS have no such knob; nothing to do */
#endif
}

int platform_lock(int fd, bool exclusive)
{
#if defined(__linux__) || defined(__APPLE__)
    /* flock: the lock belongs to the open descriptor, so another
     * descriptor on the same file in this process cannot drop it */
    int status;
    do
        status = flock(fd, exclusive ? LOCK_EX : LOCK_SH);
    while (status != 0 && errno == EINTR);
    return status;
#else
    /* plain POSIX: a record lock on the whole file. Weaker: closing any
     * descriptor of the file in this process releases it */
    struct flock lock = {.l_type = exclusive ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET};
    int status;
    do
        status = fcntl(fd, F_SETLKW, &lock);
    while (status != 0 && errno == EINTR);
    return status;
#endif
}

int platform_exchange(const char *path_a, const char *path_b)
{
#if defined(__linux__) && defined(SYS_renameat2)
    /* Linux 3.15 and later: renameat2 with RENAME_EXCHANGE, called through
     * syscall() because musl 1.2.3 and glibc before 2.28 lack the wrapper.
     * A file system without it (or an older kernel) answers EINVAL or ENOSYS */
    enum { RENAME_EXCHANGE_FLAG = 1 << 1 };   /* RENAME_EXCHANGE in linux/fs.h */
    if (syscall(SYS_renameat2, AT_FDCWD, path_a, AT_FDCWD, path_b, RENAME_EXCHANGE_FLAG) == 0)
        return 0;
    if (errno == EINVAL || errno == ENOSYS)
        errno = ENOTSUP;
    return -1;
#elif defined(__APPLE__) && defined(RENAME_SWAP)
    /* macOS 10.12 and later: renamex_np swaps; APFS and HFS+ have it, other
     * file systems answer ENOTSUP */
    if (renamex_np(path_a, path_b, RENAME_SWAP) == 0)
        return 0;
    if (errno == EINVAL)
        errno = ENOTSUP;
    return -1;
#else
    /* elsewhere no call swaps two names at once: the caller falls back */
    (void)path_a;
    (void)path_b;
    errno = ENOTSUP;
    return -1;
#endif
}

void platform_child_of(long parent_pid)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if ((long)getppid() != parent_pid)   /* the parent ended before the line above */
        _exit(1);
}
