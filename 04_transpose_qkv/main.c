/*
 * 04_transpose_qkv - splitting the hiddens into heads and merging them back.
 *
 * Legend: B = batch_size, T = num_queries (tokens), H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * Part 1: X (B, T, D) holds numbers that spell their own address,
 *         X[b, t, j] = 1000*b + 100*t + j.
 * Part 2: d2l's transpose_qkv one step at a time: reshape (B, T, H, d),
 *         permute (B, H, T, d), reshape (B*H, T, d); common/heads.c
 *         checked against those steps.
 * Part 3: transpose_output undoes the split, exactly.
 * Part 4: the classic mistake, a reshape straight to (B, H, T, d).
 * Part 5: valid_lens repeated over the heads the right way
 *         (repeat_interleave) and the wrong way (tiling).
 *
 * The exit status is 1 when common/heads.c disagrees with the steps or the
 * round trip is not exact.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "heads.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "transpose_qkv";

/* Sizes stay below 10 so that every digit of an address code is one index. */
enum { MAX_SMALL = 9, MAX_HIDDENS = 99 };

typedef struct {
    int batch, num_queries, num_hiddens, num_heads;
    const char *valid_lens_text;   /* NULL: lengths spread from 1 to T */
    uint64_t seed;
} Options;

/* "hidden 3" or "hiddens 3..5" into buf */
static const char *span(char *buf, size_t len, const char *one, const char *many, int first,
                        int last)
{
    snprintf(buf, len, first == last ? "%s %d" : "%s %d..%d", first == last ? one : many, first,
             last);
    return buf;
}

/* ---- index-coded tensors ------------------------------------------------- */

/* Where a code came from: X[b, t, j] = 1000*b + 100*t + j. */
typedef struct { int b, t, j; } Address;

static Address decode(float code)
{
    int c = (int)lrintf(code);
    return (Address){c / 1000, (c / 100) % 10, c % 100};
}

/* Count the elements of a (B*H, T, d) split that are not where head h of
 * sequence b, token t, hidden h*d + i belongs. */
static int count_misplaced(const Tensor *split, int H)
{
    const int BH = split->shape[0], T = split->shape[1], d = split->shape[2];
    int misplaced = 0;
    for (int r = 0; r < BH; r++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < d; i++) {
                Address a = decode(AT3(split, r, t, i));
                if (a.b != r / H || a.t != t || a.j != (r % H) * d + i)
                    misplaced++;
            }
    return misplaced;
}

/* Describe what position t of matrix r holds: "token 1, hiddens 3..5".
 * Its d numbers never straddle two tokens, since d divides D. */
static void describe_row(const Tensor *split, int r, int t)
{
    const int d = split->shape[2];
    Address first = decode(AT3(split, r, t, 0)), last = decode(AT3(split, r, t, d - 1));
    char hiddens[40];
    printf("sequence %d, token %d, %s", first.b, first.t,
           span(hiddens, sizeof hiddens, "hidden", "hiddens", first.j, last.j));
}

/* ---- the parts -------------------------------------------------------------- */

/* Part 1: X (B, T, D) with X[b, t, j] = 1000*b + 100*t + j. */
static Tensor *part1_addresses(int B, int T, int D, int H)
{
    const int d = D / H;
    /* one element to read the code on: sequence 1, token 2, hidden 5, or
     * the last of each when the sizes are smaller */
    const int eb = B > 1 ? 1 : 0, et = T > 2 ? 2 : T - 1, ej = D > 5 ? 5 : D - 1;
    printf("Part 1. Every element holds its own address\n\n");
    printf("Splitting num_hiddens into heads: B = %d %s, T = %d %s, D = %d %s,\n"
           "H = %d %s of d = D / H = %d. Every element holds its own address:\n"
           "X[b, t, j] = 1000*b + 100*t + j, so %d is sequence %d, token %d, hidden %d.\n\n",
           B, plural(B, "sequence", "sequences"), T, plural(T, "token", "tokens"), D,
           plural(D, "hidden", "hiddens"), H, plural(H, "head", "heads"), d,
           1000 * eb + 100 * et + ej, eb, et, ej);
    Tensor *X = tensor_zeros(SHAPE(B, T, D));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT3(X, b, t, j) = (float)(1000 * b + 100 * t + j);
    tensor_print_whole_named("X", X);
    return X;
}

/* Part 2: X (B, T, D) -> (B, T, H, d) -> (B, H, T, d) -> (B*H, T, d), as
 * d2l writes it; returns how many elements common/heads.c puts elsewhere. */
static int part2_step_by_step(const Tensor *X, int H)
{
    const int B = X->shape[0], T = X->shape[1], D = X->shape[2], d = D / H;
    char shape[80], hiddens[40];

    printf("\nPart 2. Step by step, as d2l's transpose_qkv writes it\n\n");
    Tensor *step = tensor_copy(X);
    tensor_reshape(step, SHAPE(B, T, H, d));
    printf("step 1: X.reshape(%d, %d, %d, %d)  (B, T, H, d)\n"
           "        a view: the memory is untouched, each token's row is cut into %d %s of %d\n",
           B, T, H, d, H, plural(H, "piece", "pieces"), d);
    tensor_print_whole_named("X", step);

    Tensor *permuted = tensor_permute(step, (const int[]){0, 2, 1, 3});
    printf("\nstep 2: .permute(0, 2, 1, 3) -> %s  (B, H, T, d)\n"
           "        the only step that moves data: the head index jumps in front of the token\n",
           shape_str(shape, sizeof shape, permuted->ndim, permuted->shape));
    tensor_print_whole_named("X", permuted);

    tensor_reshape(permuted, SHAPE(B * H, T, d));
    printf("\nstep 3: .reshape(%d, %d, %d)  (B*H, T, d)\n"
           "        matrix b*H + h is head h of sequence b, a batch of its own for attention\n",
           B * H, T, d);
    tensor_print_whole_named("X", permuted);
    for (int r = 0; r < B * H; r++)
        printf("  matrix %d = sequence %d, head %d: %s of every token\n", r, r / H, r % H,
               span(hiddens, sizeof hiddens, "hidden", "hiddens", (r % H) * d, (r % H) * d + d - 1));

    Tensor *split = transpose_qkv(X, H);
    size_t equal = 0;
    for (size_t i = 0; i < split->size; i++)
        equal += split->data[i] == permuted->data[i];
    const int misplaced = count_misplaced(split, H);
    printf("\ntranspose_qkv(X, %d) from common/heads.c gives %s: %zu of %zu %s equal "
           "to step 3, %d misplaced.\n",
           H, shape_str(shape, sizeof shape, split->ndim, split->shape), equal, split->size,
           plural((int)split->size, "element", "elements"), misplaced);
    TENSOR_FREE(step, permuted, split);
    return misplaced + (int)(X->size - equal);
}

/* x (B, T, D) -> largest |transpose_output(transpose_qkv(x, H), H) - x| */
static float round_trip_error(const Tensor *x, int H)
{
    Tensor *split = transpose_qkv(x, H);
    Tensor *back = transpose_output(split, H);
    float worst = tensor_max_abs_diff(back, x);
    TENSOR_FREE(split, back);
    return worst;
}

/* Part 3: transpose_output(transpose_qkv(X)) == X; returns the largest
 * difference, which must be 0. */
static float part3_round_trip(const Tensor *X, int H, uint64_t seed)
{
    printf("\nPart 3. transpose_output undoes it\n\n");
    const float worst = round_trip_error(X, H);
    printf("transpose_output(transpose_qkv(X, %d), %d) == X: largest difference %g over %zu %s\n",
           H, H, (double)worst, X->size, plural((int)X->size, "element", "elements"));

    /* Moving numbers never rounds them, so the round trip is exact on any
     * values, not only on whole numbers. */
    Rng rng = rng_new(seed);
    const int D = X->shape[2] * 4;
    Tensor *noise = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 5, D));
    const float worst_noise = round_trip_error(noise, 4 * H);
    printf("the same on normal noise (3, 5, %d) with %d heads (seed %llu): largest "
           "difference %g\n", D, 4 * H, (unsigned long long)seed, (double)worst_noise);
    tensor_free(noise);
    return fmaxf(worst, worst_noise);
}

/* Part 4: X.reshape(B*H, T, d) without the permute. */
static void part4_classic_mistake(const Tensor *X, int H)
{
    const int B = X->shape[0], T = X->shape[1], D = X->shape[2], d = D / H;
    char hiddens[40], tokens[40];
    printf("\nPart 4. The classic mistake: X.reshape(%d, %d, %d, %d) without the permute\n\n",
           B, H, T, d);
    /* Same sizes as step 2, so every shape check passes; but a reshape only
     * regroups the memory in order, so "head 0" is simply the first T*d
     * numbers of the sequence, whatever token and hidden they belong to. */
    Tensor *wrong = tensor_copy(X);
    tensor_reshape(wrong, SHAPE(B * H, T, d));
    tensor_print_whole_named("X", wrong);
    printf("  matrix 0 should be sequence 0, head 0 (%s of %s); it holds\n",
           span(hiddens, sizeof hiddens, "hidden", "hiddens", 0, d - 1),
           span(tokens, sizeof tokens, "token", "tokens", 0, T - 1));
    for (int t = 0; t < T; t++) {
        Address a = decode(AT3(wrong, 0, t, 0));
        bool right = a.t == t && a.j == 0;
        printf("    position %d: ", t);
        describe_row(wrong, 0, t);
        printf("%s\n", right ? "" : "   <- wrong");
    }
    int misplaced = count_misplaced(wrong, H);
    printf("  %d of %zu %s %s in the wrong place.", misplaced, wrong->size,
           plural((int)wrong->size, "element", "elements"),
           misplaced == 1 || wrong->size == 1 ? "is" : "are");
    if (misplaced > 0)
        printf(" Every shape is right, so nothing\n"
               "  complains: each head just attends over pieces of the wrong tokens.");
    printf("\n");
    tensor_free(wrong);
}

/* Weight that the rows of a masked softmax over equal scores put on keys
 * at or after their own sequence's real length. */
static double weight_on_padding(const Tensor *weights, const int *true_lens, int H)
{
    double total = 0.0;
    for (int r = 0; r < weights->shape[0]; r++)
        for (int t = 0; t < weights->shape[1]; t++)
            for (int j = true_lens[r / H]; j < weights->shape[2]; j++)
                total += AT3(weights, r, t, j);
    return total;
}

/* Part 5, first half: lens (B,) repeated over H heads, interleaved and
 * tiled; prints the matrices that the tiling gives another length. */
static void compare_repeats(const ValidLens *interleaved, const ValidLens *tiled, int H)
{
    const int BH = interleaved->shape[0];
    printf("right: torch.repeat_interleave(valid_lens, %d), matrix b*H + h gets sequence b's length\n", H);
    valid_lens_print_named("interleaved", interleaved);
    printf("wrong: valid_lens.repeat(%d), a tiling, matrix r gets sequence (r mod B)'s length\n", H);
    valid_lens_print_named("tiled", tiled);
    int wrong_rows = 0;
    printf("\n");
    for (int r = 0; r < BH; r++)
        if (tiled->data[r] != interleaved->data[r]) {
            printf("  matrix %d (sequence %d, head %d) gets length %d from the tiling, "
                   "%d is its own\n", r, r / H, r % H, tiled->data[r], interleaved->data[r]);
            wrong_rows++;
        }
    printf("  %d of %d %s another sequence's length from the tiling\n", wrong_rows, BH,
           BH == 1 ? "matrix gets" : "matrices get");
}

/* " [0.3333, 0.3333, 0.3333]" */
static void print_inline(const float *row, int n)
{
    for (int j = 0; j < n; j++)
        printf("%s%.4f", j ? ", " : " [", (double)row[j]);
    printf("]");
}

/* Part 5, second half: query 0's weights over equal scores (B*H, T, T)
 * under both repeats, and the weight that lands on padding. */
static void compare_weights(const ValidLens *interleaved, const ValidLens *tiled, int T, int H,
                            const int *lens)
{
    const int BH = interleaved->shape[0];
    /* Equal scores make the weights easy to read: 1/len on each real key. */
    Tensor *scores = tensor_zeros(SHAPE(BH, T, T));
    Tensor *right = masked_softmax(scores, interleaved);
    Tensor *wrong = masked_softmax(scores, tiled);
    printf("\nWith equal scores (B*H, T, n_k) = (%d, %d, %d), query 0 of each matrix gets\n",
           BH, T, T);
    for (int r = 0; r < BH; r++) {
        printf("  matrix %d  repeat_interleave", r);
        print_inline(&AT3(right, r, 0, 0), T);
        printf("   tiling");
        print_inline(&AT3(wrong, r, 0, 0), T);
        printf("\n");
    }
    printf("Weight on keys past the sequence's own length, summed over %s %d %s:\n"
           "  repeat_interleave %.4f, tiling %.4f\n", BH * T == 1 ? "the" : "all", BH * T,
           plural(BH * T, "row", "rows"),
           weight_on_padding(right, lens, H), weight_on_padding(wrong, lens, H));
    TENSOR_FREE(scores, right, wrong);
}

/* Part 5: valid_lens (B,) and (B, T) repeated over the heads. */
static void part5_valid_lens_over_heads(int B, int T, int H, const int *lens)
{
    printf("\nPart 5. valid_lens over the heads\n\n");
    ValidLens *valid_lens = valid_lens_1d(lens, B);
    valid_lens_print_named("valid_lens", valid_lens);
    printf("  one length per sequence; after the split there %s B*H = %d %s\n\n",
           B * H == 1 ? "is" : "are", B * H, plural(B * H, "matrix", "matrices"));

    ValidLens *interleaved = valid_lens_repeat_interleave(valid_lens, H);
    int *tiled_lens = checked_malloc((size_t)B * H, sizeof(int));
    for (int r = 0; r < B * H; r++)
        tiled_lens[r] = lens[r % B];   /* valid_lens.repeat(H): [l0, l1, l0, l1, ...] */
    ValidLens *tiled = valid_lens_1d(tiled_lens, B * H);
    compare_repeats(interleaved, tiled, H);
    compare_weights(interleaved, tiled, T, H, lens);

    /* 2-D valid_lens (B, T) repeat the same way, one row per query. The
     * lengths are made up so that every row differs. */
    int *lens_2d = checked_malloc((size_t)B * T, sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            lens_2d[b * T + t] = T - (b + t) % T;
    ValidLens *valid_lens_2 = valid_lens_2d(lens_2d, B, T);
    ValidLens *interleaved_2 = valid_lens_repeat_interleave(valid_lens_2, H);
    char times[32];
    snprintf(times, sizeof times, "%d times in a row", H);
    printf("\n2-D valid_lens (B, T) -> (B*H, T): the rows of sequence b, %s\n",
           H == 1 ? "once" : times);
    valid_lens_print_named("valid_lens", valid_lens_2);
    valid_lens_print_named("repeat_interleave", interleaved_2);

    ValidLens *all[] = {valid_lens, interleaved, tiled, valid_lens_2, interleaved_2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        valid_lens_free(all[i]);
    free(lens_2d);
    free(tiled_lens);
}

/* ---- options --------------------------------------------------------------- */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.batch = 2, .num_queries = 3, .num_hiddens = 6, .num_heads = 2, .seed = 0};
    const CliOption options[] = {
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = MAX_SMALL, .metavar = "B",
         .help = "sequences"},
        {"--queries", CLI_INT, &opt.num_queries, .min = 1, .max = MAX_SMALL, .metavar = "T",
         .help = "tokens per sequence"},
        {"--hiddens", CLI_INT, &opt.num_hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.num_heads, .min = 1, .max = MAX_HIDDENS, .metavar = "H",
         .help = "num_heads, must divide D", .splits = &opt.num_hiddens},
        {"--valid-lens", CLI_STRING, &opt.valid_lens_text, .metavar = "L",
         .help = "B comma-separated lengths from 0 to T for the mask demo",
         .default_text = "spread from 1 to T,\n\"1,3\" for the defaults"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed of the random tensor used for the round trip"},
    };
    *done = cli_parse(&(CliTable){PROG,
                                  "Follows every element of X (batch, queries, hiddens) through the head split\n"
                                  "(B, T, D) -> (B, T, H, d) -> (B, H, T, d) -> (B*H, T, d) and back.\n"
                                  "X[b, t, j] = 1000*b + 100*t + j, so 1205 is sequence 1, token 2, hidden 5.",
                                  CLI_COUNT(options), options}, argc, argv);
    return opt;
}

/* lens (B,): the lengths given, or spread from 1 to T. */
static void valid_lens_of(const Options *opt, int *lens)
{
    const int B = opt->batch, T = opt->num_queries;
    if (opt->valid_lens_text == NULL) {
        for (int b = 0; b < B; b++)
            lens[b] = B == 1 ? T : 1 + b * (T - 1) / (B - 1);
        return;
    }
    long given[MAX_SMALL];
    char err[CLI_ERR_LEN];
    const int count = cli_read_long_list("--valid-lens", opt->valid_lens_text, 0, T, given,
                                         MAX_SMALL, err, sizeof err);
    if (count < 0)
        cli_fail(PROG, "%s", err);
    if (count != B)
        cli_fail(PROG, "--valid-lens needs %d lengths (one per sequence), got %d", B, count);
    for (int b = 0; b < B; b++)
        lens[b] = (int)given[b];
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    int lens[MAX_SMALL];
    valid_lens_of(&opt, lens);
    const int H = opt.num_heads;

    Tensor *X = part1_addresses(opt.batch, opt.num_queries, opt.num_hiddens, H);
    int failures = part2_step_by_step(X, H);
    failures += part3_round_trip(X, H, opt.seed) != 0.0f;
    part4_classic_mistake(X, H);
    part5_valid_lens_over_heads(opt.batch, opt.num_queries, H, lens);
    tensor_free(X);
    if (failures != 0) {
        return fail("common/heads.c does not match the steps above");
    }
    return 0;
}
