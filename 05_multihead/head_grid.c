/*
 * head_grid - d2l's exercise 1 for multi-head attention, solved: draw the
 * attention weights of every head, as a grid with one row per sequence and
 * one column per head, in the terminal and (with --plot) as a gnuplot PNG.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * Its parts are numbered as the parts of 05_multihead/multihead that they
 * draw. Part 2 draws d2l's experiment as it stands (all-ones inputs): every
 * head's panel is the same, which is the answer to the exercise as much as
 * any picture. Part 3 feeds random inputs to the same layer and the heads
 * come apart. "How different are the heads?" gets a number too: the mean
 * total variation distance between the weight rows of two heads, 0 when
 * they agree everywhere and 1 when they never share a key.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "run/layer_files.h"
#include "multihead.h"
#include "io/plot.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "head_grid";

typedef struct {
    int hiddens, heads;
    double scale;
    uint64_t seed;
    const char *plot_dir;   /* NULL: no files */
} Options;

/* ---- the grid in the terminal ----------------------------------------------- */

/* Columns a UTF-8 string takes: one per character, the shades and box
 * lines included (every byte that does not continue a character). */
static int display_width(const char *s, size_t len)
{
    int width = 0;
    for (size_t i = 0; i < len; i++)
        width += ((unsigned char)s[i] & 0xC0) != 0x80;
    return width;
}

/* One drawn panel: heatmap_terminal's text, split into lines, the legend
 * line left out (it is printed once under the grid). */
typedef struct {
    char *text;
    char *lines[24];
    int num_lines;
} Panel;

static void panel_draw(Panel *p, const Tensor *matrix, const char *title)
{
    size_t size = 0;
    FILE *mem = open_memstream(&p->text, &size);
    if (mem == NULL)
        die("cannot open a memory stream for the terminal grid");
    heatmap_terminal_shades(mem, matrix, title);
    fclose(mem);
    p->num_lines = 0;
    for (char *line = strtok(p->text, "\n"); line && p->num_lines < 24;
         line = strtok(NULL, "\n"))
        if (strstr(line, HEATMAP_TERMINAL_LEGEND) == NULL)
            p->lines[p->num_lines++] = line;
}

/* weights (B, H, T, K): B rows of H panels, side by side. */
static void print_grid(const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    const int T = weights->shape[2], K = weights->shape[3];
    Panel *panels = checked_calloc((size_t)H, sizeof *panels);
    for (int b = 0; b < B; b++) {
        int width = 0, num_lines = 0;
        if (b > 0)
            printf("\n");
        for (int h = 0; h < H; h++) {
            char title[48];
            snprintf(title, sizeof title, "seq %d, head %d", b, h);
            Tensor *m = tensor_from(weights->data + ((size_t)b * H + h) * T * K, SHAPE(T, K));
            panel_draw(&panels[h], m, title);
            tensor_free(m);
            for (int i = 0; i < panels[h].num_lines; i++) {
                int w = display_width(panels[h].lines[i], strlen(panels[h].lines[i]));
                width = w > width ? w : width;
            }
            num_lines = panels[h].num_lines > num_lines ? panels[h].num_lines : num_lines;
        }
        for (int i = 0; i < num_lines; i++) {
            for (int h = 0; h < H; h++) {
                const char *line = i < panels[h].num_lines ? panels[h].lines[i] : "";
                int pad = width - display_width(line, strlen(line));
                /* the last panel needs no padding: no trailing spaces */
                printf("%s%*s", line, h < H - 1 ? pad + 2 : 0, "");
            }
            printf("\n");
        }
        for (int h = 0; h < H; h++)
            free(panels[h].text);
    }
    printf("   %s\n", HEATMAP_TERMINAL_LEGEND);
    free(panels);
}

/* ---- how different the heads are --------------------------------------------- */

/* Mean over sequences, queries and pairs of heads of the total variation
 * distance 1/2 sum_j |w_h[j] - w_g[j]| between two heads' weight rows. */
static double mean_head_distance(const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    const int T = weights->shape[2], K = weights->shape[3];
    double total = 0.0;
    long pairs = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int g = h + 1; g < H; g++)
                for (int t = 0; t < T; t++) {
                    double tv = 0.0;
                    for (int j = 0; j < K; j++)
                        tv += fabs((double)AT4(weights, b, h, t, j) - AT4(weights, b, g, t, j));
                    total += 0.5 * tv;
                    pairs++;
                }
    return pairs ? total / (double)pairs : 0.0;
}

/* weights (B, H, T, K): the grid, the distance between heads, and with
 * --plot the heatmaps DIR/NAME.{dat,gp}. Returns 0, or 1 when a file failed. */
static int show_heads(const Tensor *weights, const char *plot_dir, const char *name,
                      const char *title)
{
    print_grid(weights);
    if (weights->shape[1] == 1)
        printf("one head: no two heads to compare\n");
    else
        printf("mean distance between two heads: %.4f\n", mean_head_distance(weights));
    if (plot_dir == NULL)
        return 0;
    const int status = layer_files_plot_weights(plot_dir, name, title, weights);
    if (status != 0)
        return status;
    printf("wrote %s/%s.dat and %s/%s.gp (gnuplot %s/%s.gp makes the .png)\n", plot_dir, name,
           plot_dir, name, plot_dir, name);
    return 0;
}

/* ---- the parts ------------------------------------------------------------------ */

/* multihead's Part 2, drawn: d2l's experiment exactly as the section runs it. */
static int part2_d2l_inputs_every_head(const MultiHeadAttention *layer,
                                       const ValidLens *valid_lens, const Options *opt)
{
    const int B = 2, T = 4, K = 6, D = opt->hiddens;
    printf("\nPart 2. d2l's inputs, X = ones(%d, %d, %d) and Y = ones(%d, %d, %d)\n\n", B, T, D,
           B, K, D);
    Tensor *X = tensor_ones(SHAPE(B, T, D));
    Tensor *Y = tensor_ones(SHAPE(B, K, D));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, X, Y, Y, valid_lens, false, NULL, &weights);
    int status = show_heads(weights, opt->plot_dir, "head_grid_ones",
                            "head_grid: d2l's all-ones inputs, every head the same");
    printf("Every head draws the same panel: with all-ones inputs all keys are equal, so every\n"
           "head spreads its weight evenly over the valid keys, 1/3 for sequence 0 and 1/2 for\n"
           "sequence 1. The picture of d2l's own experiment shows only the mask.\n");
    TENSOR_FREE(X, Y, output, weights);
    return status;
}

/* multihead's Part 3, drawn: inputs that differ, so the heads can too. */
static int part3_random_inputs_every_head(const MultiHeadAttention *layer,
                                          const ValidLens *valid_lens, const Options *opt,
                                          Rng *rng)
{
    const int B = 2, T = 4, K = 6, D = opt->hiddens;
    printf("\nPart 3. Random inputs, X and Y ~ normal(0, %g^2)\n\n", opt->scale);
    Tensor *X = tensor_normal(rng, 0.0f, (float)opt->scale, SHAPE(B, T, D));
    Tensor *Y = tensor_normal(rng, 0.0f, (float)opt->scale, SHAPE(B, K, D));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, X, Y, Y, valid_lens, false, NULL, &weights);
    int status = show_heads(weights, opt->plot_dir, "head_grid_random",
                            "head_grid: random inputs, each head its own ranking");
    printf("Each head projects the same tokens with its own slice of W_q and W_k, so each\n"
           "ranks the keys its own way; the masked keys stay dots in every head.\n");
    TENSOR_FREE(X, Y, output, weights);
    return status;
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.hiddens = 100, .heads = 5, .scale = 3.0, .seed = 0};
    const CliOption options[] = {
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = 1024, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = 8, .metavar = "H",
         .help = "num_heads, must divide D", .splits = &opt.hiddens},
        {"--scale", CLI_DOUBLE, &opt.scale, .min = 0.1, .max = 100.0, .metavar = "S",
         .help = "standard deviation of the random inputs of Part 3\n"
                 "(an untrained layer is nearly uniform on N(0, 1))"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for the parameters and inputs"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "also write DIR/head_grid_ones and DIR/head_grid_random\n"
                 "(.dat and .gp; gnuplot renders the .png)"},
    };
    static const char summary[] =
        "d2l's exercise 1: the attention weights of every head of the toy example\n"
        "(batch 2, 4 queries, 6 key-value pairs, valid_lens [3, 2]) as a grid of\n"
        "heatmaps, one row per sequence and one column per head.";
    *done = cli_parse(&(CliTable){PROG, summary, CLI_COUNT(options), options}, argc, argv);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    MultiHeadAttention *layer = multihead_new(opt.hiddens, opt.hiddens, opt.hiddens, opt.hiddens,
                                              opt.heads, 0.5f, false, &rng);
    ValidLens *valid_lens = valid_lens_1d((const int[]){3, 2}, 2);   /* d2l's toy sizes */
    char heads[32] = "its one head";
    if (opt.heads > 1)
        snprintf(heads, sizeof heads, "all %d heads", opt.heads);
    printf("d2l's exercise 1: the attention weights of %s (num_hiddens %d, seed %llu),\n"
           "one row of panels per sequence, queries down, keys across; valid_lens = [3, 2].\n",
           heads, opt.hiddens, (unsigned long long)opt.seed);

    /* each part plots whatever became of the other; the first failure's status is returned */
    const int d2l = part2_d2l_inputs_every_head(layer, valid_lens, &opt);
    const int random = part3_random_inputs_every_head(layer, valid_lens, &opt, &rng);
    const int status = d2l != 0 ? d2l : random;
    valid_lens_free(valid_lens);
    multihead_free(layer);
    return status;
}
