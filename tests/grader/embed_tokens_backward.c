/* embed_tokens_backward.c - grades exercise 6.13, the backward of a GPT's
 * embedding (06_permutation_invariance/your_gpt.md), against
 * embed_tokens_backward (common/learn/embedding.c). Both tables' gradients
 * hold other numbers before the call (the tied unembedding's part, an
 * earlier batch's), and small vocabularies make tokens repeat. */
#include "exercises.h"
#include "grader.h"
#include "learn/embedding.h"

#include <math.h>
#include <string.h>

enum { MAX_TOKENS = 512 };

static bool close_rows(const float *got, const float *want, int D)
{
    for (int j = 0; j < D; j++)
        if (!(fabs(got[j] - want[j]) <= 1e-6 + 1e-5 * fabs(want[j])))
            return false;
    return true;
}

static void grade_case(Rng *rng, int index)
{
    int V = index == 0 ? 2 : draw_size(rng, index, 100, 2, 6);
    int C = index < 2 ? 1 : draw_size(rng, index, 100, 2, 8);
    int T = index % 3 == 2 ? C : draw_int(rng, 1, C);
    int B = index < 3 ? 1 : draw_size(rng, index, 100, 1, 3);
    int D = index == 0 ? 1 : large_case(index, 100) ? draw_int(rng, 300, 600)
                                                     : draw_size(rng, index, 100, 1, 7);
    case_describe("V = %d tokens, C = %d positions, tokens (B = %d, T = %d), D = %d", V, C, B,
                  T, D);
    static int tokens[MAX_TOKENS];
    for (int i = 0; i < B * T; i++)
        tokens[i] = draw_int(rng, 0, V - 1);
    if (index == 3 && T > 1)
        tokens[1] = tokens[0];   /* one token twice, surely */
    case_ints("tokens", tokens, B * T);
    const Tensor *grad_x = case_input("grad_x", draw_normal(rng, 1.0f, SHAPE(B, T, D)));
    Tensor *held_wte = draw_normal(rng, 1.0f, SHAPE(V, D));
    Tensor *held_wpe = draw_normal(rng, 1.0f, SHAPE(C, D));
    case_input("grad_wte (before)", held_wte);
    case_input("grad_wpe (before)", held_wpe);

    Tensor *want_wte = case_keep(tensor_copy(held_wte));
    Tensor *want_wpe = case_keep(tensor_copy(held_wpe));
    embed_tokens_backward(grad_x, tokens, want_wte, want_wpe);
    float *got_wte = case_output("grad_wte", held_wte->size);
    float *got_wpe = case_output("grad_wpe", held_wpe->size);
    memcpy(got_wte, held_wte->data, held_wte->size * sizeof(float));
    memcpy(got_wpe, held_wpe->data, held_wpe->size * sizeof(float));
    case_calling();
    my_embed_tokens_backward(grad_x->data, tokens, B, T, D, got_wte, got_wpe);
    case_called();

    // which slip: each row written over by its last use, or what was held lost
    for (int v = 0; v < V; v++) {
        int uses = 0, last = -1;
        for (int i = 0; i < B * T; i++)
            if (tokens[i] == v) {
                uses++;
                last = i;
            }
        if (uses < 2)
            continue;
        const float *last_row = grad_x->data + (size_t)last * D;
        expect_that(!close_rows(got_wte + (size_t)v * D, last_row, D), 1,
                    "token %d appears %d times in tokens, but its row of grad_wte holds the "
                    "gradient of the last one alone: every use adds its row (a scatter-add)",
                    v, uses);
    }
    bool held_lost = true;   /* every used row holds its new part alone */
    for (int i = 0; i < B * T && held_lost; i++)
        for (int j = 0; j < D && held_lost; j++) {
            const size_t at = (size_t)tokens[i] * D + j;
            held_lost = fabs(got_wte[at] - (want_wte->data[at] - held_wte->data[at])) <=
                        1e-5 * (fabs(want_wte->data[at]) + 1);
        }
    expect_that(!held_lost, 2, "grad_wte lost what it held before the call: the gradients are "
                "ADDED into it (the unembedding adds its part to the same table)");
    expect_close_floats("grad_wte", want_wte->data, got_wte, SHAPE(V, D), 1e-5, 1e-5, 2);
    expect_close_floats("grad_wpe", want_wpe->data, got_wpe, SHAPE(C, D), 1e-5, 1e-5, 3);
}

const Exercise exercise = {"embed_tokens_backward", "06_permutation_invariance", "6.13", 100,
                           grade_case, "embed_tokens_backward embedding_backward",
                           "your_gpt.md"};
