/*
 * plot.c - attention heatmaps (introduced in chapter 02). See plot.h.
 *
 * Legend: P = number of panels, R x C = the grid of panels, T = rows of one
 * matrix (queries), K = its columns (keys).
 *
 * plot_heatmaps writes two files side by side:
 *
 *   NAME.dat  every matrix as T lines of K numbers, in gnuplot's "matrix"
 *             layout; panels are separated by two blank lines, which is how
 *             gnuplot's "index N" picks one block out of a file.
 *   NAME.gp   a script that draws each block as coloured cells, puts the panels in
 *             a grid and writes NAME.png. It finds NAME.dat next to itself
 *             (through ARG0, the name gnuplot was given), so
 *             `gnuplot plots/NAME.gp` works from any directory. Cells that
 *             are exactly 0 (masked) are drawn grey, in a layer of their
 *             own, and a line above the panels says so.
 *
 * plot_curves writes the same pair for line plots: NAME.dat as columns
 * "x y_0 y_1 ...", NAME.gp drawing one line per curve.
 *
 * heatmap_terminal draws a small matrix with shade characters instead.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/plot.h"

#include "error.h"
#include "io/fileset.h"
#include "memory.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors and files --------------------------------------------------- */

/* The checks every plot makes before a file is touched: 0, or fail's status
 * after the line. */
static int check_target(const char *dir, const char *name)
{
    if (dir == NULL || *dir == '\0')
        return fail("plot %s: no output directory given", name ? name : "(null)");
    if (name == NULL || *name == '\0' || strchr(name, '/') != NULL || strlen(name) > 200)
        return fail("plot '%s': not a plain file name (no '/', at most 200 characters)",
                    name ? name : "(null)");
    return 0;
}

/* Draws NAME.dat into dat and NAME.gp into gp, from what. */
typedef void (*DrawFiles)(FILE *dat, FILE *gp, const char *name, const void *what);

/* Both files drawn into memory, then written into dir as one set
 * (fileset.h), so a failure or a kill leaves the previous pair or the new
 * one: 0, or fail's status after one line, "[prog: ]plot NAME: DIR/NAME.dat:
 * cannot write: REASON". */
static int write_files(const char *dir, const char *name, DrawFiles draw, const void *what)
{
    char *text[2] = {NULL, NULL}, *file[2];
    size_t len[2] = {0, 0};
    FILE *dat = open_memstream(&text[0], &len[0]), *gp = open_memstream(&text[1], &len[1]);
    bool drawn = dat != NULL && gp != NULL;
    if (drawn)
        draw(dat, gp, name, what);
    drawn = (dat == NULL || fclose(dat) == 0) && drawn;
    drawn = (gp == NULL || fclose(gp) == 0) && drawn;
    char err[512];
    int status = drawn ? 0 : error_format(err, sizeof err, name, "out of memory drawing it");
    FileSet *set = status == 0 ? fileset_begin(dir, err, sizeof err) : NULL;
    status = set == NULL ? -1 : 0;
    for (int i = 0; i < 2; i++) {
        const size_t file_len = strlen(name) + 5;
        file[i] = checked_malloc(file_len, 1);
        snprintf(file[i], file_len, "%s%s", name, i == 0 ? ".dat" : ".gp");
        if (status == 0)
            status = fileset_write(set, file[i], text[i], len[i], err, sizeof err);
    }
    if (set != NULL)
        status = fileset_end(set, status, err, sizeof err);
    for (int i = 0; i < 2; i++) {
        free(file[i]);
        free(text[i]);
    }
    return status == 0 ? 0 : fail("plot %s: %s", name, err);
}

/* ---- the panel grid ------------------------------------------------------ */

typedef struct {
    int rows, cols;           /* R x C panels */
    int num_rows, num_cols;   /* T x K cells in each panel */
    const char *const *ticks; /* NULL, or a label per row and column (T == K) */
} Grid;

/* (T, K) -> 1 x 1, (P, T, K) -> 1 x P, (R, C, T, K) -> R x C. */
static Grid grid_of(const Tensor *m)
{
    Grid g = {1, 1, m->shape[m->ndim - 2], m->shape[m->ndim - 1], NULL};
    if (m->ndim == 3)
        g.cols = m->shape[0];
    if (m->ndim == 4) {
        g.rows = m->shape[0];
        g.cols = m->shape[1];
    }
    return g;
}

/* ---- NAME.dat ------------------------------------------------------------ */

static void write_dat(FILE *f, const char *name, const Tensor *m, const Grid *g,
                      const char *const *panel_titles)
{
    const int T = g->num_rows, K = g->num_cols;
    fprintf(f, "# %s: %d x %d panels, each %d rows x %d columns\n",
            name, g->rows, g->cols, T, K);
    for (int p = 0; p < g->rows * g->cols; p++) {
        const float *panel = m->data + (size_t)p * T * K;
        if (p > 0)
            fputs("\n\n", f);   /* two blank lines end a gnuplot data block */
        fprintf(f, "# panel %d (row %d, column %d)", p, p / g->cols, p % g->cols);
        if (panel_titles)
            fprintf(f, ": %s", panel_titles[p]);
        fputc('\n', f);
        for (int t = 0; t < T; t++) {
            const float *row = panel + (size_t)t * K;
            for (int k = 0; k < K; k++)
                fprintf(f, "%s%.6g", k ? " " : "", (double)row[k]);
            fputc('\n', f);
        }
    }
}

/* ---- NAME.gp ------------------------------------------------------------- */

/* A gnuplot string in single quotes: nothing inside is special except the
 * quote itself, written twice. A newline would end the command, so it
 * becomes a space. */
static void gp_string(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("''", f);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* A tick step from 1, 2, 5, 10, 20, 50, ... giving at most 10 ticks. */
static long tick_step(long n)
{
    static const long mantissas[3] = {1, 2, 5};
    for (long scale = 1;; scale *= 10)
        for (int i = 0; i < 3; i++)
            if (n <= 10 * mantissas[i] * scale)
                return mantissas[i] * scale;
}

/* Pixel sizes of the picture; every panel sits at a fixed place, so the
 * panels line up and a single colour bar on the right serves them all. */
enum {
    LEFT_PX = 62,      /* y tics and the y label of each panel */
    RIGHT_PX = 18,     /* gap after each panel */
    TITLE_PX = 26,     /* panel title, when there are titles */
    BOTTOM_PX = 48,    /* x tics and the x label */
    TOP_PX = 10,
    COLORBAR_PX = 80,  /* the colour bar and its tics, right of the grid */
    HEADER_LINE_PX = 18, /* one line of the picture's title (title, grey key) */
    CHAR_PX = 7,       /* a generous width of one character at 9 points */
};

/* Masked cells are drawn in this grey: outside the white-to-red palette,
 * so no weight, however small, can be taken for one. */
static const char MASKED_GREY[] = "#a8a8a8";
const char HEATMAP_MASKED_NOTE[] = "grey: exactly 0 (masked)";

/* Where everything sits, in pixels. */
typedef struct {
    int cell_w, cell_h;      /* one cell */
    int panel_w, panel_h;    /* T x K cells */
    int title_px;            /* above each panel, when panels have titles */
    int header_px;           /* above the grid: the title and the grey key */
    int slot_w, slot_h;      /* a panel with its margins */
    int width, height;       /* the whole picture */
} Layout;

static Layout layout_of(const Grid *g, bool panel_titles, const char *title, bool any_zero)
{
    Layout l;
    const int T = g->num_rows, K = g->num_cols;
    const int longest = T > K ? T : K;
    /* square cells, about 240 pixels for the longer side of a panel; a
     * thin matrix (one query, ten keys) gets taller cells, so that its
     * panel, and the colour bar beside it, stay at least 80 pixels high */
    int cell = 240 / longest;   /* a tensor has no empty dimension */
    cell = cell < 4 ? 4 : cell > 40 ? 40 : cell;
    if (g->ticks != NULL && cell < 11)
        cell = 11;   /* room for a label on every cell */
    l.cell_w = K * cell < 80 ? (80 + K - 1) / K : cell;
    l.cell_h = T * cell < 80 ? (80 + T - 1) / T : cell;
    l.panel_w = K * l.cell_w;
    l.panel_h = T * l.cell_h;
    l.title_px = panel_titles ? TITLE_PX : 0;
    const int header_lines = (title != NULL) + any_zero;
    l.header_px = header_lines ? TOP_PX + header_lines * HEADER_LINE_PX : 0;
    l.slot_w = LEFT_PX + l.panel_w + RIGHT_PX;
    l.slot_h = TOP_PX + l.title_px + l.panel_h + BOTTOM_PX;
    l.width = g->cols * l.slot_w + COLORBAR_PX;
    l.height = l.header_px + g->rows * l.slot_h;
    /* a title longer than the grid is wide widens the picture */
    const int title_w = LEFT_PX + CHAR_PX * (int)(title ? strlen(title) : 0) + RIGHT_PX;
    l.width = title_w > l.width ? title_w : l.width;
    return l;
}

/* The start of every script: what it draws, how it finds its data (next
 * to itself, through ARG0, the script's own path, so it runs from any
 * directory), the terminal at width x height, and the output file. */
static void write_gp_start(FILE *f, const char *name, const char *what, int width, int height)
{
    fprintf(f, "# %s.gp - draws %s.dat%s into %s.png:\n", name, name, what, name);
    fprintf(f, "#     gnuplot path/to/%s.gp\n", name);
    fputs("# The data and the picture sit next to this script, found through ARG0\n"
          "# (the script's own path), so it runs from any directory.\n", f);
    fputs("here = ARG0\n"
          "while (strlen(here) > 0 && here[strlen(here):strlen(here)] ne '/') {\n"
          "    here = here[1:strlen(here) - 1]\n"
          "}\n", f);
    fputs("if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n", f);
    fprintf(f, "    set terminal pngcairo size %d,%d noenhanced font 'sans,9'\n", width, height);
    fputs("} else {\n", f);
    fprintf(f, "    set terminal png size %d,%d noenhanced\n", width, height);
    fputs("}\n", f);
    char png[512];
    snprintf(png, sizeof png, "%s.png", name);
    fputs("set output here.", f);
    gp_string(f, png);
    fputc('\n', f);
}

/* Terminal, output file next to the script, palette and axes. */
static void write_gp_setup(FILE *f, const char *name, const Grid *g, const Layout *l)
{
    const int T = g->num_rows, K = g->num_cols;
    write_gp_start(f, name, " as heatmaps", l->width, l->height);
    /* matplotlib's "Reds", which d2l's show_heatmaps uses: white is 0 */
    fputs("set palette defined (0 '#fff5f0', 0.25 '#fcbba1', 0.5 '#fb6a4a', "
          "0.75 '#cb181d', 1 '#67000d')\n", f);
    fputs("set cbrange [0:1]\n", f);
    /* each cell is a filled box of half-width 0.5 around its (k, t): gnuplot's
     * "with image" would be shorter but draws nothing for a single row */
    fputs("set style fill solid noborder\n", f);
    /* cell (t, k) covers k-0.5..k+0.5 across and t-0.5..t+0.5 down.
     * The y range runs from T-0.5 down to -0.5 so that row 0 is at the top. */
    fprintf(f, "set xrange [-0.5:%d.5]\n", K - 1);
    fprintf(f, "set yrange [%d.5:-0.5]\n", T - 1);
    if (g->ticks != NULL) {
        // a label on every row and column, the same on both axes
        for (int axis = 0; axis < 2; axis++) {
            fputs(axis == 0 ? "set xtics (" : "set ytics (", f);
            for (int k = 0; k < K; k++) {
                fputs(k ? ", " : "", f);
                gp_string(f, g->ticks[k]);
                fprintf(f, " %d", k);
            }
            fputs(") out nomirror font ',7'\n", f);
        }
    } else {
        fprintf(f, "set xtics 0, %ld out nomirror\n", tick_step(K));
        fprintf(f, "set ytics 0, %ld out nomirror\n", tick_step(T));
    }
    fputs("set cbtics 0.2\n", f);
    fputs("set tics scale 0.5\n", f);
}

/* The picture's title line and, when a cell is exactly 0, a grey square
 * with HEATMAP_MASKED_NOTE beside it. They are labels and an object, which
 * every panel would draw again: write_gp unsets them after the first. */
static void write_gp_header(FILE *f, const char *title, bool any_zero, const Layout *l)
{
    const double x = (double)LEFT_PX / l->width;
    double y_px = TOP_PX + HEADER_LINE_PX / 2.0;   /* middle of the first line */
    if (title) {
        fputs("set label 1 ", f);
        gp_string(f, title);
        fprintf(f, " at screen %.5f, screen %.5f left font ',10'\n", x, 1.0 - y_px / l->height);
        y_px += HEADER_LINE_PX;
    }
    if (any_zero) {
        const double half = 5.0;   /* the key square is 10 x 10 pixels */
        fprintf(f, "set object 1 rectangle from screen %.5f, screen %.5f to screen %.5f, "
                "screen %.5f fillcolor rgb '%s' fillstyle solid noborder\n",
                x, 1.0 - (y_px + half) / l->height, (LEFT_PX + 2 * half) / l->width,
                1.0 - (y_px - half) / l->height, MASKED_GREY);
        fputs("set label 2 ", f);
        gp_string(f, HEATMAP_MASKED_NOTE);
        fprintf(f, " at screen %.5f, screen %.5f left\n",
                (LEFT_PX + 2 * half + 6) / l->width, 1.0 - y_px / l->height);
    }
}

/* Does panel p hold an exact 0, a value other than 0? */
static void panel_has(const Tensor *m, const Grid *g, int p, bool *zero, bool *nonzero)
{
    const size_t cells = (size_t)g->num_rows * g->num_cols;
    const float *panel = m->data + (size_t)p * cells;
    *zero = *nonzero = false;
    for (size_t i = 0; i < cells; i++) {
        if (panel[i] == 0.0f)
            *zero = true;
        else
            *nonzero = true;
    }
}

/* Panel p's plot command: two layers over the same cells. The palette
 * layer skips exact zeros and the grey layer draws only them: gnuplot
 * leaves out a cell whose x is NaN (a NaN colour would still be drawn, in
 * white). gnuplot warns about a layer without a single cell, so a layer is
 * left out when its panel has nothing for it (a panel has at least one
 * cell, so one layer is always there). */
static void write_gp_plot(FILE *f, const char *name, int p, bool zero, bool nonzero)
{
    char dat[512];
    snprintf(dat, sizeof dat, "%s.dat", name);
    fputs("plot ", f);
    if (nonzero) {
        fputs("here.", f);
        gp_string(f, dat);
        fprintf(f, " index %d matrix using ($3 == 0 ? NaN : $1):2:(0.5):(0.5):3 "
                "with boxxyerror fillcolor palette notitle", p);
    }
    if (zero) {
        fputs(nonzero ? ", \\\n     here." : "here.", f);
        gp_string(f, dat);
        fprintf(f, " index %d matrix using ($3 == 0 ? $1 : NaN):2:(0.5):(0.5) "
                "with boxxyerror fillcolor rgb '%s' notitle", p, MASKED_GREY);
    }
    fputc('\n', f);
}

/* Margins, labels and colour bar of panel p at row r, column c, then its
 * plot; the header's labels go after the first panel has drawn them. */
static void write_gp_panel(FILE *f, const char *name, const Tensor *m, const Grid *g,
                           const Layout *l, int r, int c, const char *xlabel,
                           const char *ylabel, const char *const *panel_titles)
{
    const int p = r * g->cols + c;
    /* where the panel sits, in pixels from the top-left corner */
    const int left = c * l->slot_w + LEFT_PX;
    const int top = l->header_px + r * l->slot_h + TOP_PX + l->title_px;
    fprintf(f, "\n# panel %d: row %d, column %d\n", p, r, c);
    fprintf(f, "set lmargin at screen %.5f\n", (double)left / l->width);
    fprintf(f, "set rmargin at screen %.5f\n", (double)(left + l->panel_w) / l->width);
    fprintf(f, "set tmargin at screen %.5f\n", 1.0 - (double)top / l->height);
    fprintf(f, "set bmargin at screen %.5f\n", 1.0 - (double)(top + l->panel_h) / l->height);
    /* like d2l's sharex/sharey: labels on the outer panels only */
    fputs("set xlabel ", f);
    gp_string(f, r == g->rows - 1 && xlabel ? xlabel : "");
    fputs("\nset ylabel ", f);
    gp_string(f, c == 0 && ylabel ? ylabel : "");
    fputs("\nset title ", f);
    gp_string(f, panel_titles ? panel_titles[p] : "");
    fputc('\n', f);
    if (p == g->rows * g->cols - 1) {
        const int grid_top = l->header_px + TOP_PX + l->title_px;
        fprintf(f, "set colorbox user origin screen %.5f, screen %.5f "
                "size screen %.5f, screen %.5f\n",
                (double)(g->cols * l->slot_w + 10) / l->width,
                1.0 - (double)(top + l->panel_h) / l->height, 12.0 / l->width,
                (double)(top + l->panel_h - grid_top) / l->height);
    } else {
        fputs("unset colorbox\n", f);
    }
    bool zero, nonzero;
    panel_has(m, g, p, &zero, &nonzero);
    write_gp_plot(f, name, p, zero, nonzero);
    if (p == 0 && l->header_px > 0)
        fputs("unset label\nunset object\n", f);
}

static void write_gp(FILE *f, const char *name, const char *title, const Tensor *m,
                     const Grid *g, const char *xlabel, const char *ylabel,
                     const char *const *panel_titles)
{
    bool any_zero = false;
    for (size_t i = 0; i < m->size && !any_zero; i++)
        any_zero = m->data[i] == 0.0f;
    const Layout l = layout_of(g, panel_titles != NULL, title, any_zero);
    write_gp_setup(f, name, g, &l);
    write_gp_header(f, title, any_zero, &l);
    fputs("set multiplot\n", f);
    for (int r = 0; r < g->rows; r++)
        for (int c = 0; c < g->cols; c++)
            write_gp_panel(f, name, m, g, &l, r, c, xlabel, ylabel, panel_titles);
    fputs("\nunset multiplot\n", f);
}

/* ---- plot_heatmaps ------------------------------------------------------- */

/* What plot_heatmaps_titled draws. */
typedef struct {
    const Tensor *matrices;
    const Grid *grid;
    const char *title, *xlabel, *ylabel;
    const char *const *panel_titles;
} Heatmaps;

static void draw_heatmaps(FILE *dat, FILE *gp, const char *name, const void *what)
{
    const Heatmaps *h = what;
    write_dat(dat, name, h->matrices, h->grid, h->panel_titles);
    write_gp(gp, name, h->title, h->matrices, h->grid, h->xlabel, h->ylabel, h->panel_titles);
}

/* The heatmaps of plot_heatmaps, plot_heatmaps_titled and
 * plot_heatmaps_ticked; a failure's line starts "plot NAME: " */
static int heatmaps(const char *dir, const char *name, const char *title, const Tensor *matrices,
                    const char *xlabel, const char *ylabel, const char *const *panel_titles,
                    const char *const *ticks)
{
    char buf[80];
    // pass 1: check everything before a file is touched
    int status = check_target(dir, name);
    if (status != 0)
        return status;
    if (matrices == NULL || matrices->ndim < 2 || matrices->ndim > 4)
        return fail("plot %s: matrices must be (T, K), (P, T, K) or (R, C, T, K), got %s", name,
                    matrices ? shape_str(buf, sizeof buf, matrices->ndim, matrices->shape)
                             : "NULL");
    for (size_t i = 0; i < matrices->size; i++)
        if (!isfinite(matrices->data[i]))
            return fail("plot %s: element %zu of the matrices is %g; nothing was written",
                        name, i, (double)matrices->data[i]);
    Grid g = grid_of(matrices);
    if (ticks != NULL && g.num_rows != g.num_cols)
        return fail("plot %s: labels on both axes need square matrices, got %d x %d", name,
                    g.num_rows, g.num_cols);
    g.ticks = ticks;

    // pass 2: both files drawn in memory, then written as one set
    const Heatmaps h = {matrices, &g, title, xlabel, ylabel, panel_titles};
    return write_files(dir, name, draw_heatmaps, &h);
}

int plot_heatmaps(const char *dir, const char *name, const Tensor *matrices,
                  const char *xlabel, const char *ylabel,
                  const char *const *panel_titles)
{
    return heatmaps(dir, name, NULL, matrices, xlabel, ylabel, panel_titles, NULL);
}

int plot_heatmaps_titled(const char *dir, const char *name, const char *title,
                         const Tensor *matrices, const char *xlabel, const char *ylabel,
                         const char *const *panel_titles)
{
    return heatmaps(dir, name, title, matrices, xlabel, ylabel, panel_titles, NULL);
}

int plot_heatmaps_ticked(const char *dir, const char *name, const char *title,
                         const Tensor *matrices, const char *xlabel, const char *ylabel,
                         const char *const *panel_titles, const char *const *ticks)
{
    return heatmaps(dir, name, title, matrices, xlabel, ylabel, panel_titles, ticks);
}

/* ---- plot_curves ----------------------------------------------------------
 * Legend: N = points per curve, S = curves. */

typedef struct {
    const Tensor *xs, *ys;   /* (N,), (S, N) */
    int S;
    const char *xlabel, *ylabel;
    const char *const *titles;
    bool log_y;
} Curves;

static void write_curves_dat(FILE *f, const char *name, const Curves *c)
{
    const int N = c->xs->shape[0];
    fprintf(f, "# %s: %d points of %d curve%s; columns: x", name, N, c->S, c->S == 1 ? "" : "s");
    for (int s = 0; s < c->S; s++)
        fprintf(f, ", %s", c->titles ? c->titles[s] : "y");
    fputc('\n', f);
    for (int i = 0; i < N; i++) {
        fprintf(f, "%.9g", (double)c->xs->data[i]);
        for (int s = 0; s < c->S; s++)
            fprintf(f, " %.9g", (double)c->ys->data[(size_t)s * N + i]);
        fputc('\n', f);
    }
}

static void write_curves_gp(FILE *f, const char *name, const Curves *c)
{
    write_gp_start(f, name, "", 640, 400);
    fputs("set xlabel ", f);
    gp_string(f, c->xlabel ? c->xlabel : "");
    fputs("\nset ylabel ", f);
    gp_string(f, c->ylabel ? c->ylabel : "");
    fputs("\nset grid\n", f);
    /* a little room above and below, so that a curve at 0% or 100% is not
     * drawn on the frame; a log axis keeps its decades */
    fputs(c->log_y ? "set logscale y\n"
                   : "set autoscale yfix\nset offsets 0, 0, graph 0.04, graph 0.04\n", f);
    /* below the plot, outside it: a key inside would cover a curve somewhere */
    fputs(c->titles ? "set key below\n" : "unset key\n", f);
    fputs("plot ", f);
    for (int s = 0; s < c->S; s++) {
        fprintf(f, "%shere.'%s.dat' using 1:%d with linespoints pointsize 0.5 ",
                s ? ", \\\n     " : "", name, s + 2);
        fputs(c->titles ? "title " : "notitle", f);
        if (c->titles)
            gp_string(f, c->titles[s]);
    }
    fputc('\n', f);
}

static void draw_curves(FILE *dat, FILE *gp, const char *name, const void *what)
{
    write_curves_dat(dat, name, what);
    write_curves_gp(gp, name, what);
}

int plot_curves(const char *dir, const char *name, const Tensor *xs, const Tensor *ys,
                const char *xlabel, const char *ylabel, const char *const *curve_titles,
                bool log_y)
{
    // pass 1: check everything before a file is touched
    int status = check_target(dir, name);
    if (status != 0)
        return status;
    if (xs == NULL || ys == NULL || xs->ndim != 1 || ys->ndim > 2 ||
        ys->shape[ys->ndim - 1] != xs->shape[0])
        return fail("plot %s: ys must be (N,) or (S, N) for xs (N,)", name);
    for (size_t i = 0; i < ys->size; i++)
        if (!isfinite(ys->data[i]) || (log_y && ys->data[i] <= 0.0f))
            return fail("plot %s: point %zu is %g, which a%s axis cannot show; nothing was "
                        "written", name, i, (double)ys->data[i], log_y ? " log" : "n");

    // pass 2: both files drawn in memory, then written as one set
    const Curves c = {xs, ys, ys->ndim == 2 ? ys->shape[0] : 1, xlabel, ylabel, curve_titles,
                      log_y};
    return write_files(dir, name, draw_curves, &c);
}

/* ---- plot_bars ------------------------------------------------------------
 * Legend: N = bars. */

typedef struct {
    const char *const *labels;
    const double *values;
    int n;
    const char *ylabel;
} Bars;

static void draw_bars(FILE *dat, FILE *gp, const char *name, const void *what)
{
    const Bars *b = what;
    fprintf(dat, "# %s: %d bars; columns: index, value, label\n", name, b->n);
    for (int i = 0; i < b->n; i++) {
        /* a data file quotes a column with double quotes, and has no escape
         * for one inside: a label's double quote becomes a single one */
        fprintf(dat, "%d %.9g \"", i, b->values[i]);
        for (const char *c = b->labels[i]; *c != '\0'; c++)
            fputc(*c == '"' ? '\'' : *c == '\n' ? ' ' : *c, dat);
        fputs("\"\n", dat);
    }
    write_gp_start(gp, name, " as bars", 160 + 130 * b->n, 460);
    fputs("set ylabel ", gp);
    gp_string(gp, b->ylabel ? b->ylabel : "");
    fputs("\nset grid ytics\nunset key\nset style fill solid 0.6 border -1\n"
          "set boxwidth 0.7\nset yrange [0:*]\nset offsets 0.5, 0.5, graph 0.1, 0\n"
          "set xtics rotate by -20 nomirror\nset bmargin 7\n", gp);
    fputs("plot here.", gp);
    char dat_name[512];
    snprintf(dat_name, sizeof dat_name, "%s.dat", name);
    gp_string(gp, dat_name);
    fputs(" using 1:2:xticlabels(3) with boxes lc rgb '#cb181d', \\\n     here.", gp);
    gp_string(gp, dat_name);
    fputs(" using 1:2:(sprintf('%.3f', $2)) with labels offset 0, 0.8 notitle\n", gp);
}

int plot_bars(const char *dir, const char *name, const char *const *labels,
              const double *values, int n, const char *ylabel)
{
    int status = check_target(dir, name);
    if (status != 0)
        return status;
    if (n < 1)
        return fail("plot %s: no bar to draw", name);
    for (int i = 0; i < n; i++)
        if (!isfinite(values[i]) || values[i] < 0.0)
            return fail("plot %s: bar %d is %g, which a bar from 0 cannot show; nothing was "
                        "written", name, i, values[i]);
    const Bars b = {labels, values, n, ylabel};
    return write_files(dir, name, draw_bars, &b);
}

void bars_terminal(FILE *out, const char *const *labels, const double *values, int n,
                   int width)
{
    double largest = 0.0;
    int label_w = 0;
    for (int i = 0; i < n; i++) {
        largest = values[i] > largest ? values[i] : largest;
        label_w = (int)strlen(labels[i]) > label_w ? (int)strlen(labels[i]) : label_w;
    }
    for (int i = 0; i < n; i++) {
        /* the bar in whole characters, rounded: a value of 0 draws none */
        const int len = largest > 0.0 ? (int)lround(values[i] / largest * width) : 0;
        fprintf(out, "  %-*s  ", label_w, labels[i]);
        for (int j = 0; j < len; j++)
            fputs("\u2588", out);
        fprintf(out, "%*s %.3f\n", width - len, "", values[i]);
    }
}

/* ---- heatmap_terminal ---------------------------------------------------- */

/* An exact 0 is " ·", a dot under its column number, and every weight
 * above 0 gets at least the lightest shade, so a masked weight is never
 * mistaken for a small one: (0, 1/4] is light, (3/4, 1] and above is full.
 * Each shade is drawn twice so that a cell is about square. Below 0 ("--")
 * and NaN ("??") should never reach a heatmap of weights. */
static const char MASKED_CELL[] = " ·";
static const char *const SHADES[5] = {NULL, "░░", "▒▒", "▓▓", "██"};
const char HEATMAP_TERMINAL_LEGEND[] =
    "· exactly 0 (masked), ░ above 0 up to 0.25, ▒ up to 0.5, ▓ up to 0.75, █ up to 1";

static const char *shade_of(float v)
{
    if (isnan(v))
        return "??";
    if (v == 0.0f)
        return MASKED_CELL;
    if (v < 0.0f)
        return "--";
    int level = v >= 1.0f ? 4 : (int)ceilf(v * 4.0f);
    return SHADES[level];
}

/* A border of 2 * K box-drawing lines between two corners. */
static void border(FILE *out, int K, const char *left, const char *right)
{
    fprintf(out, "   %s", left);
    for (int k = 0; k < K; k++)
        fputs("──", out);
    fprintf(out, "%s\n", right);
}

/* A weight beside its row, to 2 decimals: four shades cannot tell 0.98
 * from 0.91, the numbers can. An exact 0 is "0", so that it stays apart
 * from a small weight that rounds to "0.00". */
static void put_value(FILE *out, float v)
{
    if (v == 0.0f)
        fprintf(out, " %4s", "0");
    else
        fprintf(out, " %4.2f", (double)v);
}

/* Column labels, two characters wide like the cells below them: one line
 * for the offsets 0 .. 15 of heatmap_terminal (every chapter's drawings),
 * the tens over the units for positions past 9 (heatmap_terminal_at). */
static void column_labels(FILE *out, int first_col, int K, bool positions)
{
    if (!positions || first_col + K - 1 < 10) {
        fputs("    ", out);
        for (int k = 0; k < K; k++)
            fprintf(out, "%2d", first_col + k);
        fputc('\n', out);
        return;
    }
    fputs("    ", out);
    for (int k = 0; k < K; k++) {
        const int label = first_col + k;
        if (label >= 10)
            fprintf(out, "%2d", label / 10 % 10);
        else
            fputs("  ", out);
    }
    fputs("\n    ", out);
    for (int k = 0; k < K; k++)
        fprintf(out, "%2d", (first_col + k) % 10);
    fputc('\n', out);
}

static void draw(FILE *out, const Tensor *matrix, const char *title, bool values, bool positions,
                 int first_row, int first_col)
{
    tensor_check_shape("matrix", matrix, SHAPE(-1, -1));
    const int T = matrix->shape[0], K = matrix->shape[1];
    if (T > HEATMAP_TERMINAL_MAX || K > HEATMAP_TERMINAL_MAX) {
        fprintf(out, "%s%s(a %d x %d matrix is too large to draw here; at most %d x %d)\n",
                title ? title : "", title ? " " : "", T, K,
                HEATMAP_TERMINAL_MAX, HEATMAP_TERMINAL_MAX);
        return;
    }
    if (title)
        fprintf(out, "%s\n", title);
    column_labels(out, first_col, K, positions);
    border(out, K, "┌", "┐");
    for (int t = 0; t < T; t++) {
        fprintf(out, "%2d │", first_row + t);
        for (int k = 0; k < K; k++)
            fputs(shade_of(AT2(matrix, t, k)), out);
        fputs("│", out);
        for (int k = 0; k < K && values && K <= HEATMAP_VALUES_MAX; k++)
            put_value(out, AT2(matrix, t, k));
        fputc('\n', out);
    }
    border(out, K, "└", "┘");
    fprintf(out, "   %s\n", HEATMAP_TERMINAL_LEGEND);
}

void heatmap_terminal(FILE *out, const Tensor *matrix, const char *title)
{
    draw(out, matrix, title, true, false, 0, 0);
}

void heatmap_terminal_at(FILE *out, const Tensor *matrix, const char *title, int first_row,
                         int first_col)
{
    if (first_row < 0 || first_row + matrix->shape[0] > 100 || first_col < 0 ||
        first_col + matrix->shape[1] > 100)
        die("rows from %d and columns from %d: labels must stay in "
            "0 .. 99", first_row, first_col);
    draw(out, matrix, title, true, true, first_row, first_col);
}

void heatmap_terminal_shades(FILE *out, const Tensor *matrix, const char *title)
{
    draw(out, matrix, title, false, false, 0, 0);
}
