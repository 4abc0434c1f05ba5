/*
 * exercise_causal_order - worked solution to chapter 06's exercise 3: is causal
 * self-attention permutation equivariant?
 *
 * A decoder lets query i look only at keys 0..i, which d2l writes as 2-D
 * valid_lens (B, T) with valid_len = i + 1 for query i. Then the output at
 * position i is a function of the query X[i] and of the SET of tokens
 * X[0..i] (attention over that prefix does not care about its order). After
 * a permutation,
 *
 *   f(P X)[i]   depends on X[perm[i]] and the set {X[perm[0]], ..., X[perm[i]]}
 *   (P f(X))[i] = f(X)[perm[i]] depends on X[perm[i]] and {X[0], ..., X[perm[i]]}
 *
 * The two agree (for generic inputs) exactly when the sets are equal, that
 * is, when perm[i] = i and perm maps the prefix 0..i onto itself. The
 * program predicts each position with that rule, measures it, and then
 * checks the rule on every permutation of T tokens.
 *
 * Legend: B = 1 sequence, T = number of tokens, D = num_hiddens.
 */
#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "io/cli.h"
#include "permute_tokens.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "exercise_causal_order";

enum { MAX_TOKENS = 8 };

/* The rule: position i keeps its output when perm[i] = i and perm[0..i]
 * holds exactly 0..i (checked by its maximum: i + 1 distinct entries whose
 * largest is i are 0..i). */
static bool predicted_same(const int *perm, int i)
{
    int largest = 0;
    for (int j = 0; j <= i; j++)
        if (perm[j] > largest)
            largest = perm[j];
    return perm[i] == i && largest == i;
}

/* X (1, T, D) -> causal self-attention (1, T, D) */
static Tensor *causal_self_attention(const Tensor *X)
{
    const int T = X->shape[1];
    int lens[MAX_TOKENS];
    for (int i = 0; i < T; i++)
        lens[i] = i + 1;   /* query i sees keys 0..i */
    ValidLens *causal = valid_lens_2d(lens, 1, T);
    Tensor *out = dot_product_attention(X, X, X, causal, NULL, NULL);
    valid_lens_free(causal);
    return out;
}

/* Largest |f(P X)[i] - (P f(X))[i]| over the features of each position i. */
static void position_diffs(const Tensor *X, const Tensor *fX, const int *perm, float *diffs)
{
    const int T = X->shape[1], D = X->shape[2];
    Tensor *PX = permute_tokens(X, perm);
    Tensor *fPX = causal_self_attention(PX);
    Tensor *P_fX = permute_tokens(fX, perm);
    for (int i = 0; i < T; i++) {
        diffs[i] = 0.0f;
        for (int k = 0; k < D; k++) {
            float diff = AT3(fPX, 0, i, k) - AT3(P_fX, 0, i, k);
            diff = diff < 0 ? -diff : diff;
            if (diff > diffs[i])
                diffs[i] = diff;
        }
    }
    TENSOR_FREE(PX, fPX, P_fX);
}

/* Next permutation in lexicographic order; false after the last one. */
static bool next_permutation(int *perm, int n)
{
    int i = n - 2;
    while (i >= 0 && perm[i] > perm[i + 1])
        i--;
    if (i < 0)
        return false;
    int j = n - 1;
    while (perm[j] < perm[i])
        j--;
    int tmp = perm[i];
    perm[i] = perm[j];
    perm[j] = tmp;
    for (int a = i + 1, b = n - 1; a < b; a++, b--) {
        tmp = perm[a];
        perm[a] = perm[b];
        perm[b] = tmp;
    }
    return true;
}

typedef struct {
    int tokens, hiddens;
    uint64_t seed;
    const char *perm_text;   /* NULL: tokens 1 and 2 swapped */
    int perm[MAX_TOKENS];
} Options;

/* --perm is read once --tokens is known: T positions, each of 0..T-1 once. */
static void read_perm(Options *opt)
{
    const int T = opt->tokens;
    if (opt->perm_text == NULL) {
        for (int i = 0; i < T; i++)
            opt->perm[i] = i;
        opt->perm[1] = 2 < T ? 2 : 0;   /* swap tokens 1 and 2 (with 2 tokens: 0 and 1) */
        opt->perm[2 < T ? 2 : 0] = 1;
        return;
    }
    long values[MAX_TOKENS];
    char err[CLI_ERR_LEN];
    const int n = cli_read_long_list("--perm", opt->perm_text, 0, T - 1, values, MAX_TOKENS, err,
                                     sizeof err);
    if (n < 0)
        cli_fail(PROG, "%s", err);
    for (int i = 0; i < n; i++)
        opt->perm[i] = (int)values[i];
    if (n != T || !is_permutation(opt->perm, T))
        cli_fail(PROG, "--perm must list each of 0..%d once, got '%s'", T - 1, opt->perm_text);
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.tokens = 5, .hiddens = 4, .seed = 0};
    const CliOption options[] = {
        {"--tokens", CLI_INT, &opt.tokens, .min = 2, .max = MAX_TOKENS, .metavar = "T",
         .help = "tokens"},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = 64, .metavar = "D",
         .help = "features per token"},
        {"--perm", CLI_STRING, &opt.perm_text, .metavar = "LIST",
         .help = "the permutation to show, T comma-separated positions",
         .default_text = "tokens 1 and 2 swapped, 0,2,1,3,..."},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed of the tokens"},
    };
    *done = cli_parse(&(CliTable){PROG, "Causal self-attention (query i sees keys 0..i) under a "
                                        "permutation of the\ntokens: which positions keep their output, "
                                        "predicted and measured, then the\nprediction checked on every "
                                        "permutation of T tokens.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    read_perm(&opt);
    return opt;
}

/* One permutation, position by position: the rule's prediction and the
 * measured difference. Returns true when the rule held everywhere. */
static bool show_one_permutation(const Tensor *X, const Tensor *fX, const int *perm,
                                 float tolerance)
{
    const int T = X->shape[1];
    float diffs[MAX_TOKENS];
    position_diffs(X, fX, perm, diffs);
    printf("position  token  sees tokens       rule says   max |f(PX)[i] - f(X)[perm[i]]|\n");
    bool rule_holds = true;
    for (int i = 0; i < T; i++) {
        char seen[64];
        size_t used = 0;
        for (int j = 0; j <= i; j++)
            used += (size_t)snprintf(seen + used, sizeof seen - used, "%s%d", j ? "," : "{", perm[j]);
        snprintf(seen + used, sizeof seen - used, "}");
        bool same = predicted_same(perm, i);
        bool measured_same = diffs[i] <= tolerance;
        rule_holds = rule_holds && same == measured_same;
        printf("%8d  %5d  %-16s  %-10s  %.3g%s\n", i, perm[i], seen, same ? "same" : "changes",
               (double)diffs[i], same == measured_same ? "" : "   <- the rule is wrong here");
    }
    printf("Before the move, token t saw {0..t}. A position keeps its output only if\n"
           "its token sees the same set as before.\n\n");
    return rule_holds;
}

/* Every permutation of T tokens, in lexicographic order. Returns how many
 * positions the rule got wrong. */
static long check_every_permutation(const Tensor *X, const Tensor *fX, float tolerance)
{
    const int T = X->shape[1];
    int perm[MAX_TOKENS];
    float diffs[MAX_TOKENS];
    for (int i = 0; i < T; i++)
        perm[i] = i;
    long total = 0, equivariant = 0, positions_kept = 0, rule_errors = 0;
    do {
        position_diffs(X, fX, perm, diffs);
        bool all_same = true;
        for (int i = 0; i < T; i++) {
            bool measured_same = diffs[i] <= tolerance;
            positions_kept += measured_same;
            all_same = all_same && measured_same;
            rule_errors += predicted_same(perm, i) != measured_same;
        }
        equivariant += all_same;
        total++;
    } while (next_permutation(perm, T));
    printf("All %ld permutations of %d tokens:\n"
           "  f(P X) = P f(X) at every position: %ld%s\n"
           "  positions that kept their output:  %ld of %ld\n"
           "  positions where the rule was wrong: %ld\n",
           total, T, equivariant, equivariant == 1 ? " (only the identity)" : "",
           positions_kept, total * T, rule_errors);
    return rule_errors;
}

int main(int argc, char **argv)
{
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    const int T = opt.tokens, D = opt.hiddens;
    Rng rng = rng_new(opt.seed);
    Tensor *X = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, T, D));
    Tensor *fX = causal_self_attention(X);
    const float tolerance = (float)(PERMUTATION_TOL_EPS * FLT_EPSILON) * tensor_max_abs(fX);

    char pbuf[64];
    printf("Causal self-attention on %d tokens of size %d: query i sees keys 0..i,\n"
           "valid_lens (1, %d) = [", T, D, T);
    for (int i = 0; i < T; i++)
        printf("%s%d", i ? ", " : "", i + 1);
    printf("].\nperm = %s: position i of P X holds token perm[i].\n\n",
           permutation_str(pbuf, sizeof pbuf, opt.perm, T));
    bool rule_holds = show_one_permutation(X, fX, opt.perm, tolerance);
    long rule_errors = check_every_permutation(X, fX, tolerance);
    printf("The causal mask is a statement about positions, so causal attention is\n"
           "not permutation equivariant: a decoder knows which token came first even\n"
           "without a positional encoding.\n");
    TENSOR_FREE(X, fX);
    cli_check(rule_holds && rule_errors == 0,
              "the rule for causal attention on permuted tokens did not hold");
    return cli_checks_status();
}
