/*
 * plot.c - attention heatmaps (introduced in chapter 03). See plot.h.
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
 *             `gnuplot plots/NAME.gp` works from any directory.
 *
 * heatmap_terminal draws a small matrix with shade characters instead.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/plot.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- errors and files --------------------------------------------------- */

/* The single error line every failure prints. */
static int plot_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int plot_fail(const char *fmt, ...)
{
    va_list args;
    fflush(stdout);
    fputs("plot_heatmaps: ", stderr);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    return -1;
}

/* "DIR/NAME.EXT" in a new string; NULL when out of memory. */
static char *join_path(const char *dir, const char *name, const char *ext)
{
    size_t len = strlen(dir) + 1 + strlen(name) + strlen(ext) + 1;
    char *path = malloc(len);
    if (path)
        snprintf(path, len, "%s/%s%s", dir, name, ext);
    return path;
}

/* A file is first written under a temporary name in the same directory and
 * renamed over the final name only when it is complete: rename() within a
 * directory is atomic, so a reader sees the old file or the new one, never
 * half of one. */
typedef struct {
    char *final_path;
    char *temp_path;
    FILE *f;
} PendingFile;

static void pending_free_paths(PendingFile *p)
{
    free(p->final_path);
    free(p->temp_path);
    p->final_path = p->temp_path = NULL;
}

static int pending_open(PendingFile *p, const char *dir, const char *name, const char *ext)
{
    char temp_ext[32];
    snprintf(temp_ext, sizeof temp_ext, "%s.tmpXXXXXX", ext);
    p->f = NULL;
    p->final_path = join_path(dir, name, ext);
    p->temp_path = join_path(dir, name, temp_ext);
    if (p->final_path == NULL || p->temp_path == NULL) {
        pending_free_paths(p);
        return plot_fail("out of memory building the path of %s%s", name, ext);
    }
    int fd = mkstemp(p->temp_path);
    if (fd < 0) {
        plot_fail("cannot create '%s': %s", p->final_path, strerror(errno));
        pending_free_paths(p);
        return -1;
    }
    fchmod(fd, 0644);   /* mkstemp makes the file private (0600) */
    p->f = fdopen(fd, "w");
    if (p->f == NULL) {
        plot_fail("cannot write '%s': %s", p->final_path, strerror(errno));
        close(fd);
        unlink(p->temp_path);
        pending_free_paths(p);
        return -1;
    }
    return 0;
}

/* Close the temporary file; -1 when any write to it failed. */
static int pending_close(PendingFile *p)
{
    bool write_error = ferror(p->f) != 0;
    int saved = errno;
    if (fclose(p->f) != 0 && !write_error) {
        write_error = true;
        saved = errno;
    }
    p->f = NULL;
    if (write_error)
        return plot_fail("cannot write '%s': %s", p->final_path, strerror(saved));
    return 0;
}

/* Throw the temporary file away (after a failure), or just forget the
 * names (after a successful rename, when unlink finds nothing). */
static void pending_discard(PendingFile *p)
{
    if (p->f)
        fclose(p->f);
    p->f = NULL;
    if (p->temp_path)
        unlink(p->temp_path);
    pending_free_paths(p);
}

static int pending_commit(PendingFile *p)
{
    if (rename(p->temp_path, p->final_path) != 0)
        return plot_fail("cannot rename '%s' to '%s': %s", p->temp_path, p->final_path,
                         strerror(errno));
    return 0;
}

/* ---- the panel grid ------------------------------------------------------ */

typedef struct {
    int rows, cols;           /* R x C panels */
    int num_rows, num_cols;   /* T x K cells in each panel */
} Grid;

/* (T, K) -> 1 x 1, (P, T, K) -> 1 x P, (R, C, T, K) -> R x C. */
static Grid grid_of(const Tensor *m)
{
    Grid g = {1, 1, m->shape[m->ndim - 2], m->shape[m->ndim - 1]};
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
};

static void write_gp(FILE *f, const char *name, const Grid *g, const char *xlabel,
                     const char *ylabel, const char *const *panel_titles)
{
    const int T = g->num_rows, K = g->num_cols;
    const int longest = T > K ? T : K;
    /* square cells, about 240 pixels for the longer side of a panel; a
     * thin matrix (one query, ten keys) gets taller cells, so that its
     * panel, and the colour bar beside it, stay at least 80 pixels high */
    int cell = 240 / longest;
    cell = cell < 4 ? 4 : cell > 40 ? 40 : cell;
    const int cell_w = K * cell < 80 ? (80 + K - 1) / K : cell;
    const int cell_h = T * cell < 80 ? (80 + T - 1) / T : cell;
    const int panel_w = K * cell_w, panel_h = T * cell_h;
    const int title_px = panel_titles ? TITLE_PX : 0;
    const int slot_w = LEFT_PX + panel_w + RIGHT_PX;
    const int slot_h = TOP_PX + title_px + panel_h + BOTTOM_PX;
    const int width = g->cols * slot_w + COLORBAR_PX;
    const int height = g->rows * slot_h;

    fprintf(f, "# %s.gp - draws %s.dat as heatmaps into %s.png:\n", name, name, name);
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
    fprintf(f, "set output here.");
    {
        char png[512];
        snprintf(png, sizeof png, "%s.png", name);
        gp_string(f, png);
    }
    fputc('\n', f);
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
    fprintf(f, "set xtics 0, %ld out nomirror\n", tick_step(K));
    fprintf(f, "set ytics 0, %ld out nomirror\n", tick_step(T));
    fputs("set cbtics 0.2\n", f);
    fputs("set tics scale 0.5\n", f);
    fputs("set multiplot\n", f);

    for (int r = 0; r < g->rows; r++) {
        for (int c = 0; c < g->cols; c++) {
            const int p = r * g->cols + c;
            /* where the panel sits, in pixels from the top-left corner */
            const int left = c * slot_w + LEFT_PX;
            const int top = r * slot_h + TOP_PX + title_px;
            fprintf(f, "\n# panel %d: row %d, column %d\n", p, r, c);
            fprintf(f, "set lmargin at screen %.5f\n", (double)left / width);
            fprintf(f, "set rmargin at screen %.5f\n", (double)(left + panel_w) / width);
            fprintf(f, "set tmargin at screen %.5f\n", 1.0 - (double)top / height);
            fprintf(f, "set bmargin at screen %.5f\n", 1.0 - (double)(top + panel_h) / height);
            /* like d2l's sharex/sharey: labels on the outer panels only */
            fputs("set xlabel ", f);
            gp_string(f, r == g->rows - 1 && xlabel ? xlabel : "");
            fputs("\nset ylabel ", f);
            gp_string(f, c == 0 && ylabel ? ylabel : "");
            fputs("\nset title ", f);
            gp_string(f, panel_titles ? panel_titles[p] : "");
            fputc('\n', f);
            if (p == g->rows * g->cols - 1)
                fprintf(f, "set colorbox user origin screen %.5f, screen %.5f "
                        "size screen %.5f, screen %.5f\n",
                        (double)(g->cols * slot_w + 10) / width, 1.0 - (double)(top + panel_h) / height,
                        12.0 / width, (double)(g->rows * slot_h - TOP_PX - title_px - BOTTOM_PX) / height);
            else
                fputs("unset colorbox\n", f);
            {
                char dat[512];
                snprintf(dat, sizeof dat, "%s.dat", name);
                fputs("plot here.", f);
                gp_string(f, dat);
                fprintf(f, " index %d matrix using 1:2:(0.5):(0.5):3 with boxxyerror "
                        "fillcolor palette notitle\n", p);
            }
        }
    }
    fputs("\nunset multiplot\n", f);
}

/* ---- plot_heatmaps ------------------------------------------------------- */

int plot_heatmaps(const char *dir, const char *name, const Tensor *matrices,
                  const char *xlabel, const char *ylabel,
                  const char *const *panel_titles)
{
    char buf[80];
    // pass 1: check everything before a file is touched
    if (dir == NULL || *dir == '\0')
        return plot_fail("no output directory given");
    if (name == NULL || *name == '\0' || strchr(name, '/') != NULL || strlen(name) > 200)
        return plot_fail("'%s' is not a plain file name (no '/', at most 200 characters)",
                         name ? name : "(null)");
    if (matrices == NULL || matrices->ndim < 2 || matrices->ndim > 4)
        return plot_fail("%s: matrices must be (T, K), (P, T, K) or (R, C, T, K), got %s",
                         name, matrices ? shape_str(buf, sizeof buf, matrices->ndim,
                                                    matrices->shape) : "NULL");
    for (size_t i = 0; i < matrices->size; i++)
        if (!isfinite(matrices->data[i]))
            return plot_fail("%s: element %zu of the matrices is %g; nothing was written",
                             name, i, (double)matrices->data[i]);
    struct stat st;
    if (stat(dir, &st) != 0)
        return plot_fail("cannot write into '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return plot_fail("cannot write into '%s': not a directory", dir);
    const Grid g = grid_of(matrices);

    // pass 2: both files under temporary names
    PendingFile dat, gp;
    if (pending_open(&dat, dir, name, ".dat") != 0)
        return -1;
    if (pending_open(&gp, dir, name, ".gp") != 0) {
        pending_discard(&dat);
        return -1;
    }
    write_dat(dat.f, name, matrices, &g, panel_titles);
    write_gp(gp.f, name, &g, xlabel, ylabel, panel_titles);
    if (pending_close(&dat) != 0 || pending_close(&gp) != 0) {
        pending_discard(&dat);
        pending_discard(&gp);
        return -1;
    }

    // pass 3: rename both into place; the script last, since it needs the data
    int status = pending_commit(&dat);
    if (status == 0 && pending_commit(&gp) != 0) {
        unlink(dat.final_path);   /* a .dat without its script is no use */
        status = -1;
    }
    pending_discard(&dat);   /* after a rename these unlink nothing */
    pending_discard(&gp);
    return status;
}

/* ---- heatmap_terminal ---------------------------------------------------- */

/* Blank and four shades, each drawn twice so that a cell is about square.
 * Blank is kept for exactly 0 (and below), so a masked weight stands out
 * from a merely small one: (0, 1/4] is light, (3/4, 1] and above is full.
 * NaN, which should never reach a heatmap, shows as "??". */
static const char *const SHADES[5] = {"  ", "░░", "▒▒", "▓▓", "██"};

static const char *shade_of(float v)
{
    if (isnan(v))
        return "??";
    if (v <= 0.0f)
        return SHADES[0];
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

void heatmap_terminal(FILE *out, const Tensor *matrix, const char *title)
{
    tensor_check_shape("heatmap_terminal", "matrix", matrix, SHAPE(-1, -1));
    const int T = matrix->shape[0], K = matrix->shape[1];
    if (T > HEATMAP_TERMINAL_MAX || K > HEATMAP_TERMINAL_MAX) {
        fprintf(out, "%s%s(a %d x %d matrix is too large to draw here; at most %d x %d)\n",
                title ? title : "", title ? " " : "", T, K,
                HEATMAP_TERMINAL_MAX, HEATMAP_TERMINAL_MAX);
        return;
    }
    if (title)
        fprintf(out, "%s\n", title);
    // column numbers, two characters wide like the cells below them
    fputs("    ", out);
    for (int k = 0; k < K; k++)
        fprintf(out, "%2d", k);
    fputc('\n', out);
    border(out, K, "┌", "┐");
    for (int t = 0; t < T; t++) {
        fprintf(out, "%2d │", t);
        for (int k = 0; k < K; k++)
            fputs(shade_of(AT2(matrix, t, k)), out);
        fputs("│\n", out);
    }
    border(out, K, "└", "┘");
    fputs("   blank 0, ░ up to 0.25, ▒ up to 0.5, ▓ up to 0.75, █ up to 1\n", out);
}
