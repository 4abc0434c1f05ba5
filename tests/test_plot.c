/*
 * test_plot.c - heatmaps: the exact .dat text, a .gp script gnuplot runs
 * from another directory, masked cells (exactly 0) drawn apart from small
 * weights in the picture and in the terminal, and failures that leave no
 * file behind.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "io/plot.h"

/* ---- a scratch directory per test --------------------------------------- */

static char scratch[64];

static void make_scratch(void)
{
    scratch_dir_make(scratch, sizeof scratch, "plot_test");
    cr_assert(scratch[0] != '\0', "cannot make a scratch directory");
}

static void remove_scratch(void)
{
    scratch_dir_remove(scratch);
}

/* Names in the scratch directory, sorted and joined with spaces. */
static char *scratch_listing(void)
{
    char *names[64];
    int n = 0;
    DIR *d = opendir(scratch);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 64)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            names[n++] = strdup(e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)   /* insertion sort: a handful of names */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *tmp = names[j];
            names[j] = names[j - 1];
            names[j - 1] = tmp;
        }
    char *out = calloc(1, 64 * 256);
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(out, " ");
        strncat(out, names[i], 200);
        free(names[i]);
    }
    return out;
}

static char *scratch_file(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    return read_text_file(path, NULL);
}

/* ---- capturing stderr ----------------------------------------------------- */

typedef struct {
    int saved_fd;
    char path[32];
} StderrCapture;

static void capture_stderr(StderrCapture *c)
{
    strcpy(c->path, "/tmp/plot_err_XXXXXX");
    int fd = mkstemp(c->path);
    cr_assert_geq(fd, 0);
    fflush(stderr);
    c->saved_fd = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Restore stderr; returns what was written meanwhile (the caller frees). */
static char *captured_stderr(StderrCapture *c)
{
    fflush(stderr);
    dup2(c->saved_fd, 2);
    close(c->saved_fd);
    char *text = read_text_file(c->path, NULL);
    unlink(c->path);
    return text;
}

/* ---- NAME.dat -------------------------------------------------------------- */

Test(plot, dat_text_of_one_matrix, .init = make_scratch, .fini = remove_scratch)
{
    /* queries down, keys across: row t of the file is query t */
    const float weights[] = {0.5f, 0.25f, 0.125f,
                             0.0f, 1.0f, 0.1f};
    Tensor *m = tensor_from(weights, SHAPE(2, 3));
    cr_assert_eq(plot_heatmaps(scratch, "small", m, "Keys", "Queries", NULL), 0);

    char *dat = scratch_file("small.dat");
    cr_assert_not_null(dat);
    cr_expect_str_eq(dat,
                     "# small: 1 x 1 panels, each 2 rows x 3 columns\n"
                     "# panel 0 (row 0, column 0)\n"
                     "0.5 0.25 0.125\n"
                     "0 1 0.1\n");
    char *listing = scratch_listing();
    cr_expect_str_eq(listing, "small.dat small.gp", "no temporary file is left");
    free(listing);
    free(dat);
    tensor_free(m);
}

Test(plot, dat_text_of_a_grid_with_titles, .init = make_scratch, .fini = remove_scratch)
{
    /* (R, C, T, K) = (2, 2, 1, 2): panel p holds p/10 and p/10 + 0.05 */
    const float weights[] = {0.0f, 0.05f, 0.1f, 0.15f, 0.2f, 0.25f, 0.3f, 0.35f};
    const char *const titles[] = {"head 1", "head 2", "head 3", "head 4"};
    Tensor *m = tensor_from(weights, SHAPE(2, 2, 1, 2));
    cr_assert_eq(plot_heatmaps(scratch, "grid", m, "Keys", "Queries", titles), 0);

    char *dat = scratch_file("grid.dat");
    cr_assert_not_null(dat);
    /* two blank lines end a block: gnuplot's "index p" finds panel p */
    cr_expect_str_eq(dat,
                     "# grid: 2 x 2 panels, each 1 rows x 2 columns\n"
                     "# panel 0 (row 0, column 0): head 1\n"
                     "0 0.05\n"
                     "\n\n"
                     "# panel 1 (row 0, column 1): head 2\n"
                     "0.1 0.15\n"
                     "\n\n"
                     "# panel 2 (row 1, column 0): head 3\n"
                     "0.2 0.25\n"
                     "\n\n"
                     "# panel 3 (row 1, column 1): head 4\n"
                     "0.3 0.35\n");

    /* the script plots every block once and draws a single colour bar */
    char *gp = scratch_file("grid.gp");
    cr_assert_not_null(gp);
    int plots = 0, colorbars = 0;
    for (const char *p = strstr(gp, "\nplot here."); p; p = strstr(p + 1, "\nplot here."))
        plots++;
    for (const char *p = strstr(gp, "set colorbox user"); p; p = strstr(p + 1, "set colorbox user"))
        colorbars++;
    cr_expect_eq(plots, 4);
    cr_expect_eq(colorbars, 1);
    cr_expect(strstr(gp, "'grid.dat' index 3 matrix") != NULL, "%s", gp);
    cr_expect(strstr(gp, "set yrange [0.5:-0.5]") != NULL, "row 0 at the top:\n%s", gp);
    cr_expect(strstr(gp, "set cbrange [0:1]") != NULL, "%s", gp);
    cr_expect(strstr(gp, "set title 'head 4'") != NULL, "%s", gp);
    free(gp);
    free(dat);
    tensor_free(m);
}

/* ---- masked cells (exactly 0) against small weights ------------------------ */

Test(plot, dat_keeps_a_masked_zero_apart_from_small_weights, .init = make_scratch,
     .fini = remove_scratch)
{
    /* only the exact 0 is written "0"; %g never rounds a weight above 0
     * to "0", however small (1e-45 is the smallest float above 0) */
    const float weights[] = {0.0f, 1e-6f, 1e-45f, 0.25f};
    Tensor *m = tensor_from(weights, SHAPE(1, 4));
    cr_assert_eq(plot_heatmaps(scratch, "w", m, "keys", "queries", NULL), 0);
    char *dat = scratch_file("w.dat");
    cr_assert_not_null(dat);
    cr_expect_str_eq(dat,
                     "# w: 1 x 1 panels, each 1 rows x 4 columns\n"
                     "# panel 0 (row 0, column 0)\n"
                     "0 1e-06 1.4013e-45 0.25\n");
    free(dat);
    tensor_free(m);
}

Test(plot, gp_draws_exact_zeros_in_a_grey_layer_of_their_own, .init = make_scratch,
     .fini = remove_scratch)
{
    /* (P, T, K) = (3, 1, 2): a masked and a small weight, two small
     * weights, two masked weights */
    const float weights[] = {0.0f, 1e-6f, 0.5f, 0.25f, 0.0f, 0.0f};
    Tensor *m = tensor_from(weights, SHAPE(3, 1, 2));
    cr_assert_eq(plot_heatmaps(scratch, "w", m, "keys", "queries", NULL), 0);
    char *gp = scratch_file("w.gp");
    cr_assert_not_null(gp);

    /* panel 0: the palette layer leaves exact zeros out, the grey layer
     * draws only them */
    cr_expect(strstr(gp,
                     "plot here.'w.dat' index 0 matrix using ($3 == 0 ? NaN : $1):2:(0.5):(0.5):3 "
                     "with boxxyerror fillcolor palette notitle, \\\n"
                     "     here.'w.dat' index 0 matrix using ($3 == 0 ? $1 : NaN):2:(0.5):(0.5) "
                     "with boxxyerror fillcolor rgb '#a8a8a8' notitle\n") != NULL, "%s", gp);
    /* panel 1 has no zero: no grey layer, which gnuplot would warn about */
    cr_expect(strstr(gp,
                     "plot here.'w.dat' index 1 matrix using ($3 == 0 ? NaN : $1):2:(0.5):(0.5):3 "
                     "with boxxyerror fillcolor palette notitle\n") != NULL, "%s", gp);
    /* panel 2 is all masked: the grey layer alone */
    cr_expect(strstr(gp,
                     "plot here.'w.dat' index 2 matrix using ($3 == 0 ? $1 : NaN):2:(0.5):(0.5) "
                     "with boxxyerror fillcolor rgb '#a8a8a8' notitle\n") != NULL, "%s", gp);
    /* the key: a grey square and the note, drawn once, by the first panel */
    cr_expect(strstr(gp, "fillcolor rgb '#a8a8a8' fillstyle solid noborder\n"
                         "set label 2 'grey: exactly 0 (masked)' at screen ") != NULL, "%s", gp);
    cr_expect(strstr(gp, "notitle\nunset label\nunset object\n\n# panel 1") != NULL, "%s", gp);
    cr_expect_str_eq(HEATMAP_MASKED_NOTE, "grey: exactly 0 (masked)");
    free(gp);
    tensor_free(m);
}

Test(plot, gp_without_a_zero_has_no_grey_key_and_no_title, .init = make_scratch,
     .fini = remove_scratch)
{
    const float weights[] = {1e-6f, 0.75f};
    Tensor *m = tensor_from(weights, SHAPE(1, 2));
    cr_assert_eq(plot_heatmaps(scratch, "w", m, "keys", "queries", NULL), 0);
    char *gp = scratch_file("w.gp");
    cr_assert_not_null(gp);
    cr_expect(strstr(gp, "grey") == NULL && strstr(gp, "#a8a8a8") == NULL, "%s", gp);
    cr_expect(strstr(gp, "set label") == NULL && strstr(gp, "set object") == NULL, "%s", gp);
    /* no header line: 10 + 80 + 48 pixels high */
    cr_expect(strstr(gp, "set terminal pngcairo size 240,138 ") != NULL, "%s", gp);
    free(gp);
    tensor_free(m);
}

Test(plot, titled_picture_has_its_title_line_above_the_grey_key, .init = make_scratch,
     .fini = remove_scratch)
{
    const float weights[] = {0.5f, 0.5f, 0.0f};
    Tensor *m = tensor_from(weights, SHAPE(1, 3));
    cr_assert_eq(plot_heatmaps_titled(scratch, "t", "d2l's check", m, "keys", "queries", NULL), 0);
    char *gp = scratch_file("t.gp");
    cr_assert_not_null(gp);
    /* two header lines of 18 pixels under a top margin of 10: the picture
     * is 10 + 36 + 10 + 80 + 48 = 184 high; the title sits in the middle of
     * the first line, 19 pixels down, the key 18 pixels lower */
    cr_expect(strstr(gp, "set terminal pngcairo size 280,184 ") != NULL, "%s", gp);
    cr_expect(strstr(gp, "set label 1 'd2l''s check' at screen 0.22143, screen 0.89674 left font ',10'\n")
              != NULL, "%s", gp);
    cr_expect(strstr(gp, "set label 2 'grey: exactly 0 (masked)' at screen 0.27857, screen 0.79891 left\n")
              != NULL, "%s", gp);
    /* the .dat is the same as without a title */
    char *dat = scratch_file("t.dat");
    cr_expect_str_eq(dat, "# t: 1 x 1 panels, each 1 rows x 3 columns\n"
                          "# panel 0 (row 0, column 0)\n"
                          "0.5 0.5 0\n");
    free(dat);
    free(gp);
    tensor_free(m);
}

/* ---- NAME.gp through gnuplot ----------------------------------------------- */

static bool have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* Width and height of a PNG, from its IHDR chunk (big-endian at bytes 16..23). */
static bool png_size(const char *path, unsigned *width, unsigned *height)
{
    unsigned char head[24];
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got != sizeof head || memcmp(head, "\x89PNG\r\n\x1a\n", 8) != 0)
        return false;
    *width = (unsigned)head[16] << 24 | (unsigned)head[17] << 16 | (unsigned)head[18] << 8 | head[19];
    *height = (unsigned)head[20] << 24 | (unsigned)head[21] << 16 | (unsigned)head[22] << 8 | head[23];
    return true;
}

Test(plot, gnuplot_renders_the_script_from_any_directory, .init = make_scratch,
     .fini = remove_scratch)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox): not rendering");
    const float weights[] = {0.9f, 0.1f, 0.0f,
                             0.3f, 0.3f, 0.4f};
    Tensor *m = tensor_from(weights, SHAPE(2, 3));
    /* a quote in a label must not break the script */
    cr_assert_eq(plot_heatmaps(scratch, "it's", m, "Keys", "the query's row", NULL), 0);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd / && gnuplot \"%s/it's.gp\" 2>\"%s/gnuplot.err\"",
             scratch, scratch);
    cr_expect_eq(system(cmd), 0, "gnuplot failed on the script");
    char *err = scratch_file("gnuplot.err");
    cr_expect(err && *err == '\0', "gnuplot complained: %s", err ? err : "(nothing read)");
    free(err);

    /* the PNG sits next to the script, with the size the script asked for:
     * cells of 40 pixels, panel 120 x 80, plus the margins of plot.c and,
     * since one weight is exactly 0, a line of 18 pixels for the grey key */
    char png[512];
    snprintf(png, sizeof png, "%s/it's.png", scratch);
    unsigned width = 0, height = 0;
    cr_expect(png_size(png, &width, &height), "no PNG was written at %s", png);
    cr_expect_eq(width, 62 + 120 + 18 + 80);
    cr_expect_eq(height, 10 + 18 + 10 + 80 + 48);
    tensor_free(m);
}

Test(plot, gnuplot_renders_a_single_row_and_a_grid, .init = make_scratch,
     .fini = remove_scratch)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox): not rendering");
    Rng rng = rng_new(7);
    Tensor *row = tensor_uniform(&rng, 0.0f, 1.0f, SHAPE(1, 10));
    Tensor *grid = tensor_uniform(&rng, 0.0f, 1.0f, SHAPE(2, 3, 4, 6));
    cr_assert_eq(plot_heatmaps(scratch, "row", row, "Keys", "Queries", NULL), 0);
    cr_assert_eq(plot_heatmaps(scratch, "grid", grid, "Keys", "Queries", NULL), 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd \"%s\" && gnuplot row.gp grid.gp 2>gnuplot.err", scratch);
    cr_expect_eq(system(cmd), 0, "gnuplot failed");
    char *err = scratch_file("gnuplot.err");
    cr_expect(err && *err == '\0', "gnuplot complained: %s", err ? err : "(nothing read)");
    free(err);
    char *listing = scratch_listing();
    cr_expect_str_eq(listing, "gnuplot.err grid.dat grid.gp grid.png row.dat row.gp row.png");
    free(listing);
    tensor_free(row);
    tensor_free(grid);
}

/* Rendered, the grey layer holds the masked cells and only them: the script
 * is run with gnuplot's SVG terminal in place of PNG, where every filled
 * cell is a <polygon> with its colour in the text. */
Test(plot, gnuplot_draws_every_masked_cell_grey_and_no_small_one, .init = make_scratch,
     .fini = remove_scratch)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox): not rendering");
    /* three masked cells, three small or large weights */
    const float weights[] = {0.0f, 1e-6f, 0.5f,
                             0.0f, 0.0f, 1.0f};
    Tensor *m = tensor_from(weights, SHAPE(2, 3));
    cr_assert_eq(plot_heatmaps(scratch, "w", m, "keys", "queries", NULL), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd \"%s\" && sed -e 's/^    set terminal .*/    set terminal svg size 280,166/' "
             "-e \"s/^set output .*/set output 'w.svg'/\" w.gp > svg.gp "
             "&& gnuplot svg.gp 2>gnuplot.err", scratch);
    cr_assert_eq(system(cmd), 0, "gnuplot failed on the SVG copy of the script");
    char *svg = scratch_file("w.svg");
    cr_assert_not_null(svg);
    int grey = 0, white = 0;
    for (const char *p = strstr(svg, "<polygon fill = 'rgb(168, 168, 168)'"); p;
         p = strstr(p + 1, "<polygon fill = 'rgb(168, 168, 168)'"))
        grey++;
    for (const char *p = strstr(svg, "<polygon fill = 'white'"); p;
         p = strstr(p + 1, "<polygon fill = 'white'"))
        white++;
    cr_expect_eq(grey, 3 + 1, "three masked cells and the key square:\n%s", svg);
    cr_expect_eq(white, 0, "no masked cell is drawn a second time, in white");
    free(svg);
    tensor_free(m);
}

/* ---- line plots (plot_curves) ---------------------------------------------- */

/* Two curves that run along 0% and 100%, where a key inside the plot or the
 * frame itself would hide them: the key goes below the plot, the y range
 * keeps a little room on both sides, and gnuplot draws it without a word. */
Test(plot, curves_keep_their_key_below_and_off_the_frame, .init = make_scratch,
     .fini = remove_scratch)
{
    const float x[] = {0, 1, 2, 3};
    const float y[] = {0, 40, 100, 100,
                       0, 0, 20, 100};
    Tensor *xs = tensor_from(x, SHAPE(4));
    Tensor *ys = tensor_from(y, SHAPE(2, 4));
    const char *const titles[] = {"best", "worst"};
    cr_assert_eq(plot_curves(scratch, "acc", xs, ys, "heads kept", "accuracy (%)", titles,
                             false), 0);
    char *dat = scratch_file("acc.dat");
    cr_expect_str_eq(dat, "# acc: 4 points of 2 curves; columns: x, best, worst\n"
                          "0 0 0\n1 40 0\n2 100 20\n3 100 100\n");
    char *gp = scratch_file("acc.gp");
    cr_assert_not_null(gp);
    cr_expect(strstr(gp, "\nset key below\n"), "the key is not placed below the plot:\n%s", gp);
    cr_expect(strstr(gp, "\nset autoscale yfix\nset offsets 0, 0, graph 0.04, graph 0.04\n"),
              "a curve at the top or bottom of the range would sit on the frame:\n%s", gp);
    cr_expect(strstr(gp, "title 'best'") && strstr(gp, "title 'worst'"));
    if (have_gnuplot()) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "cd / && gnuplot \"%s/acc.gp\" 2>\"%s/gnuplot.err\"", scratch,
                 scratch);
        cr_expect_eq(system(cmd), 0, "gnuplot failed on the script");
        char *err = scratch_file("gnuplot.err");
        cr_expect(err && *err == '\0', "gnuplot complained: %s", err ? err : "(nothing read)");
        free(err);
        char *listing = scratch_listing();
        cr_expect_str_eq(listing, "acc.dat acc.gp acc.png gnuplot.err");
        free(listing);
    }
    free(dat);
    free(gp);
    tensor_free(xs);
    tensor_free(ys);
}

/* gnuplot on scratch/name.gp, from another directory: it draws without a word */
static void expect_gnuplot_draws(const char *name)
{
    if (!have_gnuplot())
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd / && gnuplot \"%s/%s.gp\" 2>\"%s/gnuplot.err\"", scratch,
             name, scratch);
    cr_expect_eq(system(cmd), 0, "gnuplot failed on %s.gp", name);
    char *err = scratch_file("gnuplot.err");
    cr_expect(err && *err == '\0', "gnuplot complained: %s", err ? err : "(nothing read)");
    free(err);
}

/* ---- labelled axes and bars ------------------------------------------------ */

Test(plot, ticked_heatmaps_label_every_row_and_column, .init = make_scratch,
     .fini = remove_scratch)
{
    const float w[] = {1, 0, 0, 0.25f, 0.75f, 0, 0.5f, 0.25f, 0.25f};
    Tensor *m = tensor_from(w, SHAPE(3, 3));
    const char *const ticks[] = {"a", "it's", "c"};
    cr_assert_eq(plot_heatmaps_ticked(scratch, "abc", NULL, m, "key", "query", NULL, ticks), 0);
    char *gp = scratch_file("abc.gp");
    cr_assert_not_null(gp);
    cr_expect(strstr(gp, "set xtics ('a' 0, 'it''s' 1, 'c' 2) out nomirror") != NULL &&
                  strstr(gp, "set ytics ('a' 0, 'it''s' 1, 'c' 2) out nomirror") != NULL,
              "the labels are not on both axes:\n%s", gp);
    expect_gnuplot_draws("abc");
    free(gp);
    Tensor *thin = tensor_from(w, SHAPE(1, 3));
    cr_expect_eq(plot_heatmaps_ticked(scratch, "thin", NULL, thin, "k", "q", NULL, ticks), 1,
                 "labels on a matrix that is not square were drawn");
    TENSOR_FREE(m, thin);
}

Test(plot, bars_stand_from_zero_with_their_labels, .init = make_scratch,
     .fini = remove_scratch)
{
    const char *const labels[] = {"1. bigram", "2. it's \"attention\""};
    const double values[] = {2.5, 1.875};
    cr_assert_eq(plot_bars(scratch, "ladder", labels, values, 2, "loss"), 0);
    char *dat = scratch_file("ladder.dat");
    cr_expect_str_eq(dat, "# ladder: 2 bars; columns: index, value, label\n"
                          "0 2.5 \"1. bigram\"\n1 1.875 \"2. it's 'attention'\"\n");
    char *gp = scratch_file("ladder.gp");
    cr_expect(gp != NULL && strstr(gp, "set yrange [0:*]") && strstr(gp, "xticlabels(3)"),
              "the bars do not stand from 0 with their labels:\n%s", gp);
    expect_gnuplot_draws("ladder");
    const double bad[] = {2.5, NAN};
    cr_expect_eq(plot_bars(scratch, "nan", labels, bad, 2, "loss"), 1);
    // and in the terminal: the largest bar full, the other in proportion
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    bars_terminal(out, labels, values, 2, 8);
    fclose(out);
    cr_expect_str_eq(text, "  1. bigram            \u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588 2.500\n"
                           "  2. it's \"attention\"  \u2588\u2588\u2588\u2588\u2588\u2588   1.875\n");
    free(text);
    free(dat);
    free(gp);
}

/* ---- failures -------------------------------------------------------------- */

Test(plot, missing_directory_is_one_line_and_no_file, .init = make_scratch,
     .fini = remove_scratch)
{
    const float weights[] = {0.25f, 0.75f};
    Tensor *m = tensor_from(weights, SHAPE(1, 2));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/missing", scratch);

    StderrCapture cap;
    capture_stderr(&cap);
    int status = plot_heatmaps(dir, "w", m, "Keys", "Queries", NULL);
    char *err = captured_stderr(&cap);

    cr_expect_eq(status, 1, "fail's exit status, for the program to return");
    char expected[600];
    snprintf(expected, sizeof expected,
             "plot w: cannot write into '%s': No such file or directory\n", dir);
    cr_expect_str_eq(err, expected);
    char *listing = scratch_listing();
    cr_expect_str_eq(listing, "", "nothing may be created");
    free(listing);
    free(err);
    tensor_free(m);
}

Test(plot, nan_is_refused_and_the_old_files_stay, .init = make_scratch, .fini = remove_scratch)
{
    /* an earlier, good plot of the same name */
    const float good[] = {0.25f, 0.75f};
    Tensor *m = tensor_from(good, SHAPE(1, 2));
    cr_assert_eq(plot_heatmaps(scratch, "w", m, "Keys", "Queries", NULL), 0);
    char *before = scratch_file("w.dat");

    AT2(m, 0, 1) = NAN;
    StderrCapture cap;
    capture_stderr(&cap);
    int status = plot_heatmaps(scratch, "w", m, "Keys", "Queries", NULL);
    char *err = captured_stderr(&cap);

    cr_expect_eq(status, 1);
    cr_expect_str_eq(err, "plot w: element 1 of the matrices is nan; nothing was written\n");
    char *after = scratch_file("w.dat");
    cr_expect_str_eq(after, before, "the earlier file is untouched");
    char *listing = scratch_listing();
    cr_expect_str_eq(listing, "w.dat w.gp", "no temporary file is left");
    free(listing);
    free(before);
    free(after);
    free(err);
    tensor_free(m);
}

Test(plot, bad_name_and_bad_shape_are_refused, .init = make_scratch, .fini = remove_scratch)
{
    const float values[] = {0.5f, 0.5f};
    Tensor *vec = tensor_from(values, SHAPE(2));
    Tensor *m = tensor_from(values, SHAPE(1, 2));
    StderrCapture cap;
    capture_stderr(&cap);
    int by_name = plot_heatmaps(scratch, "sub/w", m, "Keys", "Queries", NULL);
    int by_shape = plot_heatmaps(scratch, "v", vec, "Keys", "Queries", NULL);
    char *err = captured_stderr(&cap);
    cr_expect_eq(by_name, 1);
    cr_expect_eq(by_shape, 1);
    cr_expect_str_eq(err,
                     "plot 'sub/w': not a plain file name (no '/', at most 200 characters)\n"
                     "plot v: matrices must be (T, K), (P, T, K) or (R, C, T, K), got (2,)\n");
    char *listing = scratch_listing();
    cr_expect_str_eq(listing, "");
    free(listing);
    free(err);
    tensor_free(vec);
    tensor_free(m);
}

/* ---- heatmap_terminal ---------------------------------------------------- */

/* heatmap_terminal's drawing, or heatmap_terminal_shades' (shades_only).
 * Not inlined: gcc 12 then takes the returned text for a pointer to the
 * local buf that open_memstream was given (-Wdangling-pointer). */
__attribute__((noinline)) static char *drawing_of(const Tensor *m, const char *title, bool shades_only)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (shades_only)
        heatmap_terminal_shades(f, m, title);
    else
        heatmap_terminal(f, m, title);
    fclose(f);
    return buf;
}

static char *terminal_drawing(const Tensor *m, const char *title)
{
    return drawing_of(m, title, false);
}

/* A crop of a larger matrix, labelled by the positions it stands for:
 * rows from 9, columns from 8, the columns' tens over their units. */
Test(plot, terminal_drawing_at_positions)
{
    const float weights[] = {1.0f, 0.0f, 0.0f,
                             0.2f, 0.7f, 0.0f};
    Tensor *m = tensor_from(weights, SHAPE(2, 3));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    heatmap_terminal_at(f, m, "crop", 9, 8);
    fclose(f);
    cr_expect_str_eq(buf,
                     "crop\n"
                     "         1\n"
                     "     8 9 0\n"
                     "   ┌──────┐\n"
                     " 9 │██ · ·│ 1.00    0    0\n"
                     "10 │░░▓▓ ·│ 0.20 0.70    0\n"
                     "   └──────┘\n"
                     "   · exactly 0 (masked), ░ above 0 up to 0.25, ▒ up to 0.5, ▓ up to 0.75,"
                     " █ up to 1\n");
    free(buf);
    tensor_free(m);
}

Test(plot, terminal_drawing_of_a_tiny_matrix)
{
    /* one value on each side of every shade boundary; an exact 0 is a dot
     * under its column number */
    const float weights[] = {0.0f, 0.25f, 0.26f,
                             0.5f, 0.75f, 1.0f};
    Tensor *m = tensor_from(weights, SHAPE(2, 3));
    char *got = terminal_drawing(m, "tiny");
    cr_expect_str_eq(got,
                     "tiny\n"
                     "     0 1 2\n"
                     "   ┌──────┐\n"
                     " 0 │ ·░░▒▒│    0 0.25 0.26\n"
                     " 1 │▒▒▓▓██│ 0.50 0.75 1.00\n"
                     "   └──────┘\n"
                     "   · exactly 0 (masked), ░ above 0 up to 0.25, ▒ up to 0.5, ▓ up to 0.75,"
                     " █ up to 1\n",
                     "drew:\n%s", got);
    free(got);
    tensor_free(m);
}

Test(plot, terminal_masked_cells_are_dots_and_small_weights_are_shaded)
{
    /* a weight of 1e-6, or 1e-45, is not masked: only an exact 0 (of
     * either sign) is a dot; below 0 and NaN show as what they are */
    const float weights[] = {1e-6f, 0.0f, NAN, 2.0f, 1e-45f, -0.0f, -0.5f};
    Tensor *m = tensor_from(weights, SHAPE(1, 7));
    char *got = terminal_drawing(m, NULL);
    cr_expect(strstr(got, " 0 │░░ ·??██░░ ·--│ 0.00    0  nan 2.00 0.00    0 -0.50\n") != NULL,
              "drew:\n%s", got);
    cr_expect(strncmp(got, "     0 1 2 3 4 5 6\n", 19) == 0,
              "no title line when title is NULL:\n%s", got);
    char legend[160];
    snprintf(legend, sizeof legend, "   %s\n", HEATMAP_TERMINAL_LEGEND);
    const size_t got_len = strlen(got), legend_len = strlen(legend);
    cr_expect(got_len > legend_len && strcmp(got + got_len - legend_len, legend) == 0,
              "the legend is the last line:\n%s", got);
    free(got);
    tensor_free(m);
}

/* Chapter 03's contrast: the unscaled weights 0.98 and 0.02 against the
 * scaled 0.91 and 0.09 share their shades, so the rows must differ in their
 * numbers; the numbers are those of the matrix, read back from the line. */
Test(plot, terminal_rows_of_distinct_weights_differ)
{
    const float weights[] = {0.98f, 0.02f, 0.0f,
                             0.91f, 0.09f, 0.0f};
    Tensor *m = tensor_from(weights, SHAPE(2, 3));
    char *got = terminal_drawing(m, NULL);
    const char *row0 = strstr(got, " 0 │"), *row1 = strstr(got, " 1 │");
    cr_assert(row0 != NULL && row1 != NULL, "drew:\n%s", got);
    const char *cells0 = strstr(row0, "│"), *cells1 = strstr(row1, "│");
    cr_expect(strncmp(cells0, cells1, strlen("│██░░ ·│")) == 0,
              "four shades draw 0.98 and 0.91 alike:\n%s", got);
    cr_expect(strncmp(row0, row1, (size_t)(strchr(row0, '\n') - row0)) != 0,
              "two rows of different weights are drawn the same:\n%s", got);
    for (int t = 0; t < 2; t++) {
        const char *after = strstr(strstr(t ? row1 : row0, "│") + 1, "│") + strlen("│");
        float a, b, c;
        cr_expect_eq(sscanf(after, "%f %f %f", &a, &b, &c), 3, "row %d: %s", t, after);
        cr_expect(fabsf(a - weights[3 * t]) <= 0.005f && fabsf(b - weights[3 * t + 1]) <= 0.005f
                  && c == 0.0f, "row %d shows %g %g %g", t, a, b, c);
    }
    free(got);

    /* the shades alone (for panels side by side) end each row at its border */
    got = drawing_of(m, NULL, true);
    cr_expect(strstr(got, " 0 │██░░ ·│\n 1 │██░░ ·│\n") != NULL, "drew:\n%s", got);
    free(got);
    tensor_free(m);
}

/* Beyond HEATMAP_VALUES_MAX keys the rows are too long for the numbers. */
Test(plot, terminal_values_only_up_to_eight_keys)
{
    Tensor *m = tensor_full(0.5f, SHAPE(1, HEATMAP_VALUES_MAX + 1));
    char *got = terminal_drawing(m, NULL);
    cr_expect(strstr(got, "▒▒│\n") != NULL && strstr(got, "0.50") == NULL, "drew:\n%s", got);
    free(got);
    tensor_free(m);
}

Test(plot, terminal_note_for_a_large_matrix)
{
    Tensor *m = tensor_zeros(SHAPE(HEATMAP_TERMINAL_MAX + 1, 3));
    char *got = terminal_drawing(m, "weights");
    cr_expect_str_eq(got, "weights (a 17 x 3 matrix is too large to draw here; at most 16 x 16)\n");
    free(got);
    tensor_free(m);

    m = tensor_zeros(SHAPE(HEATMAP_TERMINAL_MAX, HEATMAP_TERMINAL_MAX));
    got = terminal_drawing(m, NULL);
    cr_expect(strstr(got, "15 │") != NULL, "16 x 16 is still drawn:\n%s", got);
    free(got);
    tensor_free(m);
}
