/*
 * head_grid - d2l's exercise 1 for multi-head attention, solved: draw the
 * attention weights of every head, as a grid with one row per sequence and
 * one column per head, in the terminal and (with --plot) as a gnuplot PNG.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * Part 1 draws d2l's experiment as it stands (all-ones inputs): every panel
 * is the same, which is the answer to the exercise as much as any picture.
 * Part 2 feeds random inputs to the same layer and the heads come apart.
 * "How different are the heads?" gets a number too: the mean total
 * variation distance between the weight rows of two heads, 0 when they
 * agree everywhere and 1 when they never share a key.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "multihead.h"
#include "io/plot.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "head_grid";

static void usage(void)
{
    printf("usage: %s [options]\n"
           "\n"
           "d2l's exercise 1: the attention weights of every head of the toy example\n"
           "(batch 2, 4 queries, 6 key-value pairs, valid_lens [3, 2]) as a grid of\n"
           "heatmaps, one row per sequence and one column per head.\n"
           "\n"
           "options:\n"
           "  --hiddens D     num_hiddens, 1 to 1024 (default 100)\n"
           "  --heads H       num_heads, 1 to 8, must divide D (default 5)\n"
           "  --scale S       standard deviation of the random inputs of part 2, 0.1 to 100\n"
           "                  (default 3: an untrained layer is nearly uniform on N(0, 1))\n"
           "  --seed N        seed for the parameters and inputs (default 0)\n"
           "  --plot DIR      also write DIR/head_grid_ones and DIR/head_grid_random\n"
           "                  (.dat and .gp; gnuplot renders the .png)\n"
           "  --help          this text\n", PROG);
}

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
        die(PROG, "cannot open a memory stream for the terminal grid");
    heatmap_terminal(mem, matrix, title);
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
    Panel *panels = checked_calloc(PROG, (size_t)H, sizeof *panels);
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

static int plot(const char *dir, const char *name, const Tensor *weights)
{
    const int B = weights->shape[0], H = weights->shape[1];
    char (*titles)[48] = checked_calloc(PROG, (size_t)B * H, sizeof *titles);
    const char **ptrs = checked_calloc(PROG, (size_t)B * H, sizeof *ptrs);
    for (int i = 0; i < B * H; i++) {
        snprintf(titles[i], sizeof titles[i], "sequence %d, head %d", i / H, i % H);
        ptrs[i] = titles[i];
    }
    int status = plot_heatmaps(dir, name, weights, "keys", "queries", ptrs);
    if (status == 0)
        printf("wrote %s/%s.dat and %s/%s.gp (gnuplot %s/%s.gp makes the .png)\n", dir, name,
               dir, name, dir, name);
    free(titles);
    free(ptrs);
    return status;
}

int main(int argc, char **argv)
{
    int D = 100, H = 5;
    double scale = 3.0;
    uint64_t seed = 0;
    const char *plot_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is(arg, "--hiddens"))
            D = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 1024);
        else if (cli_is(arg, "--heads"))
            H = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 8);
        else if (cli_is(arg, "--scale"))
            scale = cli_double(PROG, arg, cli_value(PROG, argc, argv, &i), 0.1, 100.0);
        else if (cli_is(arg, "--seed"))
            seed = cli_u64(PROG, arg, cli_value(PROG, argc, argv, &i));
        else if (cli_is(arg, "--plot"))
            plot_dir = cli_value(PROG, argc, argv, &i);
        else if (cli_is(arg, "--help")) {
            usage();
            return 0;
        } else
            cli_unknown(PROG, arg);
    }
    if (D % H != 0)
        cli_fail(PROG, "--hiddens %d does not divide by --heads %d: every head needs the same "
                 "size", D, H);
    if (plot_dir)
        cli_check_dir(PROG, "--plot", plot_dir);

    /* d2l's toy sizes */
    const int B = 2, T = 4, K = 6;
    Rng rng = rng_new(seed);
    MultiHeadAttention *layer = multihead_new(D, D, D, D, H, 0.5f, false, &rng);
    ValidLens *valid_lens = valid_lens_1d((const int[]){3, 2}, B);
    int status = 0;

    printf("d2l's exercise 1: the attention weights of all %d heads (num_hiddens %d, seed %llu),\n"
           "one row of panels per sequence, queries down, keys across; valid_lens = [3, 2].\n",
           H, D, (unsigned long long)seed);

    // part 1: d2l's experiment exactly as the section runs it
    printf("\n---- 1. d2l's inputs, X = ones(%d, %d, %d) and Y = ones(%d, %d, %d) ----\n\n", B, T,
           D, B, K, D);
    Tensor *X = tensor_ones(SHAPE(B, T, D));
    Tensor *Y = tensor_ones(SHAPE(B, K, D));
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(layer, X, Y, Y, valid_lens, false, NULL, &weights);
    print_grid(weights);
    printf("mean distance between two heads: %.4f\n"
           "Every panel is the same: with all-ones inputs all keys are equal, so every head\n"
           "spreads its weight evenly over the valid keys, 1/3 for sequence 0 and 1/2 for\n"
           "sequence 1. The picture of d2l's own experiment shows only the mask.\n",
           mean_head_distance(weights));
    if (plot_dir && plot(plot_dir, "head_grid_ones", weights) != 0)
        status = 1;
    tensor_free(X);
    tensor_free(Y);
    tensor_free(output);
    tensor_free(weights);

    // part 2: inputs that differ, so the heads can too
    printf("\n---- 2. random inputs, X and Y ~ normal(0, %g^2) ----\n\n", scale);
    X = tensor_normal(&rng, 0.0f, (float)scale, SHAPE(B, T, D));
    Y = tensor_normal(&rng, 0.0f, (float)scale, SHAPE(B, K, D));
    output = multihead_forward(layer, X, Y, Y, valid_lens, false, NULL, &weights);
    print_grid(weights);
    printf("mean distance between two heads: %.4f\n"
           "Each head projects the same tokens with its own slice of W_q and W_k, so each\n"
           "ranks the keys its own way; the masked keys stay dots in every head.\n",
           mean_head_distance(weights));
    if (plot_dir && plot(plot_dir, "head_grid_random", weights) != 0)
        status = 1;

    tensor_free(X);
    tensor_free(Y);
    tensor_free(output);
    tensor_free(weights);
    valid_lens_free(valid_lens);
    multihead_free(layer);
    return status;
}
