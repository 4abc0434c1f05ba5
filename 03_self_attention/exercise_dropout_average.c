/*
 * exercise_dropout_average - a worked solution to chapter 03's exercise 2.
 *
 * In training mode dropout zeroes weights and scales the survivors by
 * 1 / (1 - p). One draw has rows that do not sum to 1; the claim is that
 * the average over many draws is the evaluation weights. Average the
 * training-mode weights of the same self-attention over more and more
 * draws and watch the gap shrink like 1 / sqrt(draws).
 *
 * Legend: n = number of tokens, d = token size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "io/cli.h"
#include "random.h"
#include "tensor.h"

#define PROG "exercise_dropout_average"

static void usage(void)
{
    printf("usage: %s [--dropout P] [--draws N] [--seed N] [--help]\n"
           "\n"
           "Average dropout's training-mode attention weights over many draws and\n"
           "compare with the evaluation weights.\n"
           "\n"
           "  --dropout P  dropout probability, 0 <= P < 1 (default 0.5)\n"
           "  --draws N    largest number of draws, 10 to 1000000 (default 100000)\n"
           "  --seed N     seed for the tokens and the coin flips (default 0)\n"
           "  --help       this text\n", PROG);
}

int main(int argc, char **argv)
{
    double p = 0.5;
    long max_draws = 100000;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--help")) {
            usage();
            return 0;
        } else if (cli_is(argv[i], "--dropout")) {
            const char *text = cli_value(PROG, argc, argv, &i);
            p = cli_double(PROG, "--dropout", text, 0.0, 1.0);
            /* dropout keeps p as a float, where 0.99999999 is already 1 */
            if ((float)p >= 1.0f)
                cli_fail(PROG, "--dropout must be below 1 (1 would drop every weight), got %s%s",
                         text, p < 1.0 ? ", which is 1 as a float" : "");
        } else if (cli_is(argv[i], "--draws")) {
            max_draws = cli_long(PROG, "--draws", cli_value(PROG, argc, argv, &i), 10, 1000000);
        } else if (cli_is(argv[i], "--seed")) {
            seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
        } else {
            cli_unknown(PROG, argv[i]);
        }
    }
    enum { N = 4, D = 3 };
    Rng rng = rng_new(seed);
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, N, D));
    Tensor *eval_weights = NULL;
    Tensor *eval_out = dot_product_attention(x, x, x, NULL, NULL, &eval_weights);
    tensor_print_named("evaluation weights", eval_weights);

    Dropout dropout = {(float)p, true, &rng};
    double *sum = calloc(eval_weights->size, sizeof(double));
    double *sum_out = calloc(eval_out->size, sizeof(double));
    if (sum == NULL || sum_out == NULL)
        die(PROG, "out of memory");
    printf("\ndropout p = %g; the gap is the largest |mean - evaluation| over all entries\n\n", p);
    printf("    draws   gap in weights   gap in output   gap * sqrt(draws)\n");
    long next_report = 10, draws = 0;
    while (draws < max_draws) {
        Tensor *weights = NULL;
        Tensor *out = dot_product_attention(x, x, x, NULL, &dropout, &weights);
        for (size_t i = 0; i < weights->size; i++)
            sum[i] += weights->data[i];
        for (size_t i = 0; i < out->size; i++)
            sum_out[i] += out->data[i];
        tensor_free(weights);
        tensor_free(out);
        draws++;
        if (draws == next_report || draws == max_draws) {
            double gap = 0.0, gap_out = 0.0;
            for (size_t i = 0; i < eval_weights->size; i++)
                gap = fmax(gap, fabs(sum[i] / draws - eval_weights->data[i]));
            for (size_t i = 0; i < eval_out->size; i++)
                gap_out = fmax(gap_out, fabs(sum_out[i] / draws - eval_out->data[i]));
            printf("  %7ld   %14.5f   %13.5f   %17.3f\n", draws, gap, gap_out,
                   gap * sqrt((double)draws));
            next_report *= 10;
        }
    }
    printf("\nThe gap shrinks like 1 / sqrt(draws) (the last column stays about level):\n"
           "dropout with 1 / (1 - p) scaling changes the weights only by noise whose\n"
           "mean is 0, so evaluation can use the weights as they are. Without the\n"
           "scaling the mean would be (1 - p) times the weights, and the gap would\n"
           "stop shrinking at about p times the largest weight.\n");
    tensor_free(x);
    tensor_free(eval_weights);
    tensor_free(eval_out);
    free(sum);
    free(sum_out);
    return 0;
}
