/*
 * platform.h - the one home of what differs between systems (used from
 * chapter 03 on: memory checks, the benchmark, training, the file writer).
 *
 * Everything else in the repository is ISO C11 plus plain POSIX
 * (_POSIX_C_SOURCE 200809L); a file that needs X/Open names, or POSIX
 * names that Apple's headers hide under strict POSIX (mkdtemp,
 * O_NOFOLLOW), includes platform_names.h first, the one place that sets
 * feature macros. The few calls that are not POSIX (the machine's
 * memory, the peak and current resident memory, large pages, allocator
 * tuning, a lock on a file, the atomic exchange of two directories, the
 * number of cores, a child that dies with its parent, dropping groups)
 * are made here, each behind its #if with one branch per system:
 *
 *   Linux (glibc or musl)   sysconf, getrusage in kB, /proc/self/statm,
 *                           madvise, mallopt (glibc only), flock, the
 *                           renameat2 system call, prctl, setgroups
 *   macOS                   sysctl hw.memsize, getrusage in bytes,
 *                           task_info, flock, renamex_np(RENAME_SWAP),
 *                           setgroups; no large pages, allocator knob or
 *                           parent-death signal
 *   any other POSIX system  sysconf where it has the name, fcntl locks, and
 *                           no directory exchange (the caller's fallback)
 *
 * Linux on x86-64 and aarch64 (glibc and musl) is built and run by the
 * tests and CI. macOS on arm64 and x86-64 is built and linked in CI
 * against Apple's SDK headers (make portability, with zig cc), not run;
 * common/io/README.md#platforms says what is promised there.
 */
#ifndef PLATFORM_H
#define PLATFORM_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes of physical memory, 0 when the system does not say. */
double platform_memory_bytes(void);

/* The largest resident memory of this process so far, in bytes (getrusage's
 * ru_maxrss, whose unit differs between systems), 0 when unknown. */
double platform_peak_rss_bytes(void);

/* The bytes of [p, p + bytes) that are in memory now (Linux, macOS:
 * mincore), p a page boundary such as platform_map_zeroed gives; -1 when
 * the system does not say. It counts that memory alone, whatever else the
 * process allocates, so the pages a buffer fills as it is written can be
 * watched (05_multihead/decode). */
double platform_resident_bytes(const void *p, size_t bytes);

/* bytes of zeroed memory straight from the system (an anonymous mmap),
 * none of it resident until written: a large buffer whose pages are to
 * be counted as they fill. NULL when refused. Free with platform_unmap. */
void *platform_map_zeroed(size_t bytes);
void platform_unmap(void *p, size_t bytes);   /* NULL is fine */

/* Processors online, at least 1. */
int platform_cpu_count(void);

/* Ask for large (2 MB) pages behind [p, p + bytes), p aligned to 2 MB. A
 * request only: where the system has none, nothing changes. */
void platform_advise_huge_pages(void *p, size_t bytes);

/* Ask the allocator to keep freed memory for the next allocation instead
 * of returning it to the system (a training loop that frees and allocates
 * the same tensors every step). Only glibc has the knob; elsewhere nothing
 * changes. */
void platform_keep_freed_memory(void);

/* Lock the open file fd, shared (readers) or exclusive (a writer), waiting
 * until it is free. The lock goes with the descriptor: closing fd releases
 * it. 0, or -1 with errno. */
int platform_lock(int fd, bool exclusive);

/* Exchange two existing directory entries (files or directories) in one
 * step: after it, a reader finds either both old names or both swapped,
 * never one without the other. 0, or -1 with errno; errno ENOTSUP when
 * this system or file system has no such call, and the caller then uses
 * its fallback (the file writer's manifest, written last). */
int platform_exchange(const char *path_a, const char *path_b);

/* For a child process that does a part of its parent's work (a benchmark's
 * measurement): the stop signals (SIGINT, SIGTERM, SIGHUP) end it quietly,
 * its parent says the one line, and on Linux it is killed when the parent
 * parent_pid ends, so that a stopped program leaves nothing running
 * (elsewhere it ends at its next write to the parent). */
void platform_child_of(long parent_pid);

#endif
