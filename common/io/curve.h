/*
 * curve.h - line plots: a loss against training steps, an accuracy against
 * heads kept (introduced in chapter 05's optional section "Attention that
 * learns").
 *
 * Legend: N = points per curve, S = curves in one plot.
 *
 * plot_curves writes DIR/NAME.dat and DIR/NAME.gp, as plot_heatmaps does
 * (plot.h): the data as columns "x y_0 y_1 ...", one line per point, and a
 * gnuplot script that draws one line per curve into DIR/NAME.png and finds
 * its data through its own path, so `gnuplot DIR/NAME.gp` works from any
 * directory. Both files are written as one set (plot_files_save), so a
 * failure or a kill leaves nothing half written.
 */
#ifndef CURVE_H
#define CURVE_H

#include <stdbool.h>

#include "tensor.h"

/* xs (N,), ys (N,) for one curve or (S, N) for S curves over the same xs.
 * curve_titles: NULL (no key) or S titles. log_y draws the y axis on a log
 * scale (every y must then be above 0). Returns 0, or -1 after printing one
 * line on stderr naming the file and the problem. */
int plot_curves(const char *dir, const char *name, const Tensor *xs, const Tensor *ys,
                const char *xlabel, const char *ylabel, const char *const *curve_titles,
                bool log_y);

#endif
