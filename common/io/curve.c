/*
 * curve.c - line plots (introduced in chapter 05's optional section
 * "Attention that learns"). See curve.h.
 *
 * Legend: N = points per curve, S = curves.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/curve.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One error line, "[prog: ]plot_curves: ...", then -1 for the caller to return. */
#define curve_fail(...) report_error("plot_curves", __VA_ARGS__)

/* A gnuplot string in single quotes: a quote inside is written twice, a
 * newline (which would end the command) becomes a space. */
static void gp_string(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("''", f);
        else
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('\'', f);
}

static void write_dat(FILE *f, const char *name, const Tensor *xs, const Tensor *ys, int S,
                      const char *const *titles)
{
    const int N = xs->shape[0];
    fprintf(f, "# %s: %d points of %d curve%s; columns: x", name, N, S, S == 1 ? "" : "s");
    for (int s = 0; s < S; s++)
        fprintf(f, ", %s", titles ? titles[s] : "y");
    fputc('\n', f);
    for (int i = 0; i < N; i++) {
        fprintf(f, "%.9g", (double)xs->data[i]);
        for (int s = 0; s < S; s++)
            fprintf(f, " %.9g", (double)ys->data[(size_t)s * N + i]);
        fputc('\n', f);
    }
}

static void write_gp(FILE *f, const char *name, int S, const char *xlabel, const char *ylabel,
                     const char *const *titles, bool log_y)
{
    fprintf(f, "# %s.gp - draws %s.dat into %s.png:\n#     gnuplot path/to/%s.gp\n", name,
            name, name, name);
    fputs("# The data and the picture sit next to this script, found through ARG0.\n"
          "here = ARG0\n"
          "while (strlen(here) > 0 && here[strlen(here):strlen(here)] ne '/') {\n"
          "    here = here[1:strlen(here) - 1]\n"
          "}\n"
          "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
          "    set terminal pngcairo size 640,400 noenhanced font 'sans,9'\n"
          "} else {\n"
          "    set terminal png size 640,400 noenhanced\n"
          "}\n", f);
    fprintf(f, "set output here.'%s.png'\n", name);
    fputs("set xlabel ", f);
    gp_string(f, xlabel ? xlabel : "");
    fputs("\nset ylabel ", f);
    gp_string(f, ylabel ? ylabel : "");
    fputs("\nset grid\n", f);
    if (log_y)
        fputs("set logscale y\n", f);
    fputs(titles ? "set key top right\n" : "unset key\n", f);
    fputs("plot ", f);
    for (int s = 0; s < S; s++) {
        fprintf(f, "%shere.'%s.dat' using 1:%d with linespoints pointsize 0.5 ",
                s ? ", \\\n     " : "", name, s + 2);
        if (titles) {
            fputs("title ", f);
            gp_string(f, titles[s]);
        } else {
            fputs("notitle", f);
        }
    }
    fputc('\n', f);
}

/* One file under a temporary name: written by fill, then renamed over
 * DIR/NAME.EXT only by commit. */
typedef struct {
    char final_path[1024], temp_path[1040];
    FILE *f;
} Pending;

static int pending_open(Pending *p, const char *dir, const char *name, const char *ext)
{
    snprintf(p->final_path, sizeof p->final_path, "%s/%s%s", dir, name, ext);
    snprintf(p->temp_path, sizeof p->temp_path, "%s.tmpXXXXXX", p->final_path);
    int fd = mkstemp(p->temp_path);
    if (fd < 0)
        return curve_fail("cannot create '%s': %s", p->final_path, strerror(errno));
    fchmod(fd, 0644);   /* mkstemp makes the file private (0600) */
    p->f = fdopen(fd, "w");
    if (p->f == NULL) {
        close(fd);
        unlink(p->temp_path);
        return curve_fail("cannot write '%s': %s", p->final_path, strerror(errno));
    }
    return 0;
}

static int pending_close(Pending *p)
{
    const bool failed = ferror(p->f) != 0;
    const bool close_failed = fclose(p->f) != 0;
    p->f = NULL;
    if (failed || close_failed) {
        unlink(p->temp_path);
        return curve_fail("cannot write '%s'", p->final_path);
    }
    return 0;
}

int plot_curves(const char *dir, const char *name, const Tensor *xs, const Tensor *ys,
                const char *xlabel, const char *ylabel, const char *const *curve_titles,
                bool log_y)
{
    // pass 1: check everything before a file is touched
    if (dir == NULL || *dir == '\0')
        return curve_fail("no output directory given");
    if (name == NULL || *name == '\0' || strchr(name, '/') != NULL || strlen(name) > 200)
        return curve_fail("'%s' is not a plain file name (no '/', at most 200 characters)",
                          name ? name : "(null)");
    if (xs == NULL || ys == NULL || xs->ndim != 1 || ys->ndim > 2 ||
        ys->shape[ys->ndim - 1] != xs->shape[0])
        return curve_fail("%s: ys must be (N,) or (S, N) for xs (N,)", name);
    const int S = ys->ndim == 2 ? ys->shape[0] : 1;
    for (size_t i = 0; i < ys->size; i++)
        if (!isfinite(ys->data[i]) || (log_y && ys->data[i] <= 0.0f))
            return curve_fail("%s: point %zu is %g, which a%s axis cannot show; nothing was "
                              "written", name, i, (double)ys->data[i], log_y ? " log" : "n");
    struct stat st;
    if (stat(dir, &st) != 0)
        return curve_fail("cannot write into '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return curve_fail("cannot write into '%s': not a directory", dir);

    // pass 2: both files under temporary names
    Pending dat, gp;
    if (pending_open(&dat, dir, name, ".dat") != 0)
        return -1;
    if (pending_open(&gp, dir, name, ".gp") != 0) {
        fclose(dat.f);
        unlink(dat.temp_path);
        return -1;
    }
    write_dat(dat.f, name, xs, ys, S, curve_titles);
    write_gp(gp.f, name, S, xlabel, ylabel, curve_titles, log_y);
    const int dat_status = pending_close(&dat);
    const int gp_status = pending_close(&gp);
    if (dat_status != 0 || gp_status != 0) {
        unlink(dat.temp_path);
        unlink(gp.temp_path);
        return -1;
    }

    // pass 3: rename both into place; the script last, since it needs the data
    if (rename(dat.temp_path, dat.final_path) != 0) {
        unlink(dat.temp_path);
        unlink(gp.temp_path);
        return curve_fail("cannot rename '%s' into place: %s", dat.final_path, strerror(errno));
    }
    if (rename(gp.temp_path, gp.final_path) != 0) {
        unlink(gp.temp_path);
        unlink(dat.final_path);   /* a .dat without its script is no use */
        return curve_fail("cannot rename '%s' into place: %s", gp.final_path, strerror(errno));
    }
    return 0;
}
