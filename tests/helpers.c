/* helpers.c - see helpers.h. */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include "helpers.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/npy.h"

/* The tests read fixtures and run programs by paths relative to the
 * repository's root, which the Makefile compiles in as SOURCE_DIR: the
 * runner moves there first, so ./tests/run_tests works from any directory. */
ReportHook(PRE_ALL)(struct criterion_test_set *tests)
{
    (void)tests;
    if (chdir(SOURCE_DIR) != 0) {
        fprintf(stderr, "run_tests: cannot enter the repository at %s\n", SOURCE_DIR);
        exit(1);
    }
}

void scratch_dir_make(char *buf, size_t len, const char *prefix)
{
    snprintf(buf, len, "/tmp/%s_XXXXXX", prefix);
    if (mkdtemp(buf) == NULL)
        buf[0] = '\0';
}

void scratch_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* Entries of path whose name starts with prefix, or holds infix. */
static int entries_named(const char *path, const char *prefix, const char *infix)
{
    DIR *d = opendir(path);
    int found = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        found += (prefix != NULL && strncmp(e->d_name, prefix, strlen(prefix)) == 0) ||
                 (infix != NULL && strstr(e->d_name, infix) != NULL);
    if (d != NULL)
        closedir(d);
    return found;
}

int set_leftovers(const char *dir)
{
    char parent[600], prefix[620];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    snprintf(prefix, sizeof prefix, ".%s.", base);
    if (slash == parent)
        parent[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    return entries_named(parent, prefix, NULL) + entries_named(dir, NULL, ".tmp");
}

char *read_text_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL)
        return NULL;
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

RunResult run_command_line(const char *command)
{
    RunResult r = {-1, NULL, NULL};
    char out_path[] = "/tmp/attn_test_out_XXXXXX";
    char err_path[] = "/tmp/attn_test_err_XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    if (out_fd < 0 || err_fd < 0)
        return r;
    close(out_fd);
    close(err_fd);
    size_t len = strlen(command) + 2 * sizeof out_path + 64;
    char *cmd = malloc(len);
    snprintf(cmd, len, "%s </dev/null >%s 2>%s", command, out_path, err_path);
    int status = system(cmd);
    free(cmd);
    if (status != -1 && WIFEXITED(status))
        r.status = WEXITSTATUS(status);
    else if (status != -1 && WIFSIGNALED(status))
        r.status = 128 + WTERMSIG(status);
    r.out = read_text_file(out_path, NULL);
    r.err = read_text_file(err_path, NULL);
    unlink(out_path);
    unlink(err_path);
    return r;
}

RunResult run_program(const char *program, const char *args)
{
    size_t len = strlen(BIN_DIR) + strlen(program) + strlen(args) + 8;
    char *command = malloc(len);
    if (!command)
        return (RunResult){-1, NULL, NULL};
    snprintf(command, len, "%s/%s %s", BIN_DIR, program, args);
    RunResult r = run_command_line(command);
    free(command);
    return r;
}

/* Under LeakSanitizer, a child forked from a test process that has other
 * threads (Criterion's) ends with "==PID==Running thread N was not
 * suspended. False leaks are possible." on stderr: fork copies only one
 * thread, and the leak check at exit notices the others are gone. The line
 * is about the fork, not about fn, so it is removed, in place; any other
 * sanitizer report stays and fails the comparison. */
static void drop_fork_leak_warnings(char *text)
{
    static const char warning[] = " was not suspended. False leaks are possible.\n";
    char *line = text;
    while (*line != '\0') {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "==", 2) == 0 && len >= sizeof warning - 1 &&
            strncmp(line + len - (sizeof warning - 1), warning, sizeof warning - 1) == 0)
            memmove(line, line + len, strlen(line + len) + 1);
        else
            line += len;
    }
}

char *stderr_of(void (*fn)(void), int *status)
{
    char err_path[] = "/tmp/attn_test_err_XXXXXX";
    int err_fd = mkstemp(err_path);
    *status = -1;
    if (err_fd < 0)
        return NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(err_fd, STDERR_FILENO);
        fn();
        exit(0);
    }
    close(err_fd);
    int wstatus;
    if (pid > 0 && waitpid(pid, &wstatus, 0) == pid)
        *status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    char *text = read_text_file(err_path, NULL);
    unlink(err_path);
    if (text != NULL)
        drop_fork_leak_warnings(text);
    return text;
}

void run_result_free(RunResult *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

bool is_one_line(const char *text)
{
    size_t len = text ? strlen(text) : 0;
    return len > 0 && strchr(text, '\n') == text + len - 1;
}

void expect_bad_options(const char *program, const char *const (*cases)[2], size_t count)
{
    for (size_t i = 0; i < count; i++) {
        RunResult r = run_program(program, cases[i][0]);
        cr_expect_eq(r.status, 2, "%s %s: status %d", program, cases[i][0], r.status);
        cr_expect(r.err && strstr(r.err, cases[i][1]) != NULL, "%s %s: stderr does not say '%s': %s",
                  program, cases[i][0], cases[i][1], r.err ? r.err : "");
        cr_expect(is_one_line(r.err), "%s %s: stderr is not one line: %s", program, cases[i][0],
                  r.err ? r.err : "");
        /* the line starts with the program's own name */
        const char *name = strrchr(program, '/') ? strrchr(program, '/') + 1 : program;
        cr_expect(r.err && strncmp(r.err, name, strlen(name)) == 0 && r.err[strlen(name)] == ':',
                  "%s %s: stderr does not start with '%s:': %s", program, cases[i][0], name,
                  r.err ? r.err : "");
        cr_expect(r.out && r.out[0] == '\0', "%s %s: printed on stdout before the error",
                  program, cases[i][0]);
        run_result_free(&r);
    }
}

void expect_help_lists(const char *program, const char *const *options, size_t count)
{
    RunResult r = run_program(program, "--help");
    cr_expect_eq(r.status, 0, "%s --help: status %d", program, r.status);
    for (size_t i = 0; i < count; i++)
        cr_expect(r.out && strstr(r.out, options[i]) != NULL, "%s --help does not mention %s",
                  program, options[i]);
    run_result_free(&r);
}

/* Where the numbers of "name = tensor(" or "name =\ntensor(" begin, after
 * p; NULL when there is none. The name must start a line or follow a space. */
static const char *after_tensor_name(const char *text, const char *p, const char *name)
{
    const size_t len = strlen(name);
    for (; (p = strstr(p, name)) != NULL; p++) {
        if (p != text && p[-1] != '\n' && p[-1] != ' ')
            continue;
        if (strncmp(p + len, " = tensor(", 10) == 0 || strncmp(p + len, " =\ntensor(", 10) == 0)
            return p + len + 10;
    }
    return NULL;
}

int tensor_numbers_in(const char *text, const char *name, int occurrence, double *out, int max)
{
    const char *p = text;
    for (int seen = 0; p != NULL && seen <= occurrence; seen++)
        p = after_tensor_name(text, p, name);
    if (p == NULL)
        return -1;
    int count = 0, depth = 0;
    while (*p != '\0') {
        if (*p == '[') {
            depth++;
            p++;
        } else if (*p == ']') {
            p++;
            if (--depth == 0)
                return count;
        } else if (*p == ',' || *p == ' ' || *p == '\n') {
            p++;
        } else {
            char *end;
            double v = strtod(p, &end);
            if (end == p || count == max)
                return -1;
            out[count++] = v;
            p = end;
        }
    }
    return -1;
}

/* See helpers.h. */
int find_programs(char names[][320], int max)
{
    char list_path[512];
    snprintf(list_path, sizeof list_path, "%s/build/programs.txt", BIN_DIR);
    char *list = read_text_file(list_path, NULL);
    cr_assert_not_null(list, "cannot read %s: run make first", list_path);
    int count = 0;
    for (char *name = strtok(list, "\n"); name != NULL; name = strtok(NULL, "\n")) {
        cr_assert_lt(count, max, "%s lists more than %d programs", list_path, max);
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", BIN_DIR, name);
        cr_assert(stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IXUSR),
                  "%s is listed in %s but not built", path, list_path);
        snprintf(names[count++], sizeof names[0], "%s", name);
    }
    free(list);
    return count;
}

void npy_fill_alternating(const char *path, float value)
{
    char err[512];
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert_not_null(x, "%s", err);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = i % 2 ? value : -value;
    cr_assert_eq(npy_save(path, x, err, sizeof err), 0, "%s", err);
    tensor_free(x);
}

/* See helpers.h. */
void expect_same_as_tool(const char *program, const char *tool, const char *args)
{
    RunResult via = run_program(program, args), direct = run_program(tool, args);
    cr_expect_eq(via.status, direct.status, "%s %s: status %d, %s: %d", program, args,
                 via.status, tool, direct.status);
    cr_expect_str_eq(via.out ? via.out : "", direct.out ? direct.out : "", "%s %s", program,
                     args);
    /* stderr: "decode: ..." against "decode_files: ...", the rest the same */
    const char *name = strrchr(program, '/') + 1, *tool_name = strrchr(tool, '/') + 1;
    const char *via_err = via.err ? via.err : "", *direct_err = direct.err ? direct.err : "";
    const size_t n = strlen(name), m = strlen(tool_name);
    if (direct_err[0] != '\0') {
        cr_expect(strncmp(via_err, name, n) == 0 && via_err[n] == ':', "%s %s: stderr is "
                  "not named %s: %s", program, args, name, via_err);
        cr_expect(strncmp(direct_err, tool_name, m) == 0 && direct_err[m] == ':',
                  "%s %s: stderr is not named %s: %s", tool, args, tool_name, direct_err);
        cr_expect_str_eq(via_err + (via_err[n] == ':' ? n : 0),
                         direct_err + (direct_err[m] == ':' ? m : 0), "%s %s", program, args);
    } else {
        cr_expect_str_eq(via_err, "", "%s %s", program, args);
    }
    run_result_free(&via);
    run_result_free(&direct);
}

int *fixture_ints3(const char *path, int a, int b, int c)
{
    NpyInts ints;
    char err[NPY_ERR_LEN];
    cr_assert_eq(npy_load_ints(path, &ints, err, sizeof err), 0, "%s", err);
    cr_assert(ints.ndim == 3 && ints.shape[0] == a && ints.shape[1] == b && ints.shape[2] == c,
              "%s: expected a (%d, %d, %d) array", path, a, b, c);
    const size_t count = (size_t)a * b * c;
    int *copy = malloc(sizeof(int) * count);
    cr_assert(copy);
    memcpy(copy, ints.data, sizeof(int) * count);
    npy_ints_free(&ints);
    return copy;
}

int each_source(const char *const *folders, int count, EachSource each, void *state)
{
    int files = 0;
    for (int f = 0; f < count; f++) {
        DIR *d = opendir(folders[f]);
        cr_assert_not_null(d, "cannot list %s", folders[f]);
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            const size_t len = strlen(e->d_name);
            if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0)
                continue;
            char path[400];
            snprintf(path, sizeof path, "%s/%s", folders[f], e->d_name);
            char *text = read_text_file(path, NULL);
            cr_assert_not_null(text, "cannot read %s", path);
            each(path, text, state);
            files++;
            free(text);
        }
        closedir(d);
    }
    return files;
}
