/*
 * plot.h - attention heatmaps (introduced in chapter 03).
 *
 * Two ways to see a weight matrix:
 *   - heatmap_terminal draws it with shade characters, two per cell, so
 *     nothing needs to be installed to look at a small matrix;
 *   - plot_heatmaps writes DIR/NAME.dat and DIR/NAME.gp, a gnuplot script
 *     that renders DIR/NAME.png: queries down, keys across, row 0 at the
 *     top, a colour bar from 0 to 1, one panel per matrix in a grid, as
 *     d2l's show_heatmaps draws them.
 */
#ifndef PLOT_H
#define PLOT_H

#include <stdio.h>

#include "tensor.h"

/* matrices: (T, K) one panel, (P, T, K) a row of P panels, (R, C, T, K) an
 * R x C grid. panel_titles: NULL, or one title per panel in row-major order.
 * Both files are written to temporary names and renamed into place, so a
 * failure leaves nothing half written. Returns 0, or -1 after printing one
 * line on stderr naming the file and the problem. */
int plot_heatmaps(const char *dir, const char *name, const Tensor *matrices,
                  const char *xlabel, const char *ylabel,
                  const char *const *panel_titles);

/* matrix (T, K) with values expected in [0, 1]; larger matrices than
 * HEATMAP_TERMINAL_MAX in either direction print a one-line note instead. */
enum { HEATMAP_TERMINAL_MAX = 16 };
void heatmap_terminal(FILE *out, const Tensor *matrix, const char *title);

#endif
