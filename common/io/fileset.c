/*
 * fileset.c - the one writer of sets of files, and the signals. See
 * fileset.h for the steps and what they promise.
 */
#include "platform_names.h"   /* first: realpath (XSI), O_NOFOLLOW and mkdtemp on macOS */
#include "io/fileset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "memory.h"
#include "platform.h"

struct FileSet {
    char *dir;          /* the target, as the caller named it (for messages) */
    char *parent;       /* its parent directory's real path */
    char *base;         /* its last component, inside parent */
    char *temp;         /* ".BASE.new-XXXXXX", inside parent */
    int parent_fd;      /* the parent directory, locked for the set's life */
    int temp_fd;        /* the new directory */
    char **names;       /* the files written so far */
    int count;
    int joined;         /* begins that joined this set while it was open */
    bool failed;        /* a joined writer abandoned its part */
};

/* The set this process has open, which a begin for the same directory
 * joins instead of starting a second one (a program's two plots, one set). */
static FileSet *open_set;

/* A copy of s, new. */
static char *copied(const char *s)
{
    char *copy = checked_malloc(strlen(s) + 1, 1);
    return strcpy(copy, s);
}

/* "DIR/NAME" in a new string. */
static char *joined(const char *dir, const char *name)
{
    const size_t len = strlen(dir) + 1 + strlen(name) + 1;
    char *path = checked_malloc(len, 1);
    snprintf(path, len, "%s/%s", dir, name);
    return path;
}

/* dir's parent and last component, both new, from its real path (so "."
 * and a symbolic link to a directory name the directory itself):
 * "/a/b" -> "/a", "b". 0, or -1 when dir does not exist or has no parent
 * to write in ("/"). */
static int split_dir(const char *dir, char **parent, char **base)
{
    char *path = realpath(dir, NULL);
    if (path == NULL)
        return -1;
    char *last = strrchr(path, '/');
    if (last == NULL || last[1] == '\0') {   /* "/" */
        free(path);
        return -1;
    }
    *base = copied(last + 1);
    last[last == path ? 1 : 0] = '\0';   /* "/b" -> "/" */
    *parent = path;
    return 0;
}

/* ---- checks before work ---------------------------------------------------- */

int fileset_check_dir(const char *dir, char *err, size_t err_len)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno == ELOOP
                   ? error_format(err, err_len, NULL, "'%s' is a loop of symbolic links", dir)
               : errno == ENOENT
                   ? error_format(err, err_len, NULL, "directory '%s' does not exist", dir)
                   : error_format(err, err_len, NULL, "'%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return error_format(err, err_len, NULL, "'%s' is not a directory", dir);
    if (access(dir, X_OK) != 0)
        return error_format(err, err_len, NULL, "directory '%s' is not searchable", dir);
    if (access(dir, W_OK | R_OK) != 0)
        return error_format(err, err_len, NULL, "directory '%s' is not writable", dir);
    char *parent, *base;
    if (split_dir(dir, &parent, &base) != 0)
        return error_format(err, err_len, NULL, "'%s' cannot be replaced as a whole; name a "
                            "directory of its own", dir);
    const bool parent_ok = access(parent, W_OK | X_OK | R_OK) == 0;
    int status = parent_ok ? 0
                           : error_format(err, err_len, NULL, "'%s' is in a directory, '%s', "
                                          "that is not writable: the new files are written "
                                          "beside it first", dir, parent);
    free(parent);
    free(base);
    DIR *d = status == 0 ? opendir(dir) : NULL;
    for (struct dirent *e; d != NULL && status == 0 && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = joined(dir, e->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            status = error_format(err, err_len, NULL, "'%s' holds a directory, '%s': files "
                                  "are written into a directory that holds files only",
                                  dir, e->d_name);
        free(path);
    }
    if (d != NULL)
        closedir(d);
    return status;
}

/* ---- removing what a killed run left ---------------------------------------- */

/* Remove name (a directory of files) from dirfd. */
static void remove_tree(int dirfd, const char *name)
{
    const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && d == NULL)
        close(fd);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(fd, e->d_name, 0);
    if (d != NULL)
        closedir(d);
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* With the lock held, so no live writer's directory is among them: every
 * .BASE.new-* goes; a .BASE.old-* (two renames, killed between them) goes
 * back to BASE when BASE is missing, else goes too. */
static void clean_up_after_kills(int parent_fd, const char *base)
{
    char *new_stem = checked_malloc(strlen(base) + 8, 1);
    char *old_stem = checked_malloc(strlen(base) + 8, 1);
    sprintf(new_stem, ".%s.new-", base);
    sprintf(old_stem, ".%s.old-", base);
    const int fd = dup(parent_fd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && d == NULL)
        close(fd);
    struct stat st;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (starts_with(e->d_name, new_stem))
            remove_tree(parent_fd, e->d_name);
        else if (starts_with(e->d_name, old_stem) &&
                 (fstatat(parent_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
                  renameat(parent_fd, e->d_name, parent_fd, base) != 0))
            remove_tree(parent_fd, e->d_name);
    }
    if (d != NULL)
        closedir(d);
    free(new_stem);
    free(old_stem);
}

/* ---- writing a set ------------------------------------------------------------ */

static void set_free(FileSet *set)
{
    if (open_set == set)
        open_set = NULL;
    if (set->temp_fd >= 0)
        close(set->temp_fd);
    if (set->parent_fd >= 0)
        close(set->parent_fd);   /* and the lock with it */
    for (int i = 0; i < set->count; i++)
        free(set->names[i]);
    free(set->names);
    free(set->dir);
    free(set->parent);
    free(set->base);
    free(set->temp);
    free(set);
    signals_hold(false);
}

/* set->dir's parent opened and locked into set->parent_fd, set->parent and
 * set->base named, what a killed writer left there cleaned up, and dir
 * still a directory: 0, or -1 with the error in err (set_free frees what
 * was taken). */
static int lock_parent(FileSet *set, char *err, size_t err_len)
{
    const char *dir = set->dir;
    if (split_dir(dir, &set->parent, &set->base) != 0) {
        struct stat st;
        error_format(err, err_len, NULL, "cannot write into '%s': %s", dir,
                     stat(dir, &st) != 0 ? strerror(errno) : "it is the root directory");
        return -1;
    }
    set->parent_fd = open(set->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (set->parent_fd < 0 || platform_lock(set->parent_fd, true) != 0) {
        error_format(err, err_len, set->parent, "cannot lock the directory: %s",
                     strerror(errno));
        return -1;
    }
    clean_up_after_kills(set->parent_fd, set->base);
    struct stat st;
    if (fstatat(set->parent_fd, set->base, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode)) {   /* gone since split_dir looked */
        error_format(err, err_len, NULL, "cannot write into '%s': not a directory", dir);
        return -1;
    }
    return 0;
}

FileSet *fileset_begin(const char *dir, char *err, size_t err_len)
{
    if (open_set != NULL && strcmp(open_set->dir, dir) == 0) {
        open_set->joined++;
        return open_set;
    }
    signal(SIGXFSZ, SIG_IGN);   /* a file past ulimit -f: EFBIG, one line, not a silent end */
    signals_hold(true);
    FileSet *set = checked_calloc(1, sizeof *set);
    set->parent_fd = set->temp_fd = -1;
    set->dir = copied(dir);
    if (lock_parent(set, err, err_len) != 0) {
        set_free(set);
        return NULL;
    }
    // build: a fresh directory beside dir, with dir's permissions
    char *stem = checked_malloc(strlen(set->base) + 16, 1);
    sprintf(stem, ".%s.new-XXXXXX", set->base);
    char *temp_path = joined(set->parent, stem);
    free(stem);
    if (mkdtemp(temp_path) == NULL) {
        error_format(err, err_len, set->dir, "cannot write beside it: %s", strerror(errno));
        free(temp_path);
        set_free(set);
        return NULL;
    }
    set->temp = copied(strrchr(temp_path, '/') + 1);
    free(temp_path);
    set->temp_fd = openat(set->parent_fd, set->temp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (set->temp_fd < 0) {
        error_format(err, err_len, set->dir, "cannot write beside it: %s", strerror(errno));
        fileset_abandon(set);
        return NULL;
    }
    if (open_set == NULL)
        open_set = set;
    return set;
}

/* fd's bytes written in full: 0, or -1 with errno. */
static int write_all(int fd, const unsigned char *bytes, size_t len)
{
    while (len > 0) {
        const ssize_t n = write(fd, bytes, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        bytes += n;
        len -= (size_t)n;
    }
    return 0;
}

static void own(FileSet *set, const char *name);

int fileset_write(FileSet *set, const char *name, const void *bytes, size_t len, char *err,
                  size_t err_len)
{
    char *final = joined(set->dir, name);
    if (*name == '\0' || strchr(name, '/') != NULL) {
        error_format(err, err_len, final, "not a plain file name");
        free(final);
        return -1;
    }
    const int fd = openat(set->temp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    int status = 0, saved = 0;
    if (fd < 0 || write_all(fd, bytes, len) != 0 || fsync(fd) != 0) {
        status = -1;
        saved = errno;
    }
    if (fd >= 0 && close(fd) != 0 && status == 0) {
        status = -1;
        saved = errno;
    }
    if (status != 0) {
        error_format(err, err_len, final, "cannot write: %s", strerror(saved ? saved : EIO));
    } else {
        own(set, name);
    }
    free(final);
    return status;
}

/* name into the set's list of its own files. */
static void own(FileSet *set, const char *name)
{
    set->names = realloc(set->names, (size_t)(set->count + 1) * sizeof *set->names);
    if (set->names == NULL)
        die("out of memory");
    set->names[set->count++] = copied(name);
}

void fileset_drop(FileSet *set, const char *name)
{
    own(set, name);
}

static bool in_set(const FileSet *set, const char *name)
{
    for (int i = 0; i < set->count; i++)
        if (strcmp(set->names[i], name) == 0)
            return true;
    return false;
}

/* carry: every file of DIR that the set does not write, hard-linked in. */
static int carry_across(FileSet *set, char *err, size_t err_len)
{
    const int fd = openat(set->parent_fd, set->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : error_format(err, err_len, set->dir, "cannot read: %s",
                                                   strerror(errno));
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return error_format(err, err_len, set->dir, "cannot read: %s", strerror(errno));
    }
    int status = 0;
    for (struct dirent *e; status == 0 && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            /* a directory cannot be linked, and moving it would lose it to a kill */
            char *path = joined(set->dir, e->d_name);
            status = error_format(err, err_len, path, in_set(set, e->d_name)
                                  ? "cannot write: a directory has that name"
                                  : "is a directory: a set is written into a directory "
                                    "that holds files only");
            free(path);
            continue;
        }
        if (in_set(set, e->d_name))
            continue;
        if (linkat(fd, e->d_name, set->temp_fd, e->d_name, 0) != 0) {
            char *path = joined(set->dir, e->d_name);
            status = error_format(err, err_len, path, "cannot keep it beside the new files: %s",
                                  strerror(errno));
            free(path);
        }
    }
    closedir(d);
    return status;
}

/* exchange: the new directory in DIR's place; the old one, if any, under
 * the temporary name, for remove. */
static int exchange(FileSet *set, char *err, size_t err_len)
{
    char *temp = joined(set->parent, set->temp), *target = joined(set->parent, set->base);
    const int exchanged = platform_exchange(temp, target);
    const int saved = errno;
    free(temp);
    free(target);
    if (exchanged == 0)
        return 0;
    if (saved != ENOTSUP)
        return error_format(err, err_len, set->dir, "cannot replace: %s", strerror(saved));
    /* no exchange here: DIR aside for an instant (see clean_up_after_kills) */
    char *aside = checked_malloc(strlen(set->base) + 16, 1);
    sprintf(aside, ".%s.old-%.6s", set->base, set->temp + strlen(set->temp) - 6);
    int status = 0;
    if (renameat(set->parent_fd, set->base, set->parent_fd, aside) != 0)
        status = error_format(err, err_len, set->dir, "cannot replace: %s", strerror(errno));
    else if (renameat(set->parent_fd, set->temp, set->parent_fd, set->base) != 0) {
        status = error_format(err, err_len, set->dir, "cannot replace: %s", strerror(errno));
        renameat(set->parent_fd, aside, set->parent_fd, set->base);
    }
    if (status == 0) {
        free(set->temp);
        set->temp = aside;
    } else {
        free(aside);
    }
    return status;
}

int fileset_commit(FileSet *set, char *err, size_t err_len)
{
    if (set->joined > 0) {   /* a joined part: the set goes in place with the first begin */
        set->joined--;
        return 0;
    }
    if (set->failed) {
        error_format(err, err_len, set->dir, "not written: a part of the set failed");
        fileset_abandon(set);
        return -1;
    }
    int status = carry_across(set, err, err_len);
    struct stat st;
    if (status == 0 && fstatat(set->parent_fd, set->base, &st, 0) == 0)
        fchmod(set->temp_fd, st.st_mode & 07777);   /* mkdtemp made it private */
    if (status == 0 && fsync(set->temp_fd) != 0)
        status = error_format(err, err_len, set->dir, "cannot write: %s", strerror(errno));
    if (status == 0)
        status = exchange(set, err, err_len);
    if (status != 0) {
        fileset_abandon(set);
        return -1;
    }
    fsync(set->parent_fd);
    // remove: the old set, now under the temporary name
    if (set->temp != NULL)
        remove_tree(set->parent_fd, set->temp);
    set_free(set);
    return 0;
}

void fileset_abandon(FileSet *set)
{
    if (set->joined > 0) {   /* a joined part: the whole set will be abandoned */
        set->joined--;
        set->failed = true;
        return;
    }
    if (set->temp != NULL)
        remove_tree(set->parent_fd, set->temp);
    set_free(set);
}

int fileset_end(FileSet *set, int status, char *err, size_t err_len)
{
    if (status == 0)
        return fileset_commit(set, err, err_len);
    fileset_abandon(set);   /* the previous set stays */
    return -1;
}

int fileset_read_lock(const char *dir)
{
    char *parent, *base;
    if (split_dir(dir, &parent, &base) != 0)
        return -1;
    const int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(parent);
    free(base);
    if (fd >= 0 && platform_lock(fd, false) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void fileset_read_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* ---- signals ------------------------------------------------------------------- */

static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};
enum { NUM_STOP_SIGNALS = 3 };
static const char *stop_lines[NUM_STOP_SIGNALS];   /* "PROG: stopped by SIGINT\n" */
static volatile sig_atomic_t noting, caught;
static int hold_depth;
static sigset_t held_mask;

const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP"
                                                                                : "a signal";
}

static void on_stop_signal(int sig)
{
    if (noting) {
        caught = sig;
        return;
    }
    /* only async-signal-safe calls: write and _exit */
    for (int i = 0; i < NUM_STOP_SIGNALS; i++)
        if (STOP_SIGNALS[i] == sig && stop_lines[i] != NULL) {
            ssize_t ignored = write(STDERR_FILENO, stop_lines[i], strlen(stop_lines[i]));
            (void)ignored;
        }
    _exit(128 + sig);
}

void signals_install(const char *prog)
{
    signal(SIGXFSZ, SIG_IGN);
    for (int i = 0; i < NUM_STOP_SIGNALS; i++) {
        if (stop_lines[i] == NULL) {
            const char *name = signal_name(STOP_SIGNALS[i]);
            const size_t len = strlen(prog) + strlen(": stopped by \n") + strlen(name) + 1;
            char *line = checked_malloc(len, 1);
            snprintf(line, len, "%s: stopped by %s\n", prog, name);
            stop_lines[i] = line;
        }
        struct sigaction action = {.sa_handler = on_stop_signal};
        sigemptyset(&action.sa_mask);
        sigaction(STOP_SIGNALS[i], &action, NULL);
    }
}

void signals_note(bool note)
{
    noting = note;
}

int signals_caught(void)
{
    return caught;
}

void signals_hold(bool hold)
{
    if (hold && hold_depth++ == 0) {
        sigset_t mask;
        sigemptyset(&mask);
        for (int i = 0; i < NUM_STOP_SIGNALS; i++)
            sigaddset(&mask, STOP_SIGNALS[i]);
        sigprocmask(SIG_BLOCK, &mask, &held_mask);
    } else if (!hold && hold_depth > 0 && --hold_depth == 0) {
        sigprocmask(SIG_SETMASK, &held_mask, NULL);   /* a held signal lands here */
    }
}
