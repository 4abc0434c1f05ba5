/*
 * curve.c - line plots (introduced in chapter 05's optional section
 * "Attention that learns"). See curve.h.
 *
 * Legend: N = points per curve, S = curves.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/curve.h"

#include "io/plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    /* a little room above and below, so that a curve at 0% or 100% is not
     * drawn on the frame; a log axis keeps its decades */
    fputs(log_y ? "set logscale y\n"
                : "set autoscale yfix\nset offsets 0, 0, graph 0.04, graph 0.04\n",
          f);
    /* below the plot, outside it: a key inside would cover a curve somewhere */
    fputs(titles ? "set key below\n" : "unset key\n", f);
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

    // pass 2: both files drawn in memory, then written as one set
    PlotFiles files;
    if (plot_files_open(&files) != 0)
        return curve_fail("%s: out of memory drawing it", name);
    write_dat(files.dat, name, xs, ys, S, curve_titles);
    write_gp(files.gp, name, S, xlabel, ylabel, curve_titles, log_y);
    return plot_files_save(&files, "plot_curves", dir, name);
}
