/* block_forward.c - grades exercise 6.19, one transformer block's forward
 * (06_permutation_invariance/your_gpt.md), against block_forward
 * (common/learn/gpt_block.c) on the clear kernels: the output, every
 * tensor of the cache, and then block_backward run on the learner's cache,
 * whose gradients must be the repository's (so the attention's cache is
 * checked by what the backward reads from it). Every parameter is drawn,
 * biases and layer norms' weights too, so that none hides a slip. */
#include "exercises.h"
#include "grader.h"
#include "learn/language_model.h"

#include <math.h>

/* two copies of one block (the repository's and the learner's), freed at
 * the next case: a failing check does not return */
static LanguageModel *models[2];

static LanguageModel *drawn_model(uint64_t seed, int D, int H, int C)
{
    const int bytes[3] = {'a', 'b', 'c'};
    Rng rng = rng_new(seed);
    LanguageModel *m = language_model_new(bytes, 3, C, D, H, 1, &rng);
    for (int i = 0; i < m->num_params; i++) {
        Tensor *value = m->params[i].value;
        const bool vector = value->ndim == 1;
        for (size_t j = 0; j < value->size; j++)   /* layer norms' weights near 1 */
            value->data[j] = (vector && j % 2 == 0 ? 1.0f : 0.0f) + 0.5f * rng_normal(&rng);
    }
    return m;
}

/* a block's gradients, one after the other, for the report */
static void expect_same_grads(const BlockGrads *want, const BlockGrads *got)
{
    const Tensor *w[] = {want->ln1_weight, want->ln1_bias, want->attn->W_q, want->attn->W_k,
                         want->attn->W_v, want->attn->W_o, want->ln2_weight, want->ln2_bias,
                         want->fc_weight, want->fc_bias, want->proj_weight, want->proj_bias};
    const Tensor *g[] = {got->ln1_weight, got->ln1_bias, got->attn->W_q, got->attn->W_k,
                         got->attn->W_v, got->attn->W_o, got->ln2_weight, got->ln2_bias,
                         got->fc_weight, got->fc_bias, got->proj_weight, got->proj_bias};
    const char *names[] = {"ln_1.weight's gradient (block_backward on your cache)",
                           "ln_1.bias's gradient", "W_q's gradient", "W_k's gradient",
                           "W_v's gradient", "W_o's gradient", "ln_2.weight's gradient",
                           "ln_2.bias's gradient", "mlp.fc.weight's gradient",
                           "mlp.fc.bias's gradient", "mlp.proj.weight's gradient",
                           "mlp.proj.bias's gradient"};
    for (int i = 0; i < 12; i++)
        expect_close(names[i], w[i], g[i], 1e-4, 1e-3, 3);
}

static void grade_case(Rng *rng, int index)
{
    for (int i = 0; i < 2; i++) {
        language_model_free(models[i]);
        models[i] = NULL;
    }
    int B = index < 2 ? 1 : draw_size(rng, index, 100, 1, 2);
    int T = index == 0 ? 1 : draw_size(rng, index, 100, 1, 6);
    int H = index < 3 ? 1 : draw_int(rng, 1, 3);
    int d = index == 1 ? 1 : large_case(index, 100) ? draw_int(rng, 8, 16)
                                                     : draw_size(rng, index, 100, 1, 4);
    int D = H * d;
    case_describe("x (B = %d, T = %d, D = %d), H = %d heads of d = %d, F = %d, causal", B, T,
                  D, H, d, 4 * D);
    const uint64_t seed = (uint64_t)draw_int(rng, 1, 1 << 30);
    models[0] = drawn_model(seed, D, H, T);
    models[1] = drawn_model(seed, D, H, T);
    const Block *block = &models[0]->blocks[0];
    Tensor *x = case_input("x", draw_normal(rng, 1.0f, SHAPE(B, T, D)));
    ValidLens *causal = case_keep_valid_lens(valid_lens_causal(B, T));

    const LanguageKernels clear = CLEAR_LANGUAGE_KERNELS;
    BlockCache want;
    Tensor *want_out = case_keep(block_forward(block, &clear, tensor_copy(x), causal, NULL,
                                               &want));
    BlockCache got = {0};
    case_calling();
    Tensor *got_out = case_keep(my_block_forward(block, x, causal, &got));
    case_called();
    got.x = tensor_copy(x);
    case_keep(got.x);   /* the caller's part of the cache, as the model hands it */

    expect_tensor("out", got_out, SHAPE(B, T, D), 1);
    // the cache, in the order the forward fills it
    struct { const char *name; const Tensor *want, *got; int hint; } fields[] = {
        {"cache->h1 = ln_1(x)", want.h1, got.h1, 1},
        {"cache->mean1", want.mean1, got.mean1, 1},
        {"cache->rstd1", want.rstd1, got.rstd1, 1},
        {"cache->x_mid = x + attention(h1)", want.x_mid, got.x_mid, 2},
        {"cache->h2 = ln_2(x_mid)", want.h2, got.h2, 2},
        {"cache->mean2", want.mean2, got.mean2, 2},
        {"cache->rstd2", want.rstd2, got.rstd2, 2},
        {"cache->f = fc(h2)", want.f, got.f, 3},
        {"cache->g = gelu(f)", want.g, got.g, 3},
    };
    for (int i = 0; i < 9; i++) {
        expect_that(fields[i].got != NULL, fields[i].hint, "%s is NULL: the backward reads it",
                    fields[i].name);
        expect_tensor(fields[i].name, fields[i].got, fields[i].want->ndim,
                      fields[i].want->shape, fields[i].hint);
    }
    // the two residuals, the slips that show most
    bool attention_alone = true, mlp_alone = true;
    for (size_t i = 0; i < x->size; i++) {
        double attended = want.x_mid->data[i] - x->data[i];
        double mlp = want_out->data[i] - want.x_mid->data[i];
        attention_alone = attention_alone &&
                          fabs(got.x_mid->data[i] - attended) <= 1e-4 * (fabs(attended) + 1);
        mlp_alone = mlp_alone && fabs(got_out->data[i] - mlp) <= 1e-4 * (fabs(mlp) + 1);
    }
    expect_that(!attention_alone, 2, "x_mid is attention(ln_1(x)) alone: the block adds it to "
                "the stream, x_mid = x + attention(ln_1(x)) (the residual)");
    expect_that(!mlp_alone, 2, "out is mlp(ln_2(x_mid)) alone: the block adds it to the "
                "stream, out = x_mid + mlp(ln_2(x_mid)) (the residual)");
    for (int i = 0; i < 9; i++)
        expect_close(fields[i].name, fields[i].want, fields[i].got, 1e-5, 1e-4,
                     fields[i].hint);
    expect_close("out", want_out, got_out, 1e-5, 1e-4, 2);

    // the backward on each cache: the same gradients, the attention's cache too
    Tensor *grad_want = case_keep(draw_normal(rng, 1.0f, SHAPE(B, T, D)));
    Tensor *grad_got = case_keep(tensor_copy(grad_want));
    block_backward(block, &models[0]->grads[0], &clear, &want, grad_want);
    block_backward(&models[1]->blocks[0], &models[1]->grads[0], &clear, &got, grad_got);
    got.x = NULL;   /* kept above */
    block_cache_free(&want);
    block_cache_free(&got);
    expect_close("x's gradient (block_backward on your cache)", grad_want, grad_got, 1e-4,
                 1e-3, 3);
    expect_same_grads(&models[0]->grads[0], &models[1]->grads[0]);
}

const Exercise exercise = {"block_forward", "06_permutation_invariance", "6.19", 100,
                           grade_case, "block_forward", "your_gpt.md"};
