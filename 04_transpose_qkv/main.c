/*
 * 04_transpose_qkv - splitting the hiddens into heads and merging them back.
 *
 * Legend: B = batch_size, T = num_queries (tokens), H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * The program fills X (B, T, D) with numbers that spell their own address,
 * X[b, t, j] = 1000*b + 100*t + j, and follows them through d2l's
 * transpose_qkv one step at a time: reshape (B, T, H, d), permute
 * (B, H, T, d), reshape (B*H, T, d). Then it checks common/heads.c against
 * those steps, undoes the split, shows the classic mistake (a reshape
 * straight to (B, H, T, d)), and repeats valid_lens over the heads the right
 * way (repeat_interleave) and the wrong way (tiling).
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

static void usage(void)
{
    printf("usage: %s [options]\n"
           "\n"
           "Follows every element of X (batch, queries, hiddens) through the head split\n"
           "(B, T, D) -> (B, T, H, d) -> (B, H, T, d) -> (B*H, T, d) and back.\n"
           "X[b, t, j] = 1000*b + 100*t + j, so 1205 is sequence 1, token 2, hidden 5.\n"
           "\n"
           "options:\n"
           "  --batch B         sequences, 1 to 9 (default 2)\n"
           "  --queries T       tokens per sequence, 1 to 9 (default 3)\n"
           "  --hiddens D       num_hiddens, 1 to 99 (default 6)\n"
           "  --heads H         num_heads, must divide D (default 2)\n"
           "  --valid-lens L    B comma-separated lengths from 0 to T for the mask demo\n"
           "                    (default: spread from 1 to T, \"1,3\" for the defaults)\n"
           "  --seed N          seed of the random tensor used for the round trip (default 0)\n"
           "  --help            this text\n", PROG);
}

/* ---- index-coded tensors ------------------------------------------------- */

/* Print x like PyTorch prints an integer tensor (x.long()): every number
 * right-aligned to the widest, nested brackets, a blank line between
 * matrices. The codes are whole numbers, so this shows them without the
 * ".0000" that would hide the digits that matter. */
static void print_dim(const Tensor *x, int dim, size_t offset, int indent, int width)
{
    size_t stride = 1;
    for (int i = dim + 1; i < x->ndim; i++)
        stride *= (size_t)x->shape[i];
    putchar('[');
    for (int i = 0; i < x->shape[dim]; i++) {
        if (dim == x->ndim - 1) {
            printf("%s%*d", i ? ", " : "", width, (int)lrintf(x->data[offset + (size_t)i]));
            continue;
        }
        if (i > 0) {
            putchar(',');
            for (int k = 0; k < x->ndim - dim - 1; k++)
                putchar('\n');
            printf("%*s", indent + 1, "");
        }
        print_dim(x, dim + 1, offset + (size_t)i * stride, indent + 1, width);
    }
    putchar(']');
}

static void print_codes(const char *name, const Tensor *x)
{
    char buf[16];
    int width = 1;
    for (size_t i = 0; i < x->size; i++) {
        int w = snprintf(buf, sizeof buf, "%d", (int)lrintf(x->data[i]));
        if (w > width)
            width = w;
    }
    printf("%s = tensor(", name);
    print_dim(x, 0, 0, (int)strlen(name) + (int)strlen(" = tensor("), width);
    printf(")\n");
}

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

/* Describe what position t of matrix r holds: "token 1, hiddens 3..5". */
static void describe_row(const Tensor *split, int r, int t)
{
    const int d = split->shape[2];
    Address first = decode(AT3(split, r, t, 0));
    Address last = decode(AT3(split, r, t, d - 1));
    if (first.b != last.b || first.t != last.t)
        printf("sequence %d token %d hidden %d .. sequence %d token %d hidden %d",
               first.b, first.t, first.j, last.b, last.t, last.j);
    else if (d == 1)
        printf("sequence %d, token %d, hidden %d", first.b, first.t, first.j);
    else
        printf("sequence %d, token %d, hiddens %d..%d", first.b, first.t, first.j, last.j);
}

/* ---- the story ------------------------------------------------------------ */

static void show_steps(const Tensor *X, int H)
{
    const int B = X->shape[0], T = X->shape[1], D = X->shape[2], d = D / H;
    char shape[80];

    printf("\n---- step by step, as d2l's transpose_qkv writes it ----\n\n");
    Tensor *step = tensor_copy(X);
    tensor_reshape(step, SHAPE(B, T, H, d));
    printf("step 1: X.reshape(%d, %d, %d, %d)  (B, T, H, d)\n"
           "        a view: the memory is untouched, each token's row is cut into %d pieces of %d\n",
           B, T, H, d, H, d);
    print_codes("X", step);

    Tensor *permuted = tensor_permute(step, (const int[]){0, 2, 1, 3});
    printf("\nstep 2: .permute(0, 2, 1, 3) -> %s  (B, H, T, d)\n"
           "        the only step that moves data: the head index jumps in front of the token\n",
           shape_str(shape, sizeof shape, permuted->ndim, permuted->shape));
    print_codes("X", permuted);

    tensor_reshape(permuted, SHAPE(B * H, T, d));
    printf("\nstep 3: .reshape(%d, %d, %d)  (B*H, T, d)\n"
           "        matrix b*H + h is head h of sequence b, a batch of its own for attention\n",
           B * H, T, d);
    print_codes("X", permuted);
    for (int r = 0; r < B * H; r++) {
        printf("  matrix %d = sequence %d, head %d: ", r, r / H, r % H);
        if (d == 1)
            printf("hidden %d of every token\n", (r % H) * d);
        else
            printf("hiddens %d..%d of every token\n", (r % H) * d, (r % H) * d + d - 1);
    }

    Tensor *split = transpose_qkv(X, H);
    size_t equal = 0;
    for (size_t i = 0; i < split->size; i++)
        equal += split->data[i] == permuted->data[i];
    printf("\ntranspose_qkv(X, %d) from common/heads.c gives %s: %zu of %zu elements equal "
           "to step 3, %d misplaced.\n",
           H, shape_str(shape, sizeof shape, split->ndim, split->shape), equal, split->size,
           count_misplaced(split, H));
    tensor_free(step);
    tensor_free(permuted);
    tensor_free(split);
}

static void show_round_trip(const Tensor *X, int H, uint64_t seed)
{
    printf("\n---- transpose_output undoes it ----\n\n");
    Tensor *split = transpose_qkv(X, H);
    Tensor *back = transpose_output(split, H);
    printf("transpose_output(transpose_qkv(X, %d), %d) == X: largest difference %g over %zu "
           "elements\n", H, H, (double)tensor_max_abs_diff(back, X), X->size);
    tensor_free(split);
    tensor_free(back);

    /* Moving numbers never rounds them, so the round trip is exact on any
     * values, not only on whole numbers. */
    Rng rng = rng_new(seed);
    const int D = X->shape[2] * 4;
    Tensor *noise = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(3, 5, D));
    split = transpose_qkv(noise, 4 * H);
    back = transpose_output(split, 4 * H);
    printf("the same on normal noise (3, 5, %d) with %d heads (seed %llu): largest "
           "difference %g\n", D, 4 * H, (unsigned long long)seed,
           (double)tensor_max_abs_diff(back, noise));
    tensor_free(noise);
    tensor_free(split);
    tensor_free(back);
}

static void show_mistake(const Tensor *X, int H)
{
    const int B = X->shape[0], T = X->shape[1], D = X->shape[2], d = D / H;
    printf("\n---- the classic mistake: X.reshape(%d, %d, %d, %d) without the permute ----\n\n",
           B, H, T, d);
    /* Same sizes as step 2, so every shape check passes; but a reshape only
     * regroups the memory in order, so "head 0" is simply the first T*d
     * numbers of the sequence, whatever token and hidden they belong to. */
    Tensor *wrong = tensor_copy(X);
    tensor_reshape(wrong, SHAPE(B * H, T, d));
    print_codes("X", wrong);
    printf("  matrix 0 should be sequence 0, head 0 (hiddens 0..%d of tokens 0..%d); it holds\n",
           d - 1, T - 1);
    for (int t = 0; t < T; t++) {
        Address a = decode(AT3(wrong, 0, t, 0));
        bool right = a.t == t && a.j == 0 && decode(AT3(wrong, 0, t, d - 1)).t == t;
        printf("    position %d: ", t);
        describe_row(wrong, 0, t);
        printf("%s\n", right ? "" : "   <- wrong");
    }
    int misplaced = count_misplaced(wrong, H);
    printf("  %d of %zu elements are in the wrong place.", misplaced, wrong->size);
    if (misplaced > 0)
        printf(" Every shape is right, so nothing\n"
               "  complains: each head just attends over pieces of the wrong tokens.\n");
    else
        printf(" With H = 1 or T = 1 the permute swaps a\n"
               "  dimension of size 1, which moves nothing, so the mistake cannot show.\n");
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

static void show_valid_lens(int B, int T, int H, const int *lens)
{
    printf("\n---- valid_lens over the heads ----\n\n");
    ValidLens *valid_lens = valid_lens_1d(lens, B);
    valid_lens_print_named("valid_lens", valid_lens);
    printf("  one length per sequence; after the split there are B*H = %d matrices\n\n", B * H);

    ValidLens *interleaved = valid_lens_repeat_interleave(valid_lens, H);
    int *tiled_lens = checked_malloc(PROG, (size_t)B * H, sizeof(int));
    for (int r = 0; r < B * H; r++)
        tiled_lens[r] = lens[r % B];   /* valid_lens.repeat(H): [l0, l1, l0, l1, ...] */
    ValidLens *tiled = valid_lens_1d(tiled_lens, B * H);
    printf("right: torch.repeat_interleave(valid_lens, %d), matrix b*H + h gets sequence b's length\n", H);
    valid_lens_print_named("interleaved", interleaved);
    printf("wrong: valid_lens.repeat(%d), a tiling, matrix r gets sequence (r mod B)'s length\n", H);
    valid_lens_print_named("tiled", tiled);

    int wrong_rows = 0;
    for (int r = 0; r < B * H; r++)
        if (tiled->data[r] != interleaved->data[r]) {
            if (wrong_rows == 0)
                printf("\n");
            printf("  matrix %d (sequence %d, head %d) gets length %d from the tiling, "
                   "%d is its own\n", r, r / H, r % H, tiled->data[r], interleaved->data[r]);
            wrong_rows++;
        }
    if (wrong_rows == 0)
        printf("\n  here both agree: that happens when B = 1, H = 1 or every length is equal,\n"
               "  which is why the bug can hide in a test with all-equal lengths.\n");

    /* Equal scores make the weights easy to read: 1/len on each real key. */
    Tensor *scores = tensor_zeros(SHAPE(B * H, T, T));
    Tensor *right = masked_softmax(scores, interleaved);
    Tensor *wrong = masked_softmax(scores, tiled);
    printf("\nWith equal scores (B*H, T, K) = (%d, %d, %d), query 0 of each matrix gets\n",
           B * H, T, T);
    for (int r = 0; r < B * H; r++) {
        printf("  matrix %d  repeat_interleave [", r);
        for (int j = 0; j < T; j++)
            printf("%s%.4f", j ? ", " : "", (double)AT3(right, r, 0, j));
        printf("]   tiling [");
        for (int j = 0; j < T; j++)
            printf("%s%.4f", j ? ", " : "", (double)AT3(wrong, r, 0, j));
        printf("]\n");
    }
    printf("Weight on keys past the sequence's own length, summed over all %d rows:\n"
           "  repeat_interleave %.4f, tiling %.4f\n", B * H * T,
           weight_on_padding(right, lens, H), weight_on_padding(wrong, lens, H));

    /* 2-D valid_lens (B, T) repeat the same way, one row per query. The
     * lengths are made up so that every row differs. */
    int *lens_2d = checked_malloc(PROG, (size_t)B * T, sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            lens_2d[b * T + t] = T - (b + t) % T;
    ValidLens *valid_lens_2 = valid_lens_2d(lens_2d, B, T);
    ValidLens *interleaved_2 = valid_lens_repeat_interleave(valid_lens_2, H);
    printf("\n2-D valid_lens (B, T) -> (B*H, T): the rows of sequence b, %d times in a row\n", H);
    valid_lens_print_named("valid_lens", valid_lens_2);
    valid_lens_print_named("repeat_interleave", interleaved_2);

    free(lens_2d);
    free(tiled_lens);
    valid_lens_free(valid_lens_2);
    valid_lens_free(interleaved_2);
    valid_lens_free(valid_lens);
    valid_lens_free(interleaved);
    valid_lens_free(tiled);
    tensor_free(scores);
    tensor_free(right);
    tensor_free(wrong);
}

int main(int argc, char **argv)
{
    int B = 2, T = 3, D = 6, H = 2;
    uint64_t seed = 0;
    long lens_arg[9];
    int lens_count = 0;
    const char *lens_text = NULL;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is(arg, "--batch"))
            B = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 9);
        else if (cli_is(arg, "--queries"))
            T = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 9);
        else if (cli_is(arg, "--hiddens"))
            D = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 99);
        else if (cli_is(arg, "--heads"))
            H = (int)cli_long(PROG, arg, cli_value(PROG, argc, argv, &i), 1, 99);
        else if (cli_is(arg, "--valid-lens"))
            lens_text = cli_value(PROG, argc, argv, &i);
        else if (cli_is(arg, "--seed"))
            seed = cli_u64(PROG, arg, cli_value(PROG, argc, argv, &i));
        else if (cli_is(arg, "--help")) {
            usage();
            return 0;
        } else
            cli_unknown(PROG, arg);
    }
    if (D % H != 0)
        cli_fail(PROG, "--hiddens %d does not divide by --heads %d: every head needs the "
                 "same size", D, H);
    int lens[9];
    if (lens_text != NULL) {
        lens_count = cli_long_list(PROG, "--valid-lens", lens_text, 0, T, lens_arg, 9);
        if (lens_count != B)
            cli_fail(PROG, "--valid-lens needs %d lengths (one per sequence), got %d", B,
                     lens_count);
        for (int b = 0; b < B; b++)
            lens[b] = (int)lens_arg[b];
    } else {
        for (int b = 0; b < B; b++)
            lens[b] = B == 1 ? T : 1 + b * (T - 1) / (B - 1);
    }

    const int d = D / H;
    /* one element to read the code on: sequence 1, token 2, hidden 5, or
     * the last of each when the sizes are smaller */
    const int eb = B > 1 ? 1 : 0, et = T > 2 ? 2 : T - 1, ej = D > 5 ? 5 : D - 1;
    printf("Splitting num_hiddens into heads: B = %d sequences, T = %d tokens, D = %d hiddens,\n"
           "H = %d heads of d = D / H = %d. Every element holds its own address:\n"
           "X[b, t, j] = 1000*b + 100*t + j, so %d is sequence %d, token %d, hidden %d.\n\n",
           B, T, D, H, d, 1000 * eb + 100 * et + ej, eb, et, ej);
    Tensor *X = tensor_zeros(SHAPE(B, T, D));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                AT3(X, b, t, j) = (float)(1000 * b + 100 * t + j);
    print_codes("X", X);

    show_steps(X, H);
    show_round_trip(X, H, seed);
    show_mistake(X, H);
    show_valid_lens(B, T, H, lens);
    tensor_free(X);
    return 0;
}
