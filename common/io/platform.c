/* platform.c - the calls that differ between systems. See platform.h. */
#define _GNU_SOURCE
#include "io/platform.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/syscall.h>
#endif

int platform_exchange(int dirfd, const char *a, const char *b)
{
#if defined(__linux__) && defined(SYS_renameat2)
    enum { EXCHANGE = 1 << 1 };   /* RENAME_EXCHANGE in <linux/fs.h> */
    return (int)syscall(SYS_renameat2, dirfd, a, dirfd, b, EXCHANGE);
#else
    (void)dirfd;
    (void)a;
    (void)b;
    errno = ENOSYS;
    return -1;
#endif
}
