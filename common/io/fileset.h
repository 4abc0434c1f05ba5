/*
 * fileset.h - the one writer: every set of files a program writes (a --to
 * set, a model with Adam's state, a plot's .dat and .gp) appears at once,
 * and the one way a program meets SIGINT, SIGTERM and SIGHUP.
 *
 * How a set is written into DIR (PARENT/BASE):
 *
 *   lock       PARENT, so that writers into it take turns
 *   clean      any .BASE.new-XXXXXX that a killed run left in PARENT
 *   build      PARENT/.BASE.new-XXXXXX, a fresh directory: every file of
 *              the new set, written in full
 *   carry      every file of DIR that the set does not write (inputs, other
 *              programs' plots) hard-linked into it
 *   exchange   it and DIR, in one atomic step (platform_exchange, platform.h)
 *   remove     the old set, now under the temporary name; unlock
 *
 * so a kill at any moment (SIGKILL included) leaves DIR holding the whole
 * old set or the whole new set, and the next run into DIR removes what the
 * killed one left. Where the file system cannot exchange two directories,
 * DIR goes aside under .BASE.old-XXXXXX for the instant between two
 * renames, and a run that then finds no DIR but that name puts it back.
 * Nothing is written into DIR itself, so DIR must hold files only (a
 * subdirectory is refused before any work: fileset_check_dir).
 *
 * Readers that read several files of a set (model_load, layer_files_load)
 * take the lock shared, so they never read half of one set and half of
 * the next. SIGINT, SIGTERM and SIGHUP wait while a set is open; SIGXFSZ
 * (ulimit -f) is ignored, so that a file too large is a write error.
 *
 * Errors come back as one line in err (error_format), naming DIR/NAME, the
 * file's final name, never the temporary one.
 */
#ifndef FILESET_H
#define FILESET_H

#include <stdbool.h>
#include <stddef.h>

typedef struct FileSet FileSet;

/* Is dir a directory a set can be written into: it exists (a symbolic-link
 * loop is named as one), is a directory, holds no subdirectory, is
 * searchable and writable, and so is its parent. 0, or -1 with err
 * ("'DIR' is not searchable"); for the option checks before any work. */
int fileset_check_dir(const char *dir, char *err, size_t err_len);

/* A new, empty set for dir; the signals wait from here until the commit or
 * the abandon. NULL with err filled. A begin for a directory whose set is
 * open already joins it: its commit then does nothing, its abandon marks
 * the whole set failed, and the first begin's commit puts everything in
 * place at once (a program's plots, written by several calls, as one set). */
FileSet *fileset_begin(const char *dir, char *err, size_t err_len);
/* File NAME of the set (no '/'): len bytes, written in full now. 0, or -1
 * with err filled; the set stays open, for fileset_abandon. */
int fileset_write(FileSet *set, const char *name, const void *bytes, size_t len, char *err,
                  size_t err_len);
/* NAME is the set's, and not in it: a file of a previous set that this
 * one no longer writes, which is not carried across. */
void fileset_drop(FileSet *set, const char *name);
/* The set into place (see above), and the set freed. 0, or -1 with err
 * filled and DIR as it was. */
int fileset_commit(FileSet *set, char *err, size_t err_len);
/* Nothing of the set written; DIR as it was; the set freed. */
void fileset_abandon(FileSet *set);
/* The end of a set that status says was built (0: commit) or failed (not
 * 0: abandon, err already filled): 0, or -1. */
int fileset_end(FileSet *set, int status, char *err, size_t err_len);

/* A reader's shared lock on dir's set: the fd to pass to
 * fileset_read_unlock, or -1 when it cannot be taken (the reader then
 * reads unlocked: only another writer can be affected). */
int fileset_read_lock(const char *dir);
void fileset_read_unlock(int fd);

/* ---- signals --------------------------------------------------------------
 * cli_parse installs one handler for SIGINT, SIGTERM and SIGHUP in every
 * program: the program ends at once with "PROG: stopped by SIGTERM" and
 * status 128 + the signal. A long loop that would rather finish its step
 * and save (training) asks for the signals to be noted instead
 * (signals_note(true)), and looks at signals_caught() between steps. */
void signals_install(const char *prog);
void signals_note(bool note);
int signals_caught(void);   /* the signal noted, or 0 */
const char *signal_name(int sig);   /* "SIGTERM" */
/* Hold the three back (true) until the matching release (false), which
 * delivers any that came meanwhile. Calls nest. */
void signals_hold(bool hold);

#endif
