/* embed_tokens.c - grades exercise 6.12, a GPT's embedding
 * (06_permutation_invariance/your_gpt.md), against embed_tokens
 * (common/learn/embedding.c): tokens met twice, T = 1, T = C, D odd. */
#include "exercises.h"
#include "grader.h"
#include "learn/embedding.h"

#include <math.h>
#include <string.h>

enum { MAX_TOKENS = 512 };

/* x (B, T, D) close to rows[which(b, t)] + wpe[where(b, t)] for every row? */
static bool rows_are(const float *got, const Tensor *wte, const Tensor *wpe, const int *tokens,
                     int B, int T, bool with_wpe, bool position_is_token)
{
    const int D = wte->shape[1];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int token = tokens[b * T + t], position = position_is_token ? token : t;
            if (position >= wpe->shape[0])
                return false;
            for (int j = 0; j < D; j++) {
                double want = AT2(wte, token, j) + (with_wpe ? AT2(wpe, position, j) : 0.0f);
                if (fabs(got[((size_t)b * T + t) * D + j] - want) > 1e-6 + 1e-5 * fabs(want))
                    return false;
            }
        }
    return true;
}

static void grade_case(Rng *rng, int index)
{
    /* V <= C: a token is also a row of wpe, so reading wpe by the token
     * (a slip) gives numbers to name, not a read past the table */
    int C = index < 2 ? 2 : draw_size(rng, index, 100, 2, 9);
    int V = index == 0 ? 2 : draw_int(rng, 2, C);
    int T = index < 2 ? 1 : index % 3 == 2 ? C : draw_int(rng, 1, C);   /* every position, often */
    int B = index < 3 ? 1 : draw_size(rng, index, 100, 1, 3);
    int D = index == 0 ? 1 : large_case(index, 100) ? draw_int(rng, 300, 600)
                                                     : draw_size(rng, index, 100, 1, 7);
    case_describe("V = %d tokens, C = %d positions, tokens (B = %d, T = %d), D = %d", V, C, B,
                  T, D);
    const Tensor *wte = case_input("wte", draw_normal(rng, 1.0f, SHAPE(V, D)));
    const Tensor *wpe = case_input("wpe", draw_normal(rng, 1.0f, SHAPE(C, D)));
    static int tokens[MAX_TOKENS];
    for (int i = 0; i < B * T; i++)   /* small vocabularies: tokens repeat */
        tokens[i] = draw_int(rng, 0, V - 1);
    case_ints("tokens", tokens, B * T);

    Tensor *want = case_keep(embed_tokens(wte, wpe, tokens, B, T));
    float *got = case_output("x", want->size);
    case_calling();
    my_embed_tokens(wte->data, wpe->data, tokens, B, T, D, got);
    case_called();

    expect_that(!rows_are(got, wte, wpe, tokens, B, T, false, false), 1,
                "x is wte's rows alone: each token's vector is its row of wte PLUS its "
                "position's row of wpe");
    bool token_not_position = false;   /* the slip below shows */
    for (int i = 0; i < B * T; i++)
        token_not_position = token_not_position || tokens[i] != i % T;
    expect_that(!token_not_position || !rows_are(got, wte, wpe, tokens, B, T, true, true), 2,
                "x[b][t] adds wpe[tokens[b][t]]: the position's row is wpe[t], whatever the "
                "token");
    expect_close_floats("x", want->data, got, SHAPE(B, T, D), 1e-6, 1e-6, 2);
}

const Exercise exercise = {"embed_tokens", "06_permutation_invariance", "6.12", 100, grade_case,
                           "embed_tokens embedding_forward", "your_gpt.md"};
