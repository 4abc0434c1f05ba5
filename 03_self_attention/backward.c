/*
 * backward - attention, backwards: chapter 03's optional section.
 *
 * Part 1: the forward on the chapter's three tokens, and a loss
 *         L = sum(O * G), so that dL/dO = G.
 * Part 2: the backward pass by pass, from dO back to dQ, dK and dV,
 *         checked against dot_product_attention_backward.
 * Part 3: every gradient by the formula and by central finite differences,
 *         side by side.
 * Part 4: the step of a finite difference: truncation error against
 *         rounding error, in float32 and in float64.
 * Part 5: the softmax backward as one dot product per row, O(n), against
 *         the full Jacobian a first attempt builds, O(n^2): operations
 *         counted, not timed.
 *
 * Legend: n = number of tokens (T = K = n in self-attention), d = token
 * size; Q = K = V = X, each treated as an input of its own.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "gradcheck.h"
#include "io/cli.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"
#include "worked_example.h"

static const char PROG[] = "backward";

/* small enough to print two matrices side by side on 80 columns */
enum { MAX_TOKENS = ATTENTION64_MAX_TOKENS, MAX_HIDDENS = ATTENTION64_MAX_HIDDENS,
       MAX_JACOBIAN_N = 4096 };

typedef struct {
    uint64_t seed;
    int num_tokens;     /* 0: the chapter's three tokens */
    int num_hiddens;
    double eps;         /* the step of Part 3 */
    int jacobian_max;   /* the largest row of Part 5 */
    bool hiddens_given;
} Options;

/* x (1, m, k) -> x^T (1, k, m), new */
static Tensor *transposed(const Tensor *x)
{
    return tensor_permute(x, (const int[]){0, 2, 1});
}

static void scale_inplace(Tensor *x, float divisor)
{
    for (size_t i = 0; i < x->size; i++)
        x->data[i] /= divisor;
}

/* ---- Part 1 ---------------------------------------------------------------- */

typedef struct {
    Tensor *queries, *keys, *values;   /* (1, n, d) each, equal to X */
    Tensor *grad_output;               /* G (1, n, d) */
    AttentionCache cache;              /* P (1, n, n) */
    Tensor *output;                    /* O (1, n, d) */
} Problem;

static Problem forward_and_loss(const Options *opt, Rng *rng)
{
    printf("Part 1. The forward pass and a loss\n\n");
    const bool fixed = opt->num_tokens == 0;
    const int n = fixed ? 3 : opt->num_tokens, d = fixed ? 3 : opt->num_hiddens;
    Problem p;
    p.queries = fixed ? tensor_from(EXAMPLE_TOKENS, SHAPE(1, n, d))
                      : tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, n, d));
    p.keys = tensor_copy(p.queries);
    p.values = tensor_copy(p.queries);
    p.grad_output = tensor_normal(rng, 0.0f, 1.0f, SHAPE(1, n, d));
    /* Two decimals, so that G typed into a notebook is the same float32
     * matrix: k / 100 is the float nearest to the decimal, as torch.tensor
     * reads it. The chapter's PyTorch lines then reproduce every gradient. */
    for (size_t i = 0; i < p.grad_output->size; i++)
        p.grad_output->data[i] = roundf(100.0f * p.grad_output->data[i]) / 100.0f;
    printf(fixed ? "The chapter's three tokens, X (1, 3, 3), one per row. Queries, keys and\n"
                   "values are X, but each gets a gradient of its own:\n"
                 : "Random tokens X (1, n, d). Queries, keys and values are X, but each gets\n"
                   "a gradient of its own:\n");
    tensor_print_named("X", p.queries);

    p.output = dot_product_attention_cache(p.queries, p.keys, p.values, NULL, NULL, &p.cache);
    Tensor *scores = matmul_bt(p.queries, p.keys);
    scale_inplace(scores, sqrtf((float)d));
    printf("\nS = Q K^T / sqrt(%d), P = softmax(S) row by row, O = P V:\n", d);
    tensor_print_named("S", scores);
    tensor_print_named("P", p.cache.weights);
    tensor_print_named("O", p.output);
    printf("\nA loss is one number. Whatever comes after the layer, its gradient reaches\n"
           "O as a matrix dO of O's shape; L = sum(O * G) makes that matrix G itself:\n");
    tensor_print_named("G = dO", p.grad_output);
    printf("L = sum(O * G) = %.6f\n\n", gradcheck_dot_loss(p.output, p.grad_output));
    tensor_free(scores);
    return p;
}

/* ---- Part 2 ---------------------------------------------------------------- */

/* dS (1, n, n): each row sums to 0, up to rounding. */
static void print_row_sums_of_dS(const Tensor *dS)
{
    const int n = dS->shape[1];
    double worst_row = 0.0;
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int j = 0; j < n; j++)
            sum += AT3(dS, 0, i, j);
        worst_row = fmax(worst_row, fabs(sum));
    }
    char worst_text[32];
    printf("Each row of dS sums to 0 (largest |row sum| %s): adding the same\n"
           "number to a whole row of scores changes no weight, so that direction has no\n"
           "gradient.\n",
           residue_text(worst_text, sizeof worst_text, worst_row, 1e-6));
}

/* Returns false when the library's backward disagrees with the passes. */
static bool backward_by_hand(const Problem *p)
{
    printf("Part 2. Backwards, pass by pass\n\n");
    const Tensor *P = p->cache.weights, *G = p->grad_output;
    const int n = P->shape[1], d = p->queries->shape[2];

    printf("pass 4 backwards: O = P V, so dV = P^T dO and dP = dO V^T\n");
    Tensor *P_t = transposed(P);
    Tensor *dV = matmul(P_t, G);
    Tensor *dP = matmul_bt(G, p->values);
    tensor_print_named("dV", dV);
    tensor_print_named("dP", dP);

    printf("\npass 2 backwards: dS = P * (dP - rowsum(dP * P)), one dot product per row\n");
    Tensor *rowsum = tensor_zeros(SHAPE(n, 1));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            AT2(rowsum, i, 0) += AT3(dP, 0, i, j) * AT3(P, 0, i, j);
    tensor_print_named("rowsum(dP * P)", rowsum);
    Tensor *dS = masked_softmax_backward(P, dP);
    tensor_print_named("dS", dS);
    print_row_sums_of_dS(dS);

    printf("\npass 1 backwards: S = Q K^T / sqrt(%d), so dQ = dS K / sqrt(%d) and\n"
           "dK = dS^T Q / sqrt(%d)\n", d, d, d);
    scale_inplace(dS, sqrtf((float)d));
    Tensor *dQ = matmul(dS, p->keys);
    Tensor *dS_t = transposed(dS);
    Tensor *dK = matmul(dS_t, p->queries);
    tensor_print_named("dQ", dQ);
    tensor_print_named("dK", dK);

    Tensor *lib_dQ = NULL, *lib_dK = NULL, *lib_dV = NULL;
    dot_product_attention_backward(p->queries, p->keys, p->values, &p->cache, G, &lib_dQ,
                                   &lib_dK, &lib_dV);
    float worst = fmaxf(tensor_max_abs_diff(dQ, lib_dQ),
                        fmaxf(tensor_max_abs_diff(dK, lib_dK), tensor_max_abs_diff(dV, lib_dV)));
    printf("\ndot_product_attention_backward (common/attention.c) runs these same passes:\n"
           "largest difference from the steps above %g.\n\n", (double)worst);
    TENSOR_FREE(P_t, dV, dP, rowsum, dS, dQ, dS_t, dK, lib_dQ, lib_dK, lib_dV);
    return worst == 0.0f;
}

/* ---- Part 3 ---------------------------------------------------------------- */

/* The loss as gradcheck_numeric sees it: a forward on the current inputs. */
typedef struct {
    const Problem *problem;
    bool tied;   /* true: x is queries, keys and values at once (self-attention) */
    Tensor *x;
} LossCtx;

static double attention_loss(void *ctx)
{
    const LossCtx *c = ctx;
    const Problem *p = c->problem;
    Tensor *out = c->tied ? dot_product_attention(c->x, c->x, c->x, NULL, NULL, NULL)
                          : dot_product_attention(p->queries, p->keys, p->values, NULL, NULL,
                                                  NULL);
    double loss = gradcheck_dot_loss(out, p->grad_output);
    tensor_free(out);
    return loss;
}

/* formula and numeric (1, n, d), printed row by row side by side */
static void print_side_by_side(const char *name, const Tensor *formula, const Tensor *numeric)
{
    const int n = formula->shape[1], d = formula->shape[2];
    printf("%-4s %-*s  %s\n", name, 9 * d, "formula", "finite differences");
    for (int i = 0; i < n; i++) {
        const Tensor *both[2] = {formula, numeric};
        printf("    ");
        for (int s = 0; s < 2; s++) {
            printf(" [");
            for (int k = 0; k < d; k++)
                printf("%8.4f%s", (double)AT3(both[s], 0, i, k), k + 1 < d ? " " : "");
            printf("]");
        }
        printf("\n");
    }
    printf("     relative error %.1e\n", gradcheck_rel_error(numeric, formula));
}

static void formula_against_differences(const Problem *p, double eps)
{
    printf("Part 3. The formula against finite differences\n\n");
    printf("Each entry of X moved by +-eps = %g, the loss run again, and\n"
           "(L(x + eps) - L(x - eps)) / 2 eps taken (common/gradcheck.c); the relative\n"
           "error is the largest difference over the largest gradient.\n\n", eps);
    Tensor *dQ = NULL, *dK = NULL, *dV = NULL;
    dot_product_attention_backward(p->queries, p->keys, p->values, &p->cache, p->grad_output,
                                   &dQ, &dK, &dV);
    const char *names[3] = {"dQ", "dK", "dV"};
    Tensor *inputs[3] = {p->queries, p->keys, p->values}, *grads[3] = {dQ, dK, dV};
    LossCtx ctx = {p, false, NULL};
    for (int i = 0; i < 3; i++) {
        Tensor *numeric = gradcheck_numeric(attention_loss, &ctx, inputs[i], eps);
        print_side_by_side(names[i], grads[i], numeric);
        tensor_free(numeric);
    }

    /* Self-attention uses X three times: its gradient is the sum of the three. */
    Tensor *dX = tensor_copy(dQ);
    for (size_t i = 0; i < dX->size; i++)
        dX->data[i] += dK->data[i] + dV->data[i];
    Tensor *x = tensor_copy(p->queries);
    LossCtx tied = {p, true, x};
    Tensor *numeric = gradcheck_numeric(attention_loss, &tied, x, eps);
    printf("\nIn self-attention Q, K and V are one X, which reaches L by three paths;\n"
           "the chain rule adds them: dX = dQ + dK + dV.\n");
    print_side_by_side("dX", dX, numeric);
    printf("\n");
    TENSOR_FREE(dQ, dK, dV, dX, x, numeric);
}

/* ---- Part 4 ---------------------------------------------------------------- */

/* the same in float32, with the library's forward and gradcheck_numeric */
static void numeric32(const Problem *p, double eps, double *grad)
{
    Tensor *inputs[3] = {p->queries, p->keys, p->values};
    LossCtx ctx = {p, false, NULL};
    const size_t nd = p->queries->size;
    for (int t = 0; t < 3; t++) {
        Tensor *numeric = gradcheck_numeric(attention_loss, &ctx, inputs[t], eps);
        for (size_t i = 0; i < nd; i++)
            grad[t * nd + i] = numeric->data[i];
        tensor_free(numeric);
    }
}

static void step_size(const Problem *p)
{
    printf("Part 4. How large a step?\n\n");
    Attention64 p64 = {.n = p->queries->shape[1], .d = p->queries->shape[2]};
    const int nd = p64.n * p64.d, count = 3 * nd;
    for (int i = 0; i < nd; i++) {
        p64.q[i] = p->queries->data[i];
        p64.k[i] = p->keys->data[i];
        p64.v[i] = p->values->data[i];
        p64.g[i] = p->grad_output->data[i];
    }
    double exact[3 * MAX_TOKENS * MAX_HIDDENS], numeric[3 * MAX_TOKENS * MAX_HIDDENS];
    attention64_grads(&p64, exact);   /* the formula in double (gradcheck.h) */
    printf("The same three gradients, dQ, dK and dV, by central differences with steps\n"
           "from 1e-1 down, against the formula computed in double. The relative error\n"
           "has two sources: truncation, the curvature the difference misses, which\n"
           "shrinks like eps^2, and rounding, the loss known only to about u |L| (u the\n"
           "unit roundoff), divided by 2 eps, which grows like 1/eps.\n\n");
    printf("     eps   forward in float32   forward in float64\n");
    enum { STEPS = 6 };
    double best_eps[2] = {0, 0}, best_err[2] = {INFINITY, INFINITY};
    for (int s = 1; s <= STEPS; s++) {
        const double eps = pow(10.0, -s);
        double err[2];
        numeric32(p, eps, numeric);
        err[0] = gradcheck_rel_error64(numeric, exact, count);
        attention64_numeric(&p64, eps, numeric);
        err[1] = gradcheck_rel_error64(numeric, exact, count);
        printf("   1e-%d   %18.1e   %18.1e\n", s, err[0], err[1]);
        for (int c = 0; c < 2; c++)
            if (err[c] < best_err[c]) {
                best_err[c] = err[c];
                best_eps[c] = eps;
            }
    }
    const double u32 = ldexp(1.0, -24), u64 = ldexp(1.0, -53);
    printf("\nBest step: %.0e in float32, %.0e in float64. The two errors balance where\n"
           "eps^2 ~ u / eps, at eps ~ u^(1/3): %.1e for float32 (u = 2^-24) and\n"
           "%.1e for float64 (u = 2^-53). In float32 the best step still leaves %.0e:\n"
           "a check of a float32 backward by finite differences can ask for that much\n"
           "and no more.\n\n",
           best_eps[0], best_eps[1], cbrt(u32), cbrt(u64), best_err[0]);
}

/* ---- Part 5 ---------------------------------------------------------------- */

/* The softmax backward as a first attempt writes it: build the Jacobian
 * J[i][j] = dp_i / ds_j = p_i (delta_ij - p_j), an (n, n) matrix, then
 * multiply: grad_s_j = sum_i g_i J[i][j]. Counts its operations in *ops. */
static void jacobian_backward(const float *p, const float *g, float *grad_s, int n,
                              long long *ops)
{
    float *J = checked_malloc((size_t)n * n, sizeof(float));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            J[(size_t)i * n + j] = p[i] * ((i == j ? 1.0f : 0.0f) - p[j]);
    *ops += 2LL * n * n;   /* a subtraction and a product per entry */
    for (int j = 0; j < n; j++) {
        double sum = 0.0;
        for (int i = 0; i < n; i++)
            sum += (double)g[i] * J[(size_t)i * n + j];
        grad_s[j] = (float)sum;
    }
    *ops += 2LL * n * n;   /* a product and a sum per entry */
    free(J);
}

/* softmax_row_backward's formula, with its operations counted in *ops */
static void row_formula_backward(const float *p, const float *g, float *grad_s, int n,
                                 long long *ops)
{
    double dot = 0.0;
    for (int j = 0; j < n; j++)
        dot += (double)g[j] * p[j];
    *ops += 2LL * n;       /* <g, p>: a product and a sum per entry */
    for (int j = 0; j < n; j++)
        grad_s[j] = p[j] * (float)((double)g[j] - dot);
    *ops += 2LL * n;       /* a subtraction and a product per entry */
}

/* Returns false when softmax_row_backward is not the row formula. */
static bool row_formula_against_jacobian(const Options *opt, Rng *rng)
{
    printf("Part 5. One dot product per row, or the full Jacobian?\n\n");
    printf("Written entry by entry, dL/ds_j = sum_i g_i p_i (delta_ij - p_j), the\n"
           "Jacobian of one row's softmax is an n x n matrix. Multiplied out, the sum\n"
           "collapses to p_j (g_j - <g, p>): one dot product shared by the row. The two\n"
           "on a random row of n scores, operations counted as they run:\n\n");
    printf("       n   row formula   full Jacobian     ratio   Jacobian bytes   largest\n"
           "                   ops             ops                  per row   difference\n");
    int last_n = 0;
    float library_diff = 0.0f;
    for (int n = 4; n <= opt->jacobian_max; n *= 4) {
        float *buf = checked_malloc((size_t)n * 5, sizeof(float));
        float *p = buf, *g = buf + n, *by_row = buf + 2 * (size_t)n;
        float *by_jacobian = buf + 3 * (size_t)n, *by_library = buf + 4 * (size_t)n;
        for (int j = 0; j < n; j++) {
            p[j] = 2.0f * rng_normal(rng);
            g[j] = rng_normal(rng);
        }
        softmax_row(p, n);   /* the scores become the row's weights, in place */
        long long row_ops = 0, jacobian_ops = 0;
        row_formula_backward(p, g, by_row, n, &row_ops);
        jacobian_backward(p, g, by_jacobian, n, &jacobian_ops);
        softmax_row_backward(p, g, by_library, n);
        float worst = 0.0f;
        for (int j = 0; j < n; j++) {
            worst = fmaxf(worst, fabsf(by_row[j] - by_jacobian[j]));
            library_diff = fmaxf(library_diff, fabsf(by_row[j] - by_library[j]));
        }
        printf("  %6d   %11lld   %13lld   %7lld   %14.0f   %.1e\n", n, row_ops, jacobian_ops,
               jacobian_ops / row_ops, (double)n * n * sizeof(float), (double)worst);
        free(buf);
        last_n = n;
    }
    printf("\nThe ratio is n. At n = %d tokens, each of the %d rows would build a %.0f MB\n"
           "matrix (10^6 bytes) to compute what one pass over the row gives.\n",
           last_n, last_n, (double)last_n * last_n * sizeof(float) / 1e6);
    /* the library also divides <g, p> by the weights' sum, 1 up to rounding */
    const bool same = library_diff <= 1e-6f;
    char diff_text[32];
    printf("softmax_row_backward (common/softmax.c) is the row formula, with <g, p>\n"
           "divided by the weights' own sum (1 up to rounding): largest difference %s%s.\n\n",
           residue_text(diff_text, sizeof diff_text, library_diff, 1e-6),
           same ? "" : ", too large: NO");
    return same;
}

/* ---- options and main ------------------------------------------------------ */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .num_tokens = 0, .num_hiddens = 3, .eps = 1e-2,
                   .jacobian_max = 1024};
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for G and for random tokens"},
        {"--tokens", CLI_INT, &opt.num_tokens, .min = 1, .max = MAX_TOKENS, .metavar = "N",
         .help = "N random tokens",
         .default_text = "the chapter's 3"},
        {"--dim", CLI_INT, &opt.num_hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "d",
         .help = "size of each random token", .given = &opt.hiddens_given},
        {"--eps", CLI_DOUBLE, &opt.eps, .min = 1e-6, .max = 0.5, .metavar = "E",
         .help = "finite-difference step of Part 3"},
        {"--jacobian-max", CLI_INT, &opt.jacobian_max, .min = 4, .max = MAX_JACOBIAN_N,
         .metavar = "N", .help = "largest row of Part 5"},
    };
    *done = cli_parse(&(CliTable){PROG, "Attention, backwards: dQ, dK and dV derived pass by pass, "
                                        "checked by finite\ndifferences, and the O(n) softmax backward "
                                        "against the full Jacobian.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    if (opt.hiddens_given && opt.num_tokens == 0)
        cli_fail(PROG, "--dim sizes random tokens: give --tokens N too "
                 "(the three tokens have size 3)");
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);
    Problem p = forward_and_loss(&opt, &rng);
    bool agree = backward_by_hand(&p);
    formula_against_differences(&p, opt.eps);
    step_size(&p);
    agree = row_formula_against_jacobian(&opt, &rng) && agree;

    TENSOR_FREE(p.queries, p.keys, p.values, p.grad_output, p.output);
    attention_cache_free(&p.cache);
    /* the library must be what the chapter derives: a disagreement fails */
    cli_check(agree, "the library's backward is not the one derived by hand");
    return cli_checks_status();
}
