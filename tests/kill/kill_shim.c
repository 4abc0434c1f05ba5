/*
 * kill_shim.c - a crash test for the writer of file sets, loaded into a
 * program with LD_PRELOAD by tests/test_writer.c; never part of a program.
 *
 * From the first lock or temporary name a program takes (the writer's first
 * step, see common/io/fileset.h) it counts the program's file-system steps:
 * every call below that creates, writes, syncs, links, renames or removes. With
 * KILL_AT=k in the environment, the program is killed with SIGKILL right
 * after its k-th step, as `kill -9` would end it. With
 * KILL_COUNT=FILE, the number of steps taken is written into FILE at exit,
 * so that the test knows how many kill points a run has.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long steps;           /* steps taken since counting began */
static int counting;         /* 1 from the first lock on */

/* One step done: the k-th ends the program. */
static void step_done(void)
{
    if (!counting)
        return;
    steps++;
    const char *at = getenv("KILL_AT");
    if (at != NULL && atol(at) == steps)
        raise(SIGKILL);
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int flock(int fd, int operation)
{
    const int r = NEXT(flock)(fd, operation);
    if (!(operation & LOCK_UN))
        counting = 1;
    step_done();
    return r;
}

int open(const char *path, int flags, ...)
{
    va_list args;
    va_start(args, flags);
    const mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(args, int) : 0;
    va_end(args);
    const int r = NEXT(open)(path, flags, mode);
    step_done();
    return r;
}

int openat(int dirfd, const char *path, int flags, ...)
{
    va_list args;
    va_start(args, flags);
    const mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(args, int) : 0;
    va_end(args);
    const int r = NEXT(openat)(dirfd, path, flags, mode);
    step_done();
    return r;
}

char *mkdtemp(char *template)
{
    char *r = NEXT(mkdtemp)(template);
    counting = 1;
    step_done();
    return r;
}

int mkstemp(char *template)
{
    const int r = NEXT(mkstemp)(template);
    counting = 1;
    step_done();
    return r;
}

ssize_t write(int fd, const void *buf, size_t count)
{
    const ssize_t r = NEXT(write)(fd, buf, count);
    if (fd > STDERR_FILENO)
        step_done();
    return r;
}

/* A kill, unlike a power cut, leaves what the kernel holds for the disk:
 * what a later run reads is the same whether the sync waited for the disk
 * or not. So the sync is a step, counted, but the wait for the disk
 * (most of a run's time, hundreds of runs a test) is left out. */
int fsync(int fd)
{
    (void)fd;
    step_done();
    return 0;
}

int fchmod(int fd, mode_t mode)
{
    const int r = NEXT(fchmod)(fd, mode);
    step_done();
    return r;
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
    const int r = NEXT(linkat)(olddirfd, oldpath, newdirfd, newpath, flags);
    step_done();
    return r;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    const int r = NEXT(renameat)(olddirfd, oldpath, newdirfd, newpath);
    step_done();
    return r;
}

int rename(const char *oldpath, const char *newpath)
{
    const int r = NEXT(rename)(oldpath, newpath);
    step_done();
    return r;
}

long syscall(long number, ...)   /* renameat2, where the C library has no wrapper */
{
    va_list args;
    va_start(args, number);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(args, long);
    va_end(args);
    const long r = NEXT(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    step_done();
    return r;
}

int unlinkat(int dirfd, const char *path, int flags)
{
    const int r = NEXT(unlinkat)(dirfd, path, flags);
    step_done();
    return r;
}

int unlink(const char *path)
{
    const int r = NEXT(unlink)(path);
    step_done();
    return r;
}

__attribute__((destructor)) static void write_count(void)
{
    const char *path = getenv("KILL_COUNT");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fprintf(f, "%ld\n", steps);
        fclose(f);
    }
}
