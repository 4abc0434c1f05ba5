/*
 * test_writer.c - the writer of file sets (common/io/fileset.h) as the
 * programs use it: a kill at every step, two writers at once, and the
 * faults that once broke its promises, each run through a real program.
 *
 * The kill harness works the way databases test their logs: a shim
 * (tests/kill/kill_shim.c, loaded with LD_PRELOAD) counts a run's
 * file-system steps and kills it with SIGKILL after the k-th, for every k
 * from the first to the last. After each kill the directory must hold the
 * whole previous set or the whole new one, and the next run must succeed
 * and leave nothing of the killed one behind.
 */
#include "platform_names.h"   /* first: mkdtemp, which macOS hides under strict POSIX */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "io/npy.h"


static const char TRAIN[] = "05_multihead/train";
static const char MULTIHEAD[] = "05_multihead/multihead";

/* ---- a directory's files, to compare ------------------------------------------ */

enum { MAX_FILES = 48 };

typedef struct {
    int count;
    char names[MAX_FILES][260];
    char *bytes[MAX_FILES];
    size_t lens[MAX_FILES];
} Snapshot;

static int by_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static Snapshot *snapshot_take(const char *dir)
{
    Snapshot *s = calloc(1, sizeof *s);
    cr_assert_not_null(s);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s cannot be read", dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && s->count < MAX_FILES)
            snprintf(s->names[s->count++], sizeof s->names[0], "%s", e->d_name);
    closedir(d);
    qsort(s->names, (size_t)s->count, sizeof s->names[0], by_name);
    for (int i = 0; i < s->count; i++) {
        char path[1000];
        snprintf(path, sizeof path, "%s/%s", dir, s->names[i]);
        s->bytes[i] = read_text_file(path, &s->lens[i]);
    }
    return s;
}

static bool snapshot_same(const Snapshot *a, const Snapshot *b)
{
    if (a->count != b->count)
        return false;
    for (int i = 0; i < a->count; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || a->lens[i] != b->lens[i] ||
            a->bytes[i] == NULL || b->bytes[i] == NULL ||
            memcmp(a->bytes[i], b->bytes[i], a->lens[i]) != 0)
            return false;
    return true;
}

static void snapshot_free(Snapshot *s)
{
    for (int i = 0; s && i < s->count; i++)
        free(s->bytes[i]);
    free(s);
}

/* ---- running a program under the shim ------------------------------------------ */

/* "BIN_DIR/program args" with KILL_AT=kill_at (0: none) and the shim, its
 * stdout and stderr thrown away; the exit status, or 128 + the signal.
 * *steps: the run's file-system steps, when it was not killed. */
static int run_counted(const char *program, const char *args, long kill_at, long *steps)
{
    char count_file[] = "/tmp/attn_kill_count_XXXXXX";
    const int fd = mkstemp(count_file);
    cr_assert(fd >= 0);
    close(fd);
    char command[1400];
    snprintf(command, sizeof command,
             "LD_PRELOAD=%s/tests/kill_shim.so KILL_AT=%ld KILL_COUNT=%s %s/%s %s "
             ">/dev/null 2>&1", BIN_DIR, kill_at, count_file, BIN_DIR, program, args);
    const int raw = system(command);
    cr_assert(raw != -1);
    const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    size_t len;
    char *text = read_text_file(count_file, &len);
    if (steps != NULL)
        *steps = text ? atol(text) : -1;
    free(text);
    unlink(count_file);
    return status;
}

typedef struct {
    const char *program;
    const char *args[2];   /* two runs that write different sets; "%s" is the directory */
} KillCase;

typedef struct {
    int tried, old_set, new_set, mixed;
} KillTally;

/* Every kill point of the run that replaces args[a] by args[b], in turn;
 * the roles swap after each point, since the run after the kill leaves the
 * new set in place. */
static KillTally kill_at_every_step(const KillCase *c)
{
    char parent[] = "/tmp/attn_kill_XXXXXX", dir[64], args[2][600];
    cr_assert_not_null(mkdtemp(parent));
    snprintf(dir, sizeof dir, "%s/out", parent);
    cr_assert_eq(mkdir(dir, 0755), 0);
    Snapshot *sets[2];
    for (int i = 0; i < 2; i++) {
        snprintf(args[i], sizeof args[i], c->args[i], dir);
        cr_assert_eq(run_counted(c->program, args[i], 0, NULL), 0, "%s %s", c->program,
                     args[i]);
        sets[i] = snapshot_take(dir);
    }
    cr_assert(!snapshot_same(sets[0], sets[1]), "the two runs write the same files");
    /* the directory holds set 1 now; the first kill interrupts the run of set 0 */
    long steps = 0;
    cr_assert_eq(run_counted(c->program, args[0], 0, &steps), 0);
    cr_assert_eq(run_counted(c->program, args[1], 0, NULL), 0);
    cr_assert(steps > 3, "%s counted %ld steps: the shim did not see the writer", c->program,
              steps);
    KillTally tally = {0};
    int from = 1;
    for (long k = 1; k <= steps; k++, from = 1 - from) {
        const int to = 1 - from;
        const int status = run_counted(c->program, args[to], k, NULL);
        cr_expect_eq(status, 128 + SIGKILL, "%s: step %ld of %ld was not reached", c->program,
                     k, steps);
        tally.tried++;
        Snapshot *now = snapshot_take(dir);
        if (snapshot_same(now, sets[from]))
            tally.old_set++;
        else if (snapshot_same(now, sets[to]))
            tally.new_set++;
        else
            tally.mixed++;
        cr_expect(snapshot_same(now, sets[from]) || snapshot_same(now, sets[to]),
                  "%s killed after step %ld: neither the old set nor the new one", c->program,
                  k);
        snapshot_free(now);
        /* the next run succeeds and leaves nothing of the killed one */
        cr_expect_eq(run_counted(c->program, args[to], 0, NULL), 0,
                     "%s: the run after a kill at step %ld failed", c->program, k);
        now = snapshot_take(dir);
        cr_expect(snapshot_same(now, sets[to]), "after a kill at step %ld", k);
        snapshot_free(now);
        cr_expect_eq(set_leftovers(dir), 0, "%s: a kill at step %ld left files that the next "
                     "run did not remove", c->program, k);
    }
    cr_log_info("kill harness: %s: %d kill points, old set %d, new set %d, mixed %d",
                c->program, tally.tried, tally.old_set, tally.new_set, tally.mixed);
    snapshot_free(sets[0]);
    snapshot_free(sets[1]);
    char command[200];
    snprintf(command, sizeof command, "rm -rf %s", parent);
    cr_assert_eq(system(command), 0);
    return tally;
}

static const KillCase KILL_CASES[] = {
    {TRAIN, {"--steps 3 --examples 20 --seed 1 --to %s",
                            "--steps 3 --examples 20 --seed 2 --to %s"}},
    {MULTIHEAD, {"--seed 1 --to %s", "--seed 2 --to %s"}},
    {TRAIN, {"--steps 3 --examples 20 --seed 1 --plot %s",
                            "--steps 3 --examples 20 --seed 2 --plot %s"}},
};

Test(writer, a_kill_at_any_step_leaves_one_whole_set, .timeout = 600)
{
#if !defined(__linux__)
    cr_skip_test("the kill shim is loaded with LD_PRELOAD, which only Linux's loader "
                 "reads (make test builds it on Linux only)");
#endif
    if (UNDER_ASAN)
        cr_skip_test("the shim cannot be preloaded before the sanitizer's runtime");
    for (size_t i = 0; i < sizeof KILL_CASES / sizeof KILL_CASES[0]; i++) {
        const KillTally t = kill_at_every_step(&KILL_CASES[i]);
        cr_expect_eq(t.mixed, 0);
        cr_expect(t.old_set > 0 && t.new_set > 0, "%s: the kills never reached both sides "
                  "of the exchange (old %d, new %d)", KILL_CASES[i].program, t.old_set,
                  t.new_set);
    }
}

/* ---- what once broke, each through the program that broke it ------------------- */

/* A fresh "/tmp/attn_writer_XXXXXX/out" into dir (64 bytes); its parent is
 * the test's own, so nothing else writes beside it. */
static void fresh_dir(char *dir)
{
    char parent[] = "/tmp/attn_writer_XXXXXX";
    cr_assert_not_null(mkdtemp(parent));
    snprintf(dir, 64, "%s/out", parent);
    cr_assert_eq(mkdir(dir, 0755), 0);
}

static void remove_fresh_dir(const char *dir)
{
    char command[200];
    snprintf(command, sizeof command, "rm -rf '%.*s'", (int)(strrchr(dir, '/') - dir), dir);
    cr_assert_eq(system(command), 0);
}

/* Every .npy file in dir loads (npy_load refuses a NaN or an infinity). */
static void expect_every_file_finite(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strstr(e->d_name, ".npy") == NULL || strstr(e->d_name, "step") != NULL ||
            strstr(e->d_name, "training") != NULL || strstr(e->d_name, "num_heads") != NULL)
            continue;   /* whole numbers */
        char path[700], err[NPY_ERR_LEN];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        Tensor *x = npy_load(path, err, sizeof err);
        cr_expect_not_null(x, "%s", err);
        tensor_free(x);
        files++;
    }
    closedir(d);
    cr_expect(files > 5, "only %d files", files);
}

/* Adam's squared-gradient averages overflowed to inf at this rate, and the
 * model was saved with them, "saved" and exit 0; resuming was then refused.
 * Now the run stops with one line at the step that overflowed, keeps the
 * last good state, and what it saved loads and runs. */
Test(writer, overflowing_moments_are_never_saved)
{
    char dir[64], args[200];
    fresh_dir(dir);
    snprintf(args, sizeof args, "--lr 1e6 --steps 300 --examples 50 --to %s", dir);
    RunResult r = run_program(TRAIN, args);
    cr_expect_eq(r.status, 1, "%s", r.err);
    cr_expect(is_one_line(r.err), "stderr: %s", r.err);
    cr_expect_null(strstr(r.out, "saved the model"));
    expect_every_file_finite(dir);
    snprintf(args, sizeof args, "--from %s --examples 50", dir);
    RunResult again = run_program(TRAIN, args);
    cr_expect_eq(again.status, 0, "the saved model does not run: %s", again.err);
    run_result_free(&r);
    run_result_free(&again);
    remove_fresh_dir(dir);
}

/* Two runs saving into one directory at once left seed 2's weights beside
 * seed 1's Adam state, both with exit 0. Now whichever set is last is the
 * one the directory holds, whole. */
Test(writer, concurrent_saves_never_mix, .timeout = 120)
{
    char dir[64], one[64], two[64], args[3][200];
    fresh_dir(dir);
    fresh_dir(one);
    fresh_dir(two);
    const char *form = "--steps 40 --examples 20 --seed %d --to %s >/dev/null 2>&1";
    snprintf(args[0], sizeof args[0], form, 1, one);
    snprintf(args[1], sizeof args[1], form, 2, two);
    cr_assert_eq(run_program(TRAIN, args[0]).status, 0);
    cr_assert_eq(run_program(TRAIN, args[1]).status, 0);
    Snapshot *seed1 = snapshot_take(one), *seed2 = snapshot_take(two);
    for (int round = 0; round < 4; round++) {
        char command[700];
        snprintf(command, sizeof command,
                 "%s/%s --steps 40 --examples 20 --seed 1 --to %s >/dev/null 2>&1 & "
                 "%s/%s --steps 40 --examples 20 --seed 2 --to %s >/dev/null 2>&1 & "
                 "wait %%1; a=$?; wait %%2; b=$?; exit $((a + b))",
                 BIN_DIR, TRAIN, dir, BIN_DIR, TRAIN, dir);
        const int raw = system(command);
        cr_expect(WIFEXITED(raw) && WEXITSTATUS(raw) == 0, "a writer failed: %d", raw);
        Snapshot *now = snapshot_take(dir);
        cr_expect(snapshot_same(now, seed1) || snapshot_same(now, seed2),
                  "round %d: the directory holds neither run's set whole", round);
        cr_expect_eq(set_leftovers(dir), 0);
        snapshot_free(now);
    }
    snapshot_free(seed1);
    snapshot_free(seed2);
    remove_fresh_dir(dir);
    remove_fresh_dir(one);
    remove_fresh_dir(two);
}

/* "ulimit -f" once ended the program silently (SIGXFSZ, status 153) with
 * temporary files left; a full disk gave three lines and half the plots.
 * Now a file too large is a write error: one line naming the file and the
 * reason, exit 1, the previous set whole, nothing left beside it.
 * program runs with its run's arguments, then option DIR; the second time,
 * under the limit, again's arguments go first. */
static void expect_one_line_on_a_full_disk(const char *program, const char *run,
                                           const char *again, const char *option)
{
    char dir[64], args[200], command[600];
    fresh_dir(dir);
    snprintf(args, sizeof args, "%s %s %s", run, option, dir);
    RunResult first = run_program(program, args);
    cr_assert_eq(first.status, 0, "%s %s: %s", program, args, first.err);
    run_result_free(&first);
    Snapshot *before = snapshot_take(dir);
    snprintf(command, sizeof command, "ulimit -f 1; %s/%s %s %s", BIN_DIR, program, again, args);
    char err_path[100];
    snprintf(err_path, sizeof err_path, "%s.err", dir);
    char full[800];
    snprintf(full, sizeof full, "(%s) >/dev/null 2>%s", command, err_path);
    const int raw = system(full);
    cr_expect(WIFEXITED(raw) && WEXITSTATUS(raw) == 1, "%s %s: status %d", program, option,
              WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw));
    char *err = read_text_file(err_path, NULL);
    cr_expect(err && is_one_line(err), "%s: not one line: %s", option, err ? err : "");
    cr_expect(err && strstr(err, "File too large") != NULL, "%s: %s", option, err ? err : "");
    Snapshot *after = snapshot_take(dir);
    cr_expect(snapshot_same(before, after), "%s: the previous set was changed", option);
    cr_expect_eq(set_leftovers(dir), 0);
    free(err);
    unlink(err_path);
    snapshot_free(before);
    snapshot_free(after);
    remove_fresh_dir(dir);
}

Test(writer, a_file_too_large_is_one_line)
{
    expect_one_line_on_a_full_disk(TRAIN, "--steps 3 --examples 20", "--seed 5", "--to");
    expect_one_line_on_a_full_disk(TRAIN, "--steps 3 --examples 20", "--seed 5", "--plot");
    /* the writers of run/layer_files.c pass the status on as it is: 1, not 255 */
    expect_one_line_on_a_full_disk("05_multihead/multihead", "", "--seed 5", "--plot");
    expect_one_line_on_a_full_disk("05_multihead/layer_files",
                                   "--from tests/fixtures/multihead/bias_2d --heads 4", "",
                                   "--plot");
}

/* Paths over 1,024 characters were cut: train_loss.dat and .gp were both
 * written as "train_", exit 0. */
Test(writer, a_long_path_is_written_whole)
{
    char dir[64];
    fresh_dir(dir);
    char *path = malloc(2000), *args = malloc(2200);
    cr_assert(path && args);
    int len = snprintf(path, 2000, "%s", dir);
    for (int level = 0; level < 6; level++) {   /* six folders of 200 letters */
        path[len++] = '/';
        memset(path + len, 'a' + level, 200);
        len += 200;
        path[len] = '\0';
        cr_assert_eq(mkdir(path, 0755), 0);
    }
    cr_assert(len > 1100);
    snprintf(args, 2200, "--steps 3 --examples 20 --plot %s", path);
    RunResult r = run_program(TRAIN, args);
    cr_expect_eq(r.status, 0, "%s", r.err);
    const char *names[] = {"train_loss.dat", "train_loss.gp", "train_attention.dat"};
    for (int i = 0; i < 3; i++) {
        char *file = malloc(2100);
        snprintf(file, 2100, "%s/%s", path, names[i]);
        cr_expect_eq(access(file, F_OK), 0, "%s is not there", names[i]);
        free(file);
    }
    run_result_free(&r);
    free(path);
    free(args);
    remove_fresh_dir(dir);
}

/* program args, sent sig after delay_ms: its exit status and stderr. Its
 * standard output is a pipe, read to its end afterwards: *lingered says
 * whether a process it started (the bench's measuring child) still held
 * the pipe 3 s after the program ended. */
static int signalled(const char *program, const char *args, int sig, int delay_ms, char **err,
                     bool *lingered)
{
    char err_path[] = "/tmp/attn_signal_err_XXXXXX";
    const int fd = mkstemp(err_path);
    int out[2];
    cr_assert(fd >= 0 && pipe(out) == 0);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        char command[800];
        snprintf(command, sizeof command, "exec %s/%s %s", BIN_DIR, program, args);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    close(fd);
    close(out[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    const struct timespec delay = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    nanosleep(&delay, NULL);
    kill(pid, sig);
    int raw;
    char sink[4096];
    for (pid_t done = 0; done == 0;) {   /* drain the pipe, so the program never blocks */
        while (read(out[0], sink, sizeof sink) > 0)
            continue;
        done = waitpid(pid, &raw, WNOHANG);
        cr_assert(done == 0 || done == pid);
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
    ssize_t got = -1;
    for (int tries = 0; tries < 300 && got != 0; tries++) {   /* up to 3 s for the end */
        while ((got = read(out[0], sink, sizeof sink)) > 0)
            continue;
        if (got != 0)
            nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
    *lingered = got != 0;
    close(out[0]);
    *err = read_text_file(err_path, NULL);
    unlink(err_path);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

/* SIGTERM was ignored in --bench and while a loaded model was evaluated,
 * and SIGHUP ended training with nothing saved. Now each mode stops with
 * one line and 128 + the signal, and training saves its last step first. */
Test(writer, signals_in_every_mode, .timeout = 120)
{
    char dir[64], args[200], *err = NULL;
    bool lingered;
    fresh_dir(dir);
    cr_expect_eq(signalled(TRAIN, "--bench", SIGTERM, 600, &err, &lingered), 128 + SIGTERM);
    cr_expect(err && is_one_line(err) && strstr(err, "SIGTERM"), "--bench: %s", err);
    free(err);

    snprintf(args, sizeof args, "--steps 1000000 --to %s", dir);
    cr_expect_eq(signalled(TRAIN, args, SIGHUP, 600, &err, &lingered), 128 + SIGHUP);
    cr_expect(err && is_one_line(err) && strstr(err, "SIGHUP"), "training: %s", err);
    free(err);
    expect_every_file_finite(dir);   /* the last step, saved */

    /* evaluating only: the saved set is read, never written, and stays whole */
    Snapshot *before = snapshot_take(dir);
    const int sigs[2] = {SIGTERM, SIGHUP};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "--from %s --examples 100000", dir);
        cr_expect_eq(signalled(TRAIN, args, sigs[i], 300, &err, &lingered), 128 + sigs[i]);
        cr_expect(err && is_one_line(err) && strstr(err, sigs[i] == SIGHUP ? "SIGHUP" : "SIGTERM"),
                  "evaluating: %s", err);
        free(err);
    }
    Snapshot *after = snapshot_take(dir);
    cr_expect(snapshot_same(before, after), "evaluating changed the saved set");
    snapshot_free(before);
    snapshot_free(after);
    remove_fresh_dir(dir);
}

/* The bench measures each line in a child process. SIGINT in the middle of
 * a long line ends the bench with one line and 128 + 2, and the child with
 * it: none measures on, orphaned, for minutes. */
Test(writer, sigint_during_a_bench_line, .timeout = 120)
{
    char *err = NULL;
    bool lingered = true;
    const int status = signalled("05_multihead/bench", "--config 4,2048,512,8 --repeats 51",
                                 SIGINT, 2500, &err, &lingered);
    cr_expect_eq(status, 128 + SIGINT, "%s", err);
    cr_expect(err && is_one_line(err) && strstr(err, "bench: stopped by SIGINT"), "%s", err);
    cr_expect(!lingered, "the measuring child ran on after the bench stopped");
    free(err);
}

/* multihead --from A --to B wrote B, then exited 1 when the comparison with
 * A's expected_*.npy failed. Now a failed check writes nothing. */
Test(writer, a_failed_check_keeps_the_previous_result)
{
    char from[64], to[64], args[300];
    fresh_dir(from);
    fresh_dir(to);
    snprintf(args, sizeof args, "--to %s", from);
    cr_assert_eq(run_program(MULTIHEAD, args).status, 0);
    snprintf(args, sizeof args, "--seed 3 --to %s", to);
    cr_assert_eq(run_program(MULTIHEAD, args).status, 0);
    Snapshot *before = snapshot_take(to);
    /* an expected output that cannot match: the output's own shape, all 7 */
    char path[200], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/output.npy", from);
    Tensor *output = npy_load(path, err, sizeof err);
    cr_assert_not_null(output, "%s", err);
    for (size_t i = 0; i < output->size; i++)
        output->data[i] = 7.0f;
    snprintf(path, sizeof path, "%s/expected_output.npy", from);
    cr_assert_eq(npy_save(path, output, err, sizeof err), 0, "%s", err);
    tensor_free(output);
    snprintf(args, sizeof args, "--from %s --heads 5 --to %s", from, to);
    RunResult r = run_program(MULTIHEAD, args);
    cr_expect_eq(r.status, 1, "%s", r.err);
    cr_expect(is_one_line(r.err), "%s", r.err);
    Snapshot *after = snapshot_take(to);
    cr_expect(snapshot_same(before, after), "the failed check replaced the previous set");
    snapshot_free(before);
    snapshot_free(after);
    run_result_free(&r);
    remove_fresh_dir(from);
    remove_fresh_dir(to);
}

/* A model saved with --to carries its words, in id order, beside the
 * parameters: the countries the keys and queries name, and the capitals the
 * readout scores, so that Python can decode an answer without reading C. */
Test(writer, a_saved_model_carries_its_vocabulary)
{
    char dir[64], args[200], path[100];
    fresh_dir(dir);
    snprintf(args, sizeof args, "--steps 3 --examples 20 --countries 9 --to %s", dir);
    RunResult r = run_program(TRAIN, args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    snprintf(path, sizeof path, "%s/vocabulary.json", dir);
    char *text = read_text_file(path, NULL);
    cr_assert_not_null(text, "no vocabulary.json beside the model");
    cr_expect_str_eq(text, "{\"countries\": [\"Japan\", \"France\", \"Peru\", \"Kenya\", "
                     "\"Chile\", \"Egypt\", \"Spain\", \"Italy\", \"Brazil\"],\n"
                     " \"capitals\": [\"Tokyo\", \"Paris\", \"Lima\", \"Nairobi\", "
                     "\"Santiago\", \"Cairo\", \"Madrid\", \"Rome\", \"Brasilia\"]}\n");
    /* the readout scores as many capitals as the file names */
    snprintf(path, sizeof path, "%s/readout.weight.npy", dir);
    char err[NPY_ERR_LEN];
    Tensor *readout = npy_load(path, err, sizeof err);
    cr_assert_not_null(readout, "%s", err);
    cr_expect_eq(readout->shape[0], 9);
    tensor_free(readout);
    free(text);
    run_result_free(&r);
    remove_fresh_dir(dir);
}
