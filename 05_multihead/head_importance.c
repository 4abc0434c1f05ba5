/*
 * head_importance - an experiment for d2l's exercise 2: how important is
 * each head, and which heads can be pruned?
 *
 * Legend: N = held-out sequences, T = tokens per sequence, H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * The layer's output is W_o applied to the heads side by side, so it is a
 * sum of one term per head:
 *
 *     y = concat(head_0, ..., head_{H-1}) W_o^T + b_o
 *       = sum_h head_h W_o[:, h*d:(h+1)*d]^T + b_o
 *
 * Masking head h (as if it were pruned) means setting its d columns of W_o
 * to zero. The experiment:
 *   1. measure each head's importance on held-out data as the relative
 *      change of the output when that head alone is masked;
 *   2. check that the ranking is useful: prune k heads least important
 *      first, and compare the error with pruning in index order and most
 *      important first;
 *   3. compare with a proxy that needs no data: the size of the head's
 *      weights, ||W_v rows of h|| * ||W_o columns of h||.
 *
 * An untrained layer's heads all matter about equally, so to stand in for a
 * trained model the program scales each head's columns of W_o by a gain,
 * two of them tiny; a good importance measure must find those two.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "head_importance";

enum { MAX_HEADS = 16 };

static void usage(void)
{
    printf("usage: %s [options]\n"
           "\n"
           "d2l's exercise 2: measure how important each head of a multi-head attention\n"
           "layer is by masking it on held-out data, and check the ranking by pruning.\n"
           "\n"
           "options:\n"
           "  --gains G      comma-separated scale of each head's columns of W_o, one per\n"
           "                 head, 2 to %d heads, each 0 to 10\n"
           "                 (default 1,0.02,1.6,0.4,1.2,0.1,2,0.7)\n"
           "  --head-size d  hiddens per head, 1 to 64 (default 8)\n"
           "  --sequences N  held-out sequences, 1 to 256 (default 16)\n"
           "  --tokens T     tokens per sequence, 1 to 64 (default 10)\n"
           "  --seed N       seed for the parameters and the data (default 0)\n"
           "  --help         this text\n", PROG, MAX_HEADS);
}

/* ||a - b|| / ||b|| over all elements (Frobenius norms). */
static double relative_error(const Tensor *a, const Tensor *b)
{
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < a->size; i++) {
        double e = (double)a->data[i] - b->data[i];
        diff += e * e;
        ref += (double)b->data[i] * b->data[i];
    }
    return sqrt(diff / ref);
}

/* The layer's output with the heads whose keep[h] is false masked. */
static Tensor *masked_output(MultiHeadAttention *layer, const Tensor *x, const bool *keep)
{
    const int D = layer->num_hiddens, H = layer->num_heads, d = D / H;
    Tensor *saved = tensor_copy(layer->W_o);
    for (int h = 0; h < H; h++)
        if (!keep[h])
            for (int i = 0; i < D; i++)             /* W_o (D, D): row i, columns of head h */
                for (int c = h * d; c < (h + 1) * d; c++)
                    AT2(layer->W_o, i, c) = 0.0f;
    Tensor *y = multihead_forward(layer, x, x, x, NULL, false, NULL, NULL);
    memcpy(layer->W_o->data, saved->data, saved->size * sizeof(float));
    tensor_free(saved);
    return y;
}

/* Error of pruning the first k heads of order, for k = 0..H. */
static void pruning_curve(MultiHeadAttention *layer, const Tensor *x, const Tensor *y,
                          const int *order, double *errors)
{
    const int H = layer->num_heads;
    bool keep[MAX_HEADS];
    for (int h = 0; h < H; h++)
        keep[h] = true;
    errors[0] = 0.0;
    for (int k = 1; k <= H; k++) {
        keep[order[k - 1]] = false;
        Tensor *pruned = masked_output(layer, x, keep);
        errors[k] = relative_error(pruned, y);
        tensor_free(pruned);
    }
}

/* order[0..n) = indices of values sorted ascending (a stable insertion sort). */
static void argsort(const double *values, int *order, int n)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && values[order[j]] < values[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
}

static void print_order(const char *label, const int *order, int n)
{
    printf("%s", label);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", order[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    double gains[MAX_HEADS] = {1, 0.02, 1.6, 0.4, 1.2, 0.1, 2, 0.7};
    int H = 8, d = 8, N = 16, T = 10;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is(arg, "--gains")) {
            const char *text = cli_value(PROG, argc, argv, &i);
            /* parsed as a list of reals: split on commas, check each */
            char buf[512];
            if (strlen(text) >= sizeof buf)
                cli_fail(PROG, "--gains is too long");
            strcpy(buf, text);
            H = 0;
            for (char *p = strtok(buf, ","); p; p = strtok(NULL, ",")) {
                if (H == MAX_HEADS)
                    cli_fail(PROG, "--gains takes at most %d values, got '%s'", MAX_HEADS, text);
                gains[H++] = cli_double(PROG, "--gains", p, 0.0, 10.0);
            }
            if (H < 2)
                cli_fail(PROG, "--gains needs at least 2 heads, got '%s'", text);
            /* every importance is divided by ||y||: all-zero gains make y zero */
            bool any = false;
            for (int h = 0; h < H; h++)
                any = any || (float)gains[h] != 0.0f;
            if (!any)
                cli_fail(PROG, "--gains needs a gain above 0 as a float: with all zero the "
                         "output is 0 and no importance can be measured, got '%s'", text);
        } else if (cli_is(arg, "--head-size"))
            d = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 64);
        else if (cli_is(arg, "--sequences"))
            N = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 256);
        else if (cli_is(arg, "--tokens"))
            T = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 64);
        else if (cli_is(arg, "--seed"))
            seed = cli_u64(PROG, arg, cli_value(PROG, argc, argv, &i));
        else if (cli_is(arg, "--help")) {
            usage();
            return 0;
        } else
            cli_unknown(PROG, arg);
    }
    const int D = H * d;

    Rng rng = rng_new(seed);
    MultiHeadAttention *layer = multihead_new(D, D, D, D, H, 0.0f, false, &rng);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < D; i++)
            for (int c = h * d; c < (h + 1) * d; c++)
                AT2(layer->W_o, i, c) *= (float)gains[h];
    Tensor *x = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(N, T, D));
    Tensor *y = multihead_forward(layer, x, x, x, NULL, false, NULL, NULL);
    if (tensor_max_abs(y) == 0.0f) {
        /* gains so small that W_o rounds to zero in float */
        tensor_free(x);
        tensor_free(y);
        multihead_free(layer);
        cli_fail(PROG, "--gains are too small: the output is 0 in float, so no importance "
                 "can be measured");
    }

    printf("Head importance for pruning: %d heads of size %d (num_hiddens %d), seed %llu.\n"
           "Standing in for a trained model, head h's columns of W_o are scaled by\n"
           "gain = [", H, d, D, (unsigned long long)seed);
    for (int h = 0; h < H; h++)
        printf("%s%.2f", h ? ", " : "", gains[h]);
    printf("].\nHeld-out data: %d sequences of %d tokens ~ normal(0, 1), self-attention.\n\n", N, T);

    // step 1: mask one head at a time
    double importance[MAX_HEADS] = {0}, proxy[MAX_HEADS] = {0};
    bool keep[MAX_HEADS];
    for (int h = 0; h < H; h++)
        keep[h] = true;
    for (int h = 0; h < H; h++) {
        keep[h] = false;
        Tensor *without = masked_output(layer, x, keep);
        importance[h] = relative_error(without, y);
        tensor_free(without);
        keep[h] = true;
        /* the data-free proxy: how large the path through head h can be */
        double v_norm = 0.0, o_norm = 0.0;
        for (int r = h * d; r < (h + 1) * d; r++)
            for (int c = 0; c < D; c++)
                v_norm += (double)AT2(layer->W_v, r, c) * AT2(layer->W_v, r, c);
        for (int i = 0; i < D; i++)
            for (int c = h * d; c < (h + 1) * d; c++)
                o_norm += (double)AT2(layer->W_o, i, c) * AT2(layer->W_o, i, c);
        proxy[h] = sqrt(v_norm) * sqrt(o_norm);
    }
    int least_first[MAX_HEADS], proxy_order[MAX_HEADS], rank[MAX_HEADS];
    argsort(importance, least_first, H);
    argsort(proxy, proxy_order, H);
    for (int i = 0; i < H; i++)
        rank[least_first[i]] = i + 1;
    printf("1. importance of head h = ||y - y without head h|| / ||y|| on the held-out data\n\n"
           "   head   gain   importance   weight proxy   rank (1 = least important)\n");
    for (int h = 0; h < H; h++)
        printf("   %4d   %4.2f   %10.4f   %12.4f   %4d\n", h, gains[h], importance[h], proxy[h],
               rank[h]);
    print_order("\n   least important first:  ", least_first, H);
    print_order("   by the weight proxy:    ", proxy_order, H);

    // step 2: does the ranking tell which heads can go?
    int index_order[MAX_HEADS], most_first[MAX_HEADS];
    for (int h = 0; h < H; h++) {
        index_order[h] = h;
        most_first[h] = least_first[H - 1 - h];
    }
    double by_least[MAX_HEADS + 1], by_index[MAX_HEADS + 1], by_most[MAX_HEADS + 1];
    pruning_curve(layer, x, y, least_first, by_least);
    pruning_curve(layer, x, y, index_order, by_index);
    pruning_curve(layer, x, y, most_first, by_most);
    printf("\n2. prune k heads; relative output error ||y - y pruned|| / ||y||\n\n"
           "    k   weights left   least important first   in index order   most important first\n");
    for (int k = 0; k <= H; k++) {
        /* W_q, W_k, W_v lose d rows and W_o loses d columns per pruned head */
        double left = (double)(4 * D * (D - k * d)) / (4.0 * D * D);
        printf("   %2d   %11.1f%%   %21.4f   %14.4f   %20.4f\n", k, 100.0 * left, by_least[k],
               by_index[k], by_most[k]);
    }
    int best_k = 0;
    while (best_k < H && by_least[best_k + 1] <= 0.05)
        best_k++;
    printf("\nPruning the %d least important heads keeps the output within 5%% and removes\n"
           "%.1f%% of the projection weights and of the per-head attention work.\n",
           best_k, 100.0 * best_k / H);

    tensor_free(x);
    tensor_free(y);
    multihead_free(layer);
    return 0;
}
