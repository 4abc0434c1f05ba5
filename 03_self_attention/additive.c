/*
 * additive - the other scoring function and the kernel view (chapter 03's
 * page additive.md).
 *
 * Part 1: additive attention, w_v . tanh(W_q q + W_k k), on d2l's check:
 *         queries of size 20 over keys of size 2, valid_lens [2, 6].
 * Part 2: Nadaraya-Watson kernel regression on d2l's toy data: a Gaussian
 *         kernel is a softmax of -(x - x_i)^2 / (2 sigma^2); the fit's
 *         error for a few widths sigma, and its weights drawn.
 * A check that fails makes the exit status 1, with a line on stderr.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, q, k, v = query,
 * key and value sizes, h = num_hiddens; n = training points (keys x_i and
 * values y_i of the kernel), m = the points where the fit is read.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "additive_attention.h"
#include "io/cli.h"
#include "io/plot.h"
#include "kernel_regression.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "additive";

enum { MAX_POINTS = 1000, NUM_SIGMAS = 5, BINS = 10 };
static const float SIGMAS[NUM_SIGMAS] = {0.1f, 0.2f, 0.5f, 1.0f, 2.0f};
enum { DRAWN_NARROW = 1, DRAWN_WIDE = 3 };   /* sigma 0.2 and 1, the drawings */

typedef struct {
    uint64_t seed;
    int num_points;   /* n */
    float noise;      /* standard deviation of the noise on y */
    const char *plot_dir;
} Options;

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .num_points = 50, .noise = 1.0f};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for every random number"},
        {"--points", CLI_INT, &opt.num_points, .min = 2, .max = MAX_POINTS, .metavar = "N",
         .help = "training points of Part 2's toy data"},
        {"--noise", CLI_FLOAT, &opt.noise, .min = 0, .max = 10, .metavar = "S",
         .help = "standard deviation of the noise on Part 2's y"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write DIR/additive_check, DIR/kernel_weights and\n"
                 "DIR/kernel_fit (.dat and .gp)"},
    };
    *done = cli_parse(&(CliTable){PROG, "Additive attention w_v . tanh(W_q q + W_k k) on d2l's check, "
                                        "and Nadaraya-Watson\nkernel regression as attention pooling "
                                        "on d2l's toy data.",
                                  CLI_COUNT(options), options}, argc, argv);
    return opt;
}

/* ---- Part 1 -------------------------------------------------------------- */

/* weights (B, T, K): every row with a key sums to 1 and every key at or
 * past its valid_len has weight exactly 0 */
static void check_weights(const Tensor *weights, const int *lens)
{
    const int B = weights->shape[0], T = weights->shape[1], K = weights->shape[2];
    double worst = 0.0;
    bool masked_zero = true;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            double sum = 0.0;
            for (int j = 0; j < K; j++) {
                sum += AT3(weights, b, i, j);
                masked_zero = masked_zero && (j < lens[b] || AT3(weights, b, i, j) == 0.0f);
            }
            worst = fmax(worst, fabs(sum - 1.0));
        }
    char text[32];
    printf("rows sum to 1: largest difference %s; masked keys have weight exactly 0: %s\n",
           residue_text(text, sizeof text, worst, 1e-6), masked_zero ? "yes" : "NO");
    cli_check(worst < 1e-6, "part 1: a row of weights does not sum to 1");
    cli_check(masked_zero, "part 1: a masked key has a weight");
}

/* d2l's keys, torch.ones((2, 10, 2)): every key scores the same, so each
 * query spreads its weight evenly over its valid keys, and d2l printed
 * the output [[2, 3, 4, 5]], [[10, 11, 12, 13]] */
static void with_d2l_ones(const AdditiveAttention *layer, const Tensor *queries,
                          const Tensor *values, const ValidLens *valid_lens)
{
    static const float d2l_printed[] = {2, 3, 4, 5, 10, 11, 12, 13};
    Tensor *ones = tensor_ones(SHAPE(2, 10, 2));
    Tensor *weights = NULL;
    Tensor *output = additive_attention(layer, queries, ones, values, valid_lens, NULL, &weights);
    Tensor *printed = tensor_from(d2l_printed, SHAPE(2, 1, 4));
    printf("\nWith d2l's keys, all ones, every key scores the same:\n");
    tensor_print_named("attention_weights", weights);
    tensor_print_named("output", output);
    const float diff = tensor_max_abs_diff(output, printed);
    char text[32];
    printf("d2l printed [[2, 3, 4, 5]], [[10, 11, 12, 13]]: largest difference %s\n\n",
           residue_text(text, sizeof text, diff, 1e-5));
    cli_check(diff < 1e-5f, "part 1: the output with keys of ones is not d2l's");
    TENSOR_FREE(ones, weights, output, printed);
}

/* Returns the weights (2, 1, 10) for plotting. */
static Tensor *part1_additive(Rng *rng)
{
    printf("Part 1. Additive attention: score = w_v . tanh(W_q q + W_k k)\n\n");
    printf("d2l's check: 2 sequences, 1 query of size 20 over 10 keys of size 2,\n"
           "values (2, 10, 4) = arange(40) twice, num_hiddens h = 8\n");
    const int lens[2] = {2, 6};
    AdditiveAttention layer = additive_attention_new(20, 2, 8, rng);
    Tensor *queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(2, 1, 20));
    Tensor *keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(2, 10, 2));
    Tensor *values = tensor_arange(SHAPE(2, 10, 4));
    for (size_t i = 40; i < values->size; i++)
        values->data[i] -= 40.0f;   /* arange(40).reshape(1, 10, 4).repeat(2, 1, 1) */
    ValidLens *valid_lens = valid_lens_1d(lens, 2);
    printf("queries and keys ~ normal(0, 1); W_q (8, 20), W_k (8, 2) and w_v (1, 8)\n"
           "drawn as nn.Linear draws them\n");
    valid_lens_print_named("valid_lens", valid_lens);

    Tensor *weights = NULL;
    Tensor *output = additive_attention(&layer, queries, keys, values, valid_lens, NULL, &weights);
    printf("\n");
    tensor_print_named("attention_weights (2, 1, 10)", weights);
    tensor_print_named("output (2, 1, 4)", output);
    check_weights(weights, lens);
    double w_v_l1 = 0.0;   /* each tanh is in (-1, 1): |score| < |w_v|_1 */
    for (size_t c = 0; c < layer.w_v->size; c++)
        w_v_l1 += fabs(layer.w_v->data[c]);
    printf("every score lies within +-|w_v|_1 = +-%.4f, so two weights of a row differ\n"
           "by a factor of at most exp(2 |w_v|_1) = %.2f\n", w_v_l1, exp(2.0 * w_v_l1));
    Tensor *drawn = tensor_select(weights, 1, 0);   /* weights[:, 0] (2, 10) */
    heatmap_terminal(stdout, drawn, "weights: one row per sequence, keys across");
    with_d2l_ones(&layer, queries, values, valid_lens);
    TENSOR_FREE(queries, keys, values, output, drawn);
    valid_lens_free(valid_lens);
    additive_attention_free(&layer);
    return weights;
}

/* ---- Part 2 -------------------------------------------------------------- */

static float true_function(float x) { return 2.0f * sinf(x) + powf(x, 0.8f); }

typedef struct {
    Tensor *x_train, *y_train;   /* (n,) */
    Tensor *x_val, *y_val;       /* (m,): 0, 5/m, ..., and f there, no noise */
} ToyData;

/* d2l 11.2: x_train sorted uniform on [0, 5), y_train = f(x) + noise */
static ToyData toy_data(Rng *rng, int n, float noise)
{
    ToyData data;
    data.x_train = tensor_uniform(rng, 0.0f, 5.0f, SHAPE(n));
    float *x = data.x_train->data;
    for (int i = 1; i < n; i++)   /* insertion sort: x_train, _ = torch.sort(...) */
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            const float t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    data.y_train = tensor_zeros(SHAPE(n));
    for (int i = 0; i < n; i++)
        data.y_train->data[i] = true_function(x[i]) + noise * rng_normal(rng);
    data.x_val = tensor_zeros(SHAPE(n));
    data.y_val = tensor_zeros(SHAPE(n));
    for (int i = 0; i < n; i++) {
        data.x_val->data[i] = 5.0f * (float)i / (float)n;   /* torch.arange(0, 5, 5 / n) */
        data.y_val->data[i] = true_function(data.x_val->data[i]);
    }
    return data;
}

static double rms_difference(const Tensor *a, const Tensor *b)
{
    double sum = 0.0;
    for (size_t i = 0; i < a->size; i++)
        sum += ((double)a->data[i] - b->data[i]) * ((double)a->data[i] - b->data[i]);
    return sqrt(sum / (double)a->size);
}

/* The kernel's own formula, exp(-d^2 / 2 sigma^2) / sum: is the softmax the same? */
static double kernel_form_gap(const ToyData *data, const Tensor *weights, float sigma)
{
    const int n = data->x_train->shape[0], m = data->x_val->shape[0];
    double worst = 0.0;
    for (int i = 0; i < m; i++) {
        double total = 0.0, kernel[MAX_POINTS];
        for (int j = 0; j < n; j++) {
            const double dist = (double)data->x_val->data[i] - data->x_train->data[j];
            total += kernel[j] = exp(-dist * dist / (2.0 * sigma * sigma));
        }
        if (total <= 0.0)
            continue;   /* every kernel underflowed: the softmax side says so itself */
        for (int j = 0; j < n; j++) {
            /* a comparison, not fmax: gcc 12's aarch64 vectoriser stops with an
             * internal error on an fmax reduction here */
            const double gap = fabs(kernel[j] / total - AT2(weights, i, j));
            if (gap > worst)
                worst = gap;
        }
    }
    return worst;
}

/* The strip of x, [0, 0.5), [0.5, 1), ..., [4.5, 5), that holds x */
static int strip_of(float x)
{
    const int strip = (int)(x / (5.0f / BINS));
    return strip < BINS ? strip : BINS - 1;
}

/* weights (m, n) -> (BINS, BINS): every m / BINS-th query, its weights
 * summed over the training points in each of BINS strips of x */
static Tensor *binned(const ToyData *data, const Tensor *weights)
{
    const int n = data->x_train->shape[0], m = data->x_val->shape[0];
    Tensor *strips = tensor_zeros(SHAPE(BINS, BINS));
    for (int r = 0; r < BINS; r++) {
        const int i = r * m / BINS;
        for (int j = 0; j < n; j++)
            AT2(strips, r, strip_of(data->x_train->data[j])) += AT2(weights, i, j);
    }
    return strips;
}

/* What --plot draws: the weights of the drawn widths (2, m, n), the
 * points x_val (m,) and the curves over them (1 + NUM_SIGMAS, m): f, then
 * the fit of each width. */
typedef struct {
    Tensor *weights, *x_val, *fits;
} KernelPlots;

/* The RMS error of the noise itself and of the mean of y, for scale */
static void baselines(const ToyData *data)
{
    const int n = data->x_train->shape[0];
    Tensor *f_train = tensor_zeros(SHAPE(n)), *mean_fit = tensor_zeros(SHAPE(n));
    double mean_y = 0.0;
    for (int i = 0; i < n; i++) {
        f_train->data[i] = true_function(data->x_train->data[i]);
        mean_y += data->y_train->data[i] / (double)n;
    }
    for (int i = 0; i < n; i++)
        mean_fit->data[i] = (float)mean_y;
    printf("\nfor scale: the noise itself, RMS of y_i - f(x_i): %.4f; the mean of y\n"
           "everywhere: %.4f\n", rms_difference(data->y_train, f_train),
           rms_difference(mean_fit, data->y_val));
    TENSOR_FREE(f_train, mean_fit);
}

/* The table: the fit's RMS error against f for each width, and how much
 * weight the nearest point takes. Fills plots->fits and plots->weights. */
static void fit_table(const ToyData *data, KernelPlots *plots)
{
    const int n = data->x_train->shape[0];
    printf("weights = softmax(-(x - x_i)^2 / (2 sigma^2)) over the training points\n\n");
    printf("  sigma   RMS error of the fit   largest weight (mean)\n");
    plots->fits = tensor_zeros(SHAPE(1 + NUM_SIGMAS, n));
    for (int i = 0; i < n; i++)
        AT2(plots->fits, 0, i) = data->y_val->data[i];
    Tensor *drawn[2] = {NULL, NULL};
    double worst_gap = 0.0;
    for (int s = 0; s < NUM_SIGMAS; s++) {
        Tensor *weights = NULL;
        Tensor *y_hat = nadaraya_watson(data->x_train, data->y_train, data->x_val, SIGMAS[s],
                                        &weights);
        double peak = 0.0;
        for (int i = 0; i < n; i++) {
            float row_peak = 0.0f;
            for (int j = 0; j < n; j++)
                row_peak = fmaxf(row_peak, AT2(weights, i, j));
            peak += row_peak / (double)n;
            AT2(plots->fits, 1 + s, i) = y_hat->data[i];
        }
        printf("  %5.1f   %20.4f   %21.3f\n", (double)SIGMAS[s],
               rms_difference(y_hat, data->y_val), peak);
        worst_gap = fmax(worst_gap, kernel_form_gap(data, weights, SIGMAS[s]));
        if (s == DRAWN_NARROW || s == DRAWN_WIDE)
            drawn[s == DRAWN_WIDE] = weights;
        else
            tensor_free(weights);
        tensor_free(y_hat);
    }
    baselines(data);
    char text[32];
    printf("softmax = the kernel divided by its sum, exp(-d^2 / 2 sigma^2) / sum: largest\n"
           "difference %s\n\n", residue_text(text, sizeof text, worst_gap, 1e-6));
    cli_check(worst_gap < 1e-6, "part 2: the softmax is not the normalised kernel");
    plots->weights = TENSOR_STACK(drawn[0], drawn[1]);   /* (2, m, n) */
    TENSOR_FREE(drawn[0], drawn[1]);
}

/* The drawn widths' weights in strips of x, with how many points each strip holds */
static void draw_strips(const ToyData *data, const Tensor *weights)
{
    const int n = data->x_train->shape[0];
    printf("A query x takes weight from the points x_i near it. The drawings sum each\n"
           "query's weights over strips of x, 0.5 wide. Points per strip:");
    int counts[BINS] = {0};
    for (int j = 0; j < n; j++)
        counts[strip_of(data->x_train->data[j])]++;
    for (int b = 0; b < BINS; b++)
        printf(" %d", counts[b]);
    printf(".\nNo mask here: a dot is a weight that underflowed to 0 in float32.\n");
    for (int k = 0; k < 2; k++) {
        Tensor *one = tensor_select(weights, 0, k);   /* (m, n) */
        Tensor *strips = binned(data, one);
        char title[128];
        snprintf(title, sizeof title, "sigma = %g: x = 0, 0.5, ..., 4.5 down, strips [0, 0.5), "
                 "..., [4.5, 5) across", (double)SIGMAS[k ? DRAWN_WIDE : DRAWN_NARROW]);
        heatmap_terminal(stdout, strips, title);
        TENSOR_FREE(one, strips);
    }
}

static KernelPlots part2_kernel_regression(Rng *rng, const Options *opt)
{
    const int n = opt->num_points;
    printf("Part 2. Nadaraya-Watson: attention pooling with a Gaussian kernel\n\n");
    printf("d2l's toy data: %d points x_i sorted uniform on [0, 5),\n"
           "y_i = 2 sin(x_i) + x_i^0.8 + noise ~ normal(0, %g); the fit is read at\n"
           "x = 0, %g, ..., %g and compared with f(x) = 2 sin(x) + x^0.8 there.\n\n", n,
           (double)opt->noise, 5.0 / n, 5.0 - 5.0 / n);
    ToyData data = toy_data(rng, n, opt->noise);
    KernelPlots plots = {NULL, data.x_val, NULL};
    fit_table(&data, &plots);
    draw_strips(&data, plots.weights);
    TENSOR_FREE(data.x_train, data.y_train, data.y_val);
    return plots;
}

/* ---- main ------------------------------------------------------------------ */

static int write_plots(const char *dir, Tensor *check_weights, const KernelPlots *kernel)
{
    const char *const check_title[1] = {"valid_lens = [2, 6]"};
    const char *const kernel_titles[2] = {"sigma = 0.2", "sigma = 1"};
    const char *const curves[1 + NUM_SIGMAS] = {"f(x)", "sigma = 0.1", "sigma = 0.2",
                                                "sigma = 0.5", "sigma = 1", "sigma = 2"};
    Tensor *check_panel = tensor_reshape(check_weights, SHAPE(2, 10));
    int status = plot_heatmaps_titled(dir, "additive_check", "additive attention on d2l's "
                                      "check", check_panel, "keys", "sequence", check_title);
    if (status == 0)
        status = plot_heatmaps_titled(dir, "kernel_weights", "Nadaraya-Watson weights",
                                      kernel->weights, "training points x_i, sorted",
                                      "queries x", kernel_titles);
    if (status == 0)
        status = plot_curves(dir, "kernel_fit", kernel->x_val, kernel->fits, "x", "y", curves,
                             false);
    if (status != 0)
        return status;
    printf("wrote additive_check, kernel_weights and kernel_fit (.dat and .gp) into %s\n", dir);
    return 0;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    Tensor *check_weights = part1_additive(&rng);   /* d2l's check, additive scores */
    KernelPlots kernel = part2_kernel_regression(&rng, &opt);   /* the kernel view */

    int status = opt.plot_dir ? write_plots(opt.plot_dir, check_weights, &kernel) : 0;
    TENSOR_FREE(check_weights, kernel.weights, kernel.x_val, kernel.fits);
    const int check_status = cli_checks_status();
    return status != 0 ? status : check_status;
}
