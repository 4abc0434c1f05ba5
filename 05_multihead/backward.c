/*
 * backward - the multi-head layer, backwards: chapter 05's optional section.
 *
 * Part 1: the layer forward with multihead_forward_cache and backwards with
 *         multihead_backward on a small random layer with biases and a mask;
 *         every gradient against central finite differences.
 * Part 2: the surprise: the key bias b_k gets a zero gradient, whatever the
 *         inputs, weights and mask, and moving it changes nothing.
 * Part 3: one head's dK worked from chapter 03's formulas, and its share of
 *         grad W_k, against what multihead_backward added up.
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys, H = num_heads,
 * D = num_hiddens, d = D / H, Dq, Dk, Dv = query, key and value sizes.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "gradcheck.h"
#include "heads.h"
#include "io/cli.h"
#include "multihead.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "backward";

/* A small layer: every gradient fits the screen, every check runs at once. */
enum { B = 2, T = 3, K = 4, DQ = 5, DK = 3, DV = 4, D = 6 };

typedef struct {
    uint64_t seed;
    int num_heads;
    int head;   /* the head of Part 3 */
} Options;

typedef struct {
    MultiHeadAttention *layer;
    Tensor *queries, *keys, *values, *grad_output;
    ValidLens *valid_lens;
    MultiHeadCache cache;
    MultiHeadGrads *grads;
    Tensor *grad_queries, *grad_keys, *grad_values;
} Problem;

static double layer_loss(void *ctx)
{
    const Problem *p = ctx;
    Tensor *out = multihead_forward(p->layer, p->queries, p->keys, p->values, p->valid_lens,
                                    false, NULL, NULL);
    double loss = gradcheck_dot_loss(out, p->grad_output);
    tensor_free(out);
    return loss;
}

/* ---- Part 1 ---------------------------------------------------------------- */

static void print_check_row(const char *name, const Tensor *grad, Tensor *param,
                            Problem *p)
{
    char shape[64];
    Tensor *numeric = gradcheck_numeric(layer_loss, p, param, 1e-2);
    printf("  %-13s %-10s %12.4f   %14.1e\n", name, shape_str(shape, sizeof shape, grad->ndim,
                                                             grad->shape),
           (double)tensor_max_abs(grad), gradcheck_rel_error(grad, numeric));
    tensor_free(numeric);
}

static Problem forward_and_backward(const Options *opt, Rng *rng)
{
    Problem p;
    p.layer = multihead_new(DQ, DK, DV, D, opt->num_heads, 0.0f, true, rng);
    p.queries = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, DQ));
    p.keys = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, DK));
    p.values = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, K, DV));
    p.grad_output = tensor_normal(rng, 0.0f, 1.0f, SHAPE(B, T, D));
    /* query 1 of sequence 0 sees no key: the rules must hold there too */
    p.valid_lens = valid_lens_2d((const int[]){4, 0, 2, 3, 1, 4}, B, T);

    printf("Part 1. The layer, forwards and backwards\n\n");
    printf("A layer with biases: queries (%d, %d, %d), keys (%d, %d, %d), values (%d, %d, %d),\n"
           "num_hiddens %d, %d heads of size %d, a 2-D mask in which query 1 of sequence 0\n"
           "sees no key:\n", B, T, DQ, B, K, DK, B, K, DV, D, opt->num_heads,
           D / opt->num_heads);
    valid_lens_print_named("valid_lens", p.valid_lens);
    Tensor *output = multihead_forward_cache(p.layer, p.queries, p.keys, p.values, p.valid_lens,
                                            false, NULL, &p.cache);
    const size_t kept = p.cache.Q->size + p.cache.K->size + p.cache.V->size +
                        p.cache.attention.weights->size + p.cache.concat->size;
    printf("multihead_forward_cache kept Q (B*H, T, d), K and V (B*H, n_k, d), the weights\n"
           "(B*H, T, n_k) and concat (B, T, D) for the backward: %zu floats, %zu bytes.\n",
           kept, kept * sizeof(float));
    printf("With L = sum(output * G) for a random G (B, T, D), multihead_backward gives:\n\n");
    p.grads = multihead_grads_new(p.layer);
    multihead_backward(p.layer, &p.cache, p.grad_output, p.grads, &p.grad_queries,
                       &p.grad_keys, &p.grad_values, NULL);

    printf("  gradient      shape      largest |entry|   finite differences\n"
           "                                              relative error\n");
    MultiHeadAttention *l = p.layer;
    MultiHeadGrads *g = p.grads;
    print_check_row("grad queries", p.grad_queries, p.queries, &p);
    print_check_row("grad keys", p.grad_keys, p.keys, &p);
    print_check_row("grad values", p.grad_values, p.values, &p);
    const char *names[7] = {"grad W_q", "grad W_k", "grad W_v", "grad W_o",
                            "grad b_q", "grad b_v", "grad b_o"};
    Tensor *grads[7] = {g->W_q, g->W_k, g->W_v, g->W_o, g->b_q, g->b_v, g->b_o};
    Tensor *params[7] = {l->W_q, l->W_k, l->W_v, l->W_o, l->b_q, l->b_v, l->b_o};
    for (int i = 0; i < 7; i++)
        print_check_row(names[i], grads[i], params[i], &p);
    printf("\n(b_k is missing from the table on purpose: Part 2.)\n\n");
    tensor_free(output);
    return p;
}

/* ---- Part 2 ---------------------------------------------------------------- */

/* largest |output(layer with bias moved by shift) - output| */
static float output_change(Problem *p, Tensor *bias, const Tensor *shift)
{
    Tensor *before = multihead_forward(p->layer, p->queries, p->keys, p->values,
                                       p->valid_lens, false, NULL, NULL);
    for (size_t i = 0; i < bias->size; i++)
        bias->data[i] += shift->data[i];
    Tensor *after = multihead_forward(p->layer, p->queries, p->keys, p->values,
                                      p->valid_lens, false, NULL, NULL);
    for (size_t i = 0; i < bias->size; i++)
        bias->data[i] -= shift->data[i];
    float change = tensor_max_abs_diff(before, after);
    TENSOR_FREE(before, after);
    return change;
}

static void key_bias(Problem *p, Rng *rng)
{
    printf("Part 2. The key bias learns nothing\n\n");
    tensor_print_named("grad b_q", p->grads->b_q);
    tensor_print_named("grad b_k", p->grads->b_k);
    /* rounding residues are shown as bounds: their digits differ between
     * machines (x86-64 and aarch64 give 6e-08 and 3e-08 for the last one) */
    char grad_text[32], numeric_text[32], shift_text[32];
    printf("largest |grad b_k| %s, next to largest |grad b_q| = %.4f.\n",
           residue_text(grad_text, sizeof grad_text, tensor_max_abs(p->grads->b_k), 1e-6),
           (double)tensor_max_abs(p->grads->b_q));
    /* the gradient is the sum of dK's rows, that is sum over queries i of
     * (row sum of dS) q_i / sqrt(d): every row sum is 0 (chapter 03) */
    Tensor *numeric = gradcheck_numeric(layer_loss, p, p->layer->b_k, 1e-2);
    printf("By finite differences: largest %s, what rounding the loss and dividing\n"
           "by 2 eps leaves.\n",
           residue_text(numeric_text, sizeof numeric_text, tensor_max_abs(numeric), 1e-5));
    Tensor *shift = tensor_normal(rng, 0.0f, 1.0f, SHAPE(D));
    printf("Moving b_k by a random vector of entries of size 1 changes the output by an\n"
           "amount %s; moving b_q by the same vector changes it by up to %.4f.\n\n",
           residue_text(shift_text, sizeof shift_text, output_change(p, p->layer->b_k, shift),
                        1e-6),
           (double)output_change(p, p->layer->b_q, shift));
    TENSOR_FREE(numeric, shift);
}

/* ---- Part 3 ---------------------------------------------------------------- */

/* x (B*H, n, d) -> row b*H + h as a new (1, n, d) tensor */
static Tensor *head_of(const Tensor *x, int row)
{
    const int n = x->shape[1], d = x->shape[2];
    return tensor_from(x->data + (size_t)row * n * d, SHAPE(1, n, d));
}

/* Head h's share of grad W_k, worked with chapter 03's formulas: per
 * sequence b, dO_h = columns h*d .. h*d + d - 1 of dO W_o, dP = dO_h V_h^T,
 * dS = P * (dP - rowsum(dP * P)), dK_h = dS^T Q_h / sqrt(d); then
 * grad W_k[h*d + i, :] = sum over b and keys j of dK_h[j, i] keys[b, j, :]. */
static Tensor *head_key_grad_by_hand(const Problem *p, int h, bool print)
{
    const int H = p->layer->num_heads, d = D / H;
    Tensor *grad_concat = linear_backward(p->cache.concat, p->layer->W_o, p->grad_output,
                                          NULL, NULL);                        /* (B, T, D) */
    Tensor *share = tensor_zeros(SHAPE(d, DK));
    for (int b = 0; b < B; b++) {
        const int row = b * H + h;
        Tensor *dO_h = tensor_zeros(SHAPE(1, T, d));
        for (int t = 0; t < T; t++)
            for (int i = 0; i < d; i++)
                AT3(dO_h, 0, t, i) = AT3(grad_concat, b, t, h * d + i);
        Tensor *P = head_of(p->cache.attention.weights, row);
        Tensor *Q = head_of(p->cache.Q, row), *V = head_of(p->cache.V, row);
        Tensor *dP = matmul_bt(dO_h, V);                                       /* (1, T, K) */
        Tensor *dS = masked_softmax_backward(P, dP);
        Tensor *dS_t = tensor_permute(dS, (const int[]){0, 2, 1});             /* (1, K, T) */
        Tensor *dK = matmul(dS_t, Q);                                          /* (1, K, d) */
        for (size_t i = 0; i < dK->size; i++)
            dK->data[i] /= sqrtf((float)d);
        if (print && b == 0) {
            printf("Sequence 0, head %d (row %d of the (B*H, ...) tensors):\n", h, row);
            tensor_print_named("dK_h = dS^T Q_h / sqrt(d)", dK);
        }
        for (int i = 0; i < d; i++)
            for (int j = 0; j < K; j++)
                for (int c = 0; c < DK; c++)
                    AT2(share, i, c) += AT3(dK, 0, j, i) * AT3(p->keys, b, j, c);
        Tensor *all[] = {dO_h, P, Q, V, dP, dS, dS_t, dK};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tensor_free(all[i]);
    }
    tensor_free(grad_concat);
    return share;
}

/* Returns false when the hand-worked share differs from multihead_backward's. */
static bool one_head_by_hand(const Problem *p, int h)
{
    const int H = p->layer->num_heads, d = D / H;
    printf("Part 3. One head's dK, by hand\n\n");
    printf("Head %d owns rows %d .. %d of W_k, so only its keys' gradient reaches them.\n",
           h, h * d, h * d + d - 1);
    Tensor *share = head_key_grad_by_hand(p, h, true);
    Tensor *from_layer = tensor_from(p->grads->W_k->data + (size_t)h * d * DK, SHAPE(d, DK));
    tensor_print_named("its share of grad W_k, by hand", share);
    tensor_print_named("rows of multihead_backward's grad W_k", from_layer);
    float diff = tensor_max_abs_diff(share, from_layer);
    char diff_text[32];
    printf("largest difference %s\n", residue_text(diff_text, sizeof diff_text, diff, 1e-6));
    bool same = diff <= 1e-6f * fmaxf(tensor_max_abs(from_layer), 1.0f);
    TENSOR_FREE(share, from_layer);
    return same;
}

/* ---- options and main ------------------------------------------------------ */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .num_heads = 2, .head = 1};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for the layer, the inputs and G"},
        {"--heads", CLI_INT, &opt.num_heads, .min = 1, .max = D, .metavar = "H",
         .help = "num_heads: 1, 2, 3 or 6 (num_hiddens is 6)"},
        {"--head", CLI_INT, &opt.head, .min = 0, .max = D - 1, .metavar = "h",
         .help = "the head worked by hand in Part 3, below H"},
    };
    *done = cli_parse(&(CliTable){PROG, "The multi-head layer backwards: every gradient against "
                                        "finite differences,\nthe key bias that learns nothing, and "
                                        "one head's dK by hand.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    char why[CLI_ERR_LEN];
    if (!heads_split(D, opt.num_heads, "num_hiddens", "--heads", why, sizeof why))
        cli_fail(PROG, "%s", why);
    if (opt.head >= opt.num_heads)
        cli_fail(PROG, "--head %d: the layer has heads 0 to %d", opt.head, opt.num_heads - 1);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    Problem p = forward_and_backward(&opt, &rng);
    key_bias(&p, &rng);
    bool same = one_head_by_hand(&p, opt.head);

    Tensor *all[] = {p.queries, p.keys, p.values, p.grad_output, p.grad_queries, p.grad_keys,
                     p.grad_values};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    valid_lens_free(p.valid_lens);
    multihead_cache_free(&p.cache);
    multihead_grads_free(p.grads);
    multihead_free(p.layer);
    /* the library must be what the chapter derives: a disagreement fails */
    cli_check(same, "the library's backward is not the one derived by hand");
    return cli_checks_status();
}
