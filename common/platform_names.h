/*
 * platform_names.h - the names a file may use beyond strict POSIX, asked
 * for in one place (see platform.h for the calls that differ by system).
 *
 * Include it FIRST, before any system header, in a file that needs more
 * than _POSIX_C_SOURCE 200809L gives: realpath (X/Open), O_NOFOLLOW,
 * mkdtemp, nftw. Every other file defines _POSIX_C_SOURCE 200809L itself.
 *
 *   _XOPEN_SOURCE 700   X/Open 7, which is POSIX 2008 plus the XSI names;
 *                       enough on glibc and musl.
 *   _DARWIN_C_SOURCE    macOS only. Apple's headers read any
 *                       _POSIX_C_SOURCE or _XOPEN_SOURCE as "this much and
 *                       no more" and then hide names that POSIX 2008
 *                       itself has: O_NOFOLLOW (sys/fcntl.h), mkdtemp
 *                       (declared only in unistd.h's Darwin part), and
 *                       O_DIRECTORY in older SDKs. _DARWIN_C_SOURCE gives
 *                       back the full namespace; the X/Open request stays
 *                       for the other systems. Without it, the file writer
 *                       (common/io/fileset.c) does not build on a Mac.
 */
#ifndef PLATFORM_NAMES_H
#define PLATFORM_NAMES_H

#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#if defined(__APPLE__) && !defined(_DARWIN_C_SOURCE)
#define _DARWIN_C_SOURCE
#endif

#endif
