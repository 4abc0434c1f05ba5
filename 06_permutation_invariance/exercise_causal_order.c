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

/* Equal means within this many float32 epsilons of the output size, the
 * rule of chapter 06's main program. */
static const double TOL_EPS = 64.0;

enum { MAX_TOKENS = 8 };

static void usage(void)
{
    printf("usage: %s [options]\n"
           "\n"
           "Causal self-attention (query i sees keys 0..i) under a permutation of the\n"
           "tokens: which positions keep their output, predicted and measured, then the\n"
           "prediction checked on every permutation of T tokens.\n"
           "\n"
           "options:\n"
           "  --tokens T    tokens, 2 to %d (default 5)\n"
           "  --hiddens D   features per token, 1 to 64 (default 4)\n"
           "  --perm LIST   the permutation to show, T comma-separated positions\n"
           "                (default: tokens 1 and 2 swapped, 0,2,1,3,...)\n"
           "  --seed N      seed of the tokens (default 0)\n"
           "  --help        this text\n", PROG, MAX_TOKENS);
}

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
    tensor_free(PX);
    tensor_free(fPX);
    tensor_free(P_fX);
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

int main(int argc, char **argv)
{
    int T = 5, D = 4;
    uint64_t seed = 0;
    const char *perm_text = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--tokens"))
            T = (int)cli_long(PROG, "--tokens", cli_value(PROG, argc, argv, &i), 2, MAX_TOKENS);
        else if (cli_is(argv[i], "--hiddens"))
            D = (int)cli_long(PROG, "--hiddens", cli_value(PROG, argc, argv, &i), 1, 64);
        else if (cli_is(argv[i], "--perm"))
            perm_text = cli_value(PROG, argc, argv, &i);
        else if (cli_is(argv[i], "--seed"))
            seed = cli_u64(PROG, "--seed", cli_value(PROG, argc, argv, &i));
        else if (cli_is(argv[i], "--help")) {
            usage();
            return 0;
        } else
            cli_unknown(PROG, argv[i]);
    }
    int perm[MAX_TOKENS];
    if (perm_text) {
        long values[MAX_TOKENS];
        int n = cli_long_list(PROG, "--perm", perm_text, 0, T - 1, values, MAX_TOKENS);
        for (int i = 0; i < n; i++)
            perm[i] = (int)values[i];
        if (n != T || !is_permutation(perm, T))
            cli_fail(PROG, "--perm must list each of 0..%d once, got '%s'", T - 1, perm_text);
    } else {
        for (int i = 0; i < T; i++)
            perm[i] = i;
        perm[1] = 2 < T ? 2 : 0;   /* swap tokens 1 and 2 (with 2 tokens: 0 and 1) */
        perm[2 < T ? 2 : 0] = 1;
    }

    Rng rng = rng_new(seed);
    Tensor *X = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, T, D));
    Tensor *fX = causal_self_attention(X);
    const float scale = tensor_max_abs(fX);
    const float tolerance = (float)(TOL_EPS * FLT_EPSILON) * scale;

    printf("Causal self-attention on %d tokens of size %d: query i sees keys 0..i,\n"
           "valid_lens (1, %d) = [", T, D, T);
    for (int i = 0; i < T; i++)
        printf("%s%d", i ? ", " : "", i + 1);
    printf("].\nperm = [");
    for (int i = 0; i < T; i++)
        printf("%s%d", i ? ", " : "", perm[i]);
    printf("]: position i of P X holds token perm[i].\n\n");

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

    /* Every permutation of T tokens, in lexicographic order. */
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
    printf("The causal mask is a statement about positions, so causal attention is\n"
           "not permutation equivariant: a decoder knows which token came first even\n"
           "without a positional encoding.\n");

    tensor_free(X);
    tensor_free(fX);
    return rule_holds && rule_errors == 0 ? 0 : 1;
}
