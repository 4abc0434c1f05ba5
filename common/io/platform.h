/*
 * platform.h - the few calls that differ between systems, each behind one
 * function, so that the rest of common/ is plain POSIX.
 */
#ifndef PLATFORM_H
#define PLATFORM_H

/* Swap the directory entries a and b, both in the directory dirfd, in one
 * atomic step: whoever looks finds each name holding the one directory or
 * the other, never neither. 0, or -1 with errno; ENOSYS or EINVAL where
 * the system or its file system cannot (the caller then falls back to two
 * renames, see fileset.c). Linux: renameat2 with RENAME_EXCHANGE, called
 * through syscall() where the C library lacks the wrapper. */
int platform_exchange(int dirfd, const char *a, const char *b);

#endif
