/*
 * exercise_head_split - a worked solution to chapter 04's "Sequence first"
 * exercise, after the formulas of exercise 4.1 checked beside the mistake's.
 *
 * Legend: B = batch_size, T = num_queries (tokens), H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * Where does X[b, t, j] land after transpose_qkv, and where does
 * the classic mistake (a reshape straight to (B, H, T, d)) put it? Both
 * answers are formulas; this program checks them on every element of
 * several shapes, and counts how many elements the mistake moves.
 *
 * Sequence first: PyTorch's nn.MultiheadAttention works sequence first,
 * (T, B, D), unless batch_first=True. Split heads for that layout, directly
 * and the way PyTorch writes it (view as (T, B*H, d), then transpose), and
 * check both against transpose_qkv of the batch-first tensor.
 */
#include <stdio.h>
#include <stdlib.h>

#include "io/cli.h"
#include "heads.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "exercise_head_split";

/* Shapes (B, T, D, H) the checks run on: one head, one token, one hidden per
 * head, and the chapter's own example among them. */
static const int SHAPES[][4] = {
    {2, 3, 6, 2}, {1, 4, 8, 4}, {3, 5, 12, 3}, {2, 1, 6, 3}, {2, 4, 6, 1}, {4, 7, 20, 5},
};
enum { NUM_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* The right split: X[b, t, j] -> out[b*H + j / d, t, j % d].
 * Returns how many elements of x (B, T, D) break the formula. */
static int check_right_formula(const Tensor *x, const Tensor *split, int H)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2], d = D / H;
    int broken = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                broken += AT3(split, b * H + j / d, t, j % d) != AT3(x, b, t, j);
    return broken;
}

/* The mistake: a reshape keeps the order of memory, so inside
 * sequence b the element at offset f = t*D + j goes to head f / (T*d),
 * position (f / d) % T, column f % d. Returns how many elements break that
 * formula (none, if it is right) and, in *misplaced, how many of them do not
 * sit where the right split puts them. */
static int check_wrong_formula(const Tensor *x, const Tensor *wrong, int H, int *misplaced)
{
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2], d = D / H;
    int broken = 0;
    *misplaced = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) {
                const int f = t * D + j;
                const int head = f / (T * d), pos = (f / d) % T, col = f % d;
                broken += AT3(wrong, b * H + head, pos, col) != AT3(x, b, t, j);
                *misplaced += head != j / d || pos != t || col != j % d;
            }
    return broken;
}

/* Sequence first: x_seq (T, B, D) -> out (B*H, T, d), directly:
 * x_seq[t, b, h*d + i] -> out[b*H + h, t, i]. */
static Tensor *transpose_qkv_seq_first(const Tensor *x_seq, int num_heads)
{
    tensor_check_shape("x_seq", x_seq, SHAPE(-1, -1, -1));
    const int T = x_seq->shape[0], B = x_seq->shape[1], D = x_seq->shape[2];
    const int H = num_heads, d = head_size(D, H);
    Tensor *out = tensor_zeros(SHAPE(B * H, T, d));
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                /* the only change from heads.c: token t of sequence b is row
                 * t*B + b of the input, not b*T + t */
                const float *piece = x_seq->data + ((size_t)t * B + b) * D + (size_t)h * d;
                float *head_row = out->data + (((size_t)b * H + h) * T + t) * d;
                for (int i = 0; i < d; i++)
                    head_row[i] = piece[i];
            }
    return out;
}

/* Sequence first, PyTorch's two lines (F.multi_head_attention_forward):
 *     q = q.contiguous().view(T, B * H, d).transpose(0, 1)
 * The view cuts each (B, D) slice of token t into B*H rows of d, already in
 * the order b*H + h; the transpose brings the token index second. */
static Tensor *transpose_qkv_seq_first_pytorch(const Tensor *x_seq, int num_heads)
{
    const int T = x_seq->shape[0], B = x_seq->shape[1], D = x_seq->shape[2];
    const int H = num_heads, d = D / H;
    Tensor *view = tensor_copy(x_seq);
    tensor_reshape(view, SHAPE(T, B * H, d));
    Tensor *out = tensor_permute(view, (const int[]){1, 0, 2});
    tensor_free(view);
    return out;
}

/* The formulas on every shape: returns how many checks failed. */
static int exercise2_where_elements_land(Rng *rng)
{
    int failures = 0;
    printf("Where X[b, t, j] lands, and where the classic mistake puts it\n"
           "  right split   X[b, t, j] -> out[b*H + j/d, t, j %% d]\n"
           "  the mistake   f = t*D + j, X[b, t, j] -> out[b*H + f/(T*d), (f/d) %% T, f %% d]\n\n"
           "   shape (B, T, D)  H   right formula   mistake formula   moved by the mistake\n");
    for (int s = 0; s < NUM_SHAPES; s++) {
        const int B = SHAPES[s][0], T = SHAPES[s][1], D = SHAPES[s][2], H = SHAPES[s][3];
        const int d = D / H;
        Tensor *x = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, D));
        Tensor *split = transpose_qkv(x, H);
        Tensor *wrong = tensor_copy(x);
        tensor_reshape(wrong, SHAPE(B * H, T, d));
        int misplaced;
        int right_broken = check_right_formula(x, split, H);
        int wrong_broken = check_wrong_formula(x, wrong, H, &misplaced);
        char shape[40];
        printf("  %15s %3d   %s   %s   %4d of %4zu\n",
               shape_str(shape, sizeof shape, SHAPE(B, T, D)), H,
               right_broken ? "   BROKEN    " : "holds for all",
               wrong_broken ? "    BROKEN     " : " holds for all ", misplaced, x->size);
        failures += right_broken + wrong_broken;
        /* the mistake moves nothing exactly when H = 1 or T = 1 */
        failures += (misplaced == 0) != (H == 1 || T == 1);
        TENSOR_FREE(x, split, wrong);
    }

    return failures;
}

/* Sequence first on every shape: returns how many checks failed. */
static int exercise3_sequence_first(Rng *rng)
{
    int failures = 0;
    printf("\nSequence first: input (T, B, D), PyTorch's default layout\n"
           "   shape (T, B, D)  H   direct loop   view + transpose   largest difference\n");
    for (int s = 0; s < NUM_SHAPES; s++) {
        const int B = SHAPES[s][0], T = SHAPES[s][1], D = SHAPES[s][2], H = SHAPES[s][3];
        Tensor *x = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, D));
        Tensor *x_seq = tensor_permute(x, (const int[]){1, 0, 2});   /* (T, B, D) */
        Tensor *expected = transpose_qkv(x, H);
        Tensor *direct = transpose_qkv_seq_first(x_seq, H);
        Tensor *pytorch = transpose_qkv_seq_first_pytorch(x_seq, H);
        float diff_direct = tensor_max_abs_diff(direct, expected);
        float diff_pytorch = tensor_max_abs_diff(pytorch, expected);
        char shape[40];
        printf("  %15s %3d   %s       %s          %g\n",
               shape_str(shape, sizeof shape, SHAPE(T, B, D)), H,
               diff_direct == 0.0f ? "equal  " : "DIFFERS", diff_pytorch == 0.0f ? "equal  " : "DIFFERS",
               (double)(diff_direct > diff_pytorch ? diff_direct : diff_pytorch));
        failures += (diff_direct != 0.0f) + (diff_pytorch != 0.0f);
        TENSOR_FREE(x, x_seq, expected, direct, pytorch);
    }

    return failures;
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    const CliOption options[] = {
        {"--seed", CLI_U64, &seed, .metavar = "N", .help = "seed of the random tensors"},
    };
    const int done = cli_parse(&(CliTable){PROG,
        "Checks the formulas of chapter 04's exercise 2 (where an element lands\n"
        "after the head split, right and wrong) and the sequence-first split of\n"
        "exercise 3 on random tensors of several shapes.", CLI_COUNT(options), options},
        argc, argv);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(seed);
    int failures = exercise2_where_elements_land(&rng);
    failures += exercise3_sequence_first(&rng);
    if (failures != 0) {
        return fail("%d checks failed", failures);
    }
    printf("\nAll checks hold: both formulas are exact, the mistake moves nothing only when\n"
           "H = 1 or T = 1, and both sequence-first splits equal transpose_qkv of the\n"
           "batch-first tensor, row b*H + h included.\n");
    return 0;
}
