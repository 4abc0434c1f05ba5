/*
 * plot.h - attention heatmaps (introduced in chapter 02).
 *
 * Two ways to see a weight matrix:
 *   - heatmap_terminal draws it with shade characters, two per cell, and
 *     the weights beside each row, so nothing needs to be installed to look
 *     at a small matrix;
 *   - plot_heatmaps writes DIR/NAME.dat and DIR/NAME.gp, a gnuplot script
 *     that renders DIR/NAME.png: queries down, keys across, row 0 at the
 *     top, a colour bar from 0 to 1, one panel per matrix in a grid, as
 *     d2l's show_heatmaps draws them.
 * Both files of a plot are written as one set (fileset.h), so a failure or
 * a kill leaves the previous pair or the new one, never half of one; the
 * script finds its data through its own path, so `gnuplot DIR/NAME.gp`
 * works from any directory. plot_curves draws line plots the same way.
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

#include <stdbool.h>
#include <stdio.h>

#include "tensor.h"

/* matrices: (T, n_k) one panel, (P, T, n_k) a row of P panels, (R, C, T, n_k) an
 * R x C grid. panel_titles: NULL, or one title per panel in row-major order.
 * Returns 0, or 1 (error.h's fail) after one line on stderr naming the file
 * and the problem: a program returns that status. */
int plot_heatmaps(const char *dir, const char *name, const Tensor *matrices,
                  const char *xlabel, const char *ylabel,
                  const char *const *panel_titles);

/* The same with a title over the whole picture (NULL: none). Whenever a
 * matrix holds an exact 0 the picture's title line also says what grey
 * means, titled or not. */
int plot_heatmaps_titled(const char *dir, const char *name, const char *title,
                         const Tensor *matrices, const char *xlabel, const char *ylabel,
                         const char *const *panel_titles);

/* The same with a label on every row and column of a panel (ticks: T
 * labels, the same on both axes, for square (T, T) panels such as a
 * sequence attending to itself: its characters), each cell large enough
 * to carry one. ticks NULL: numbered positions, as plot_heatmaps_titled. */
int plot_heatmaps_ticked(const char *dir, const char *name, const char *title,
                         const Tensor *matrices, const char *xlabel, const char *ylabel,
                         const char *const *panel_titles, const char *const *ticks);

/* Line plots (a loss against training steps, an accuracy against heads
 * kept): xs (N,), ys (N,) for one curve or (S, N) for S curves over the
 * same xs. NAME.dat holds the columns "x y_0 y_1 ...", one line per point;
 * NAME.gp draws one line per curve. curve_titles: NULL (no key) or S
 * titles. log_y draws the y axis on a log scale (every y must then be
 * above 0). Returns 0, or 1 (fail) after one line on stderr. */
int plot_curves(const char *dir, const char *name, const Tensor *xs, const Tensor *ys,
                const char *xlabel, const char *ylabel, const char *const *curve_titles,
                bool log_y);

/* Bars, one per label (a loss per model): NAME.dat holds index, value
 * and the label in double quotes per line, NAME.gp draws the bars from 0, each with its label
 * below and its value above. Every value finite and >= 0. Returns 0, or 1
 * (fail) after one line on stderr. */
int plot_bars(const char *dir, const char *name, const char *const *labels,
              const double *values, int n, const char *ylabel);
/* The same in the terminal: a line per bar, its label, a bar of full
 * blocks (width of them for the largest value) and the value to 3
 * decimals. */
void bars_terminal(FILE *out, const char *const *labels, const double *values, int n,
                   int width);

/* What the picture's title line adds when a cell is exactly 0. */
extern const char HEATMAP_MASKED_NOTE[];

/* matrix (T, n_k) with values expected in [0, 1]; larger matrices than
 * HEATMAP_TERMINAL_MAX in either direction print a one-line note instead.
 * Four shades cannot show every difference (0.98 and 0.91 are both full),
 * so when n_k is at most HEATMAP_VALUES_MAX each row is followed by its
 * weights to 2 decimals (an exact 0 as "0"). The drawing ends with the
 * legend line: three spaces, then HEATMAP_TERMINAL_LEGEND. A cell below 0
 * shows as "--", NaN as "??"; no attention weight is either. */
enum { HEATMAP_TERMINAL_MAX = 16, HEATMAP_VALUES_MAX = 8 };
void heatmap_terminal(FILE *out, const Tensor *matrix, const char *title);
/* The same for a crop of a larger matrix: rows labelled from first_row,
 * columns from first_col (the positions they stand for, 0 to 99), a column
 * label of two digits written as its tens over its units. */
void heatmap_terminal_at(FILE *out, const Tensor *matrix, const char *title, int first_row,
                         int first_col);
/* The shades alone, for panels set side by side (05_multihead/head_grid),
 * where the numbers would not fit. */
void heatmap_terminal_shades(FILE *out, const Tensor *matrix, const char *title);

/* "· exactly 0 (masked), ░ above 0 up to 0.25, ..." without the leading
 * spaces or the newline, for a program that prints the legend once under
 * several drawings. */
extern const char HEATMAP_TERMINAL_LEGEND[];

#endif
