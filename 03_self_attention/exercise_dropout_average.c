/*
 * exercise_dropout_average - a worked solution to chapter 03's exercise 2.
 *
 * In training mode dropout zeroes each weight with probability p and scales
 * the survivors by 1 / (1 - p). One draw has rows that do not sum to 1; the
 * claim is that the mean over many draws is the evaluation weights, with a
 * gap that shrinks like 1 / sqrt(draws).
 *
 * What is measured: one long run of draws is cut into independent groups of
 * N draws (N = 1, 10, 100, ...). The gap of a group is mean - evaluation,
 * entry by entry; the table gives the root mean square of those gaps over
 * every entry of every group. A single dropped weight w is w / (1 - p) with
 * probability 1 - p and 0 otherwise: its variance is w^2 p / (1 - p). So the
 * RMS gap of a mean of N draws is sqrt(p / (1 - p)) * rms(w) / sqrt(N), and
 * gap * sqrt(N) should stay at sqrt(p / (1 - p)) * rms(w) for every N.
 *
 * Legend: n = number of tokens, d = token size, N = draws in one mean.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "io/cli.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "exercise_dropout_average";

enum { MAX_SIZES = 8, MIN_GROUPS = 10 };

typedef struct {
    float dropout;
    int draws;
    uint64_t seed;
} Options;

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.dropout = 0.5f, .draws = 100000, .seed = 0};
    const CliOption options[] = {
        {"--dropout", CLI_FLOAT, &opt.dropout, CLI_DROPOUT_RANGE,
         .help = "dropout probability"},
        {"--draws", CLI_INT, &opt.draws, .min = 10, .max = 1000000, .metavar = "N",
         .help = "draws in all, cut into groups of 1, 10, 100, ..."},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for the tokens and the coin flips"},
    };
    *done = cli_parse(&(CliTable){PROG, "Average dropout's training-mode attention weights over groups of "
                                        "draws and\nmeasure how far the mean stays from the evaluation "
                                        "weights.",
                                  CLI_COUNT(options), options}, argc, argv);
    return opt;
}

/* Running sums for groups of `size` draws: the group being filled, and the
 * squared gaps of the groups already complete. */
typedef struct {
    long size;
    long groups;
    double *group_sum;      /* (n * n) */
    double squared_gaps;    /* summed over entries and complete groups */
} GroupSums;

/* weights (1, n, n) of one draw added to every group size; a group that
 * is full gives its squared gaps against eval (1, n, n) and starts again. */
static void add_draw(GroupSums *sums, int count, const Tensor *weights, const Tensor *eval,
                     long draw)
{
    for (int s = 0; s < count; s++) {
        GroupSums *g = &sums[s];
        for (size_t i = 0; i < weights->size; i++)
            g->group_sum[i] += weights->data[i];
        if (draw % g->size != 0)
            continue;
        for (size_t i = 0; i < weights->size; i++) {
            double gap = g->group_sum[i] / (double)g->size - eval->data[i];
            g->squared_gaps += gap * gap;
            g->group_sum[i] = 0.0;
        }
        g->groups++;
    }
}

/* The table, and its verdict computed from the numbers. */
static void report(const GroupSums *sums, int count, size_t entries, double p, double rms_w)
{
    const double predicted = sqrt(p / (1.0 - p)) * rms_w;
    double farthest = 0.0;   /* largest relative distance from the prediction */
    printf("  draws N   groups   RMS gap   gap * sqrt(N)\n");
    for (int s = 0; s < count; s++) {
        const GroupSums *g = &sums[s];
        double gap = sqrt(g->squared_gaps / ((double)g->groups * (double)entries));
        double scaled = gap * sqrt((double)g->size);
        printf("  %7ld  %7ld   %7.5f   %13.4f\n", g->size, g->groups, gap, scaled);
        if (predicted > 0.0)
            farthest = fmax(farthest, fabs(scaled / predicted - 1.0));
    }
    printf("\nPredicted gap * sqrt(N) = sqrt(p / (1 - p)) * rms(evaluation weights)\n"
           "                        = sqrt(%g / %g) * %.4f = %.4f\n", p, 1.0 - p, rms_w, predicted);
    if (predicted == 0.0)
        printf("With p = 0 nothing is dropped: every mean is the evaluation weights.\n");
    else
        printf("Every row is within %.0f%% of it: the gap shrinks like 1 / sqrt(N)%s.\n",
               100.0 * farthest + 0.5, farthest < 0.25 ? "" : " only roughly, at these sizes");
    printf("Without the 1 / (1 - p) the mean would be (1 - p) times the weights, and\n"
           "the RMS gap would stop shrinking at p * rms(evaluation weights) = %.4f.\n",
           p * rms_w);
}

int main(int argc, char **argv)
{
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    enum { N = 4, D = 3 };
    Rng rng = rng_new(opt.seed);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, N, D));
    Tensor *eval_weights = NULL;
    Tensor *eval_out = dot_product_attention(x, x, x, NULL, NULL, &eval_weights);
    tensor_print_named("evaluation weights", eval_weights);
    double rms_w = 0.0;
    for (size_t i = 0; i < eval_weights->size; i++)
        rms_w += (double)eval_weights->data[i] * eval_weights->data[i];
    rms_w = sqrt(rms_w / (double)eval_weights->size);

    /* group sizes 1, 10, 100, ... while at least MIN_GROUPS groups fit */
    GroupSums sums[MAX_SIZES];
    int count = 0;
    for (long size = 1; count < MAX_SIZES && size * MIN_GROUPS <= opt.draws; size *= 10)
        sums[count++] = (GroupSums){size, 0,
                                    checked_calloc(eval_weights->size, sizeof(double)), 0.0};
    printf("\ndropout p = %g, %d draws. The RMS gap is the root mean square of\n"
           "mean - evaluation over all %zu entries and every group of N draws.\n\n",
           (double)opt.dropout, opt.draws, eval_weights->size);

    Dropout dropout = {opt.dropout, true, &rng};
    for (long draw = 1; draw <= opt.draws; draw++) {
        Tensor *weights = NULL;
        Tensor *out = dot_product_attention(x, x, x, NULL, &dropout, &weights);
        add_draw(sums, count, weights, eval_weights, draw);
        TENSOR_FREE(weights, out);
    }
    report(sums, count, eval_weights->size, opt.dropout, rms_w);
    for (int s = 0; s < count; s++)
        free(sums[s].group_sum);
    TENSOR_FREE(x, eval_weights, eval_out);
    return 0;
}
