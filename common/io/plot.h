/*
 * plot.h - attention heatmaps (introduced in chapter 02).
 *
 * Two ways to see a weight matrix:
 *   - heatmap_terminal draws it with shade characters, two per cell, so
 *     nothing needs to be installed to look at a small matrix;
 *   - plot_heatmaps writes DIR/NAME.dat and DIR/NAME.gp, a gnuplot script
 *     that renders DIR/NAME.png: queries down, keys across, row 0 at the
 *     top, a colour bar from 0 to 1, one panel per matrix in a grid, as
 *     d2l's show_heatmaps draws them.
 *
 * A masked weight is exactly 0, and a small weight (1e-6, or 0.01 drawn
 * near white) must not be mistaken for one. Both drawings keep them apart:
 * the terminal draws an exact 0 as " ·" and any weight above 0 with at least
 * the lightest shade; the picture draws exact zeros in grey, outside the
 * colour scale, and says so in its title line. The .dat file keeps the
 * numbers as they are (a masked cell is written "0", a small one as "%g"
 * writes it, never "0"), so it still loads as plain numbers.
 */
#ifndef PLOT_H
#define PLOT_H

#include <stdio.h>

#include "tensor.h"

/* matrices: (T, K) one panel, (P, T, K) a row of P panels, (R, C, T, K) an
 * R x C grid. panel_titles: NULL, or one title per panel in row-major order.
 * Both files are written as one set (plot_files_save below), so a failure
 * leaves nothing half written. Returns 0, or -1 after printing one
 * line on stderr naming the file and the problem. */
int plot_heatmaps(const char *dir, const char *name, const Tensor *matrices,
                  const char *xlabel, const char *ylabel,
                  const char *const *panel_titles);

/* The same with a title over the whole picture (NULL: none). Whenever a
 * matrix holds an exact 0 the picture's title line also says what grey
 * means, titled or not. */
int plot_heatmaps_titled(const char *dir, const char *name, const char *title,
                         const Tensor *matrices, const char *xlabel, const char *ylabel,
                         const char *const *panel_titles);

/* What plot_heatmaps and plot_curves (curve.h) share: NAME.dat and
 * NAME.gp, each drawn into memory through its stream, then written into
 * dir as one set (fileset.h), so a failure or a kill leaves the previous
 * pair or the new one. plot_files_open: 0, or -1 out of memory.
 * plot_files_save closes the streams, writes, frees: 0, or -1 after one
 * line on stderr, "[prog: ]func: DIR/NAME.dat: cannot write: REASON". */
typedef struct {
    FILE *dat, *gp;
    char *dat_text, *gp_text;
    size_t dat_len, gp_len;
} PlotFiles;
int plot_files_open(PlotFiles *files);
int plot_files_save(PlotFiles *files, const char *func, const char *dir, const char *name);

/* What the picture's title line adds when a cell is exactly 0. */
extern const char HEATMAP_MASKED_NOTE[];

/* matrix (T, K) with values expected in [0, 1]; larger matrices than
 * HEATMAP_TERMINAL_MAX in either direction print a one-line note instead.
 * The drawing ends with the legend line: three spaces, then
 * HEATMAP_TERMINAL_LEGEND. A cell below 0 shows as "--", NaN as "??"; no
 * attention weight is either. */
enum { HEATMAP_TERMINAL_MAX = 16 };
void heatmap_terminal(FILE *out, const Tensor *matrix, const char *title);

/* "· exactly 0 (masked), ░ above 0 up to 0.25, ..." without the leading
 * spaces or the newline, for a program that prints the legend once under
 * several drawings. */
extern const char HEATMAP_TERMINAL_LEGEND[];

#endif
