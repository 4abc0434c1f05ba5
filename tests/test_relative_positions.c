/*
 * test_relative_positions.c - RoPE, ALiBi and the attention that holds them
 * (common/rope.c, alibi.c, position_attention.c) and the model with five
 * kinds of positions (common/position_model.c): against values worked by
 * hand, against PyTorch (tests/fixtures/make_relpos_fixtures.py), against
 * central finite differences, and for the symmetries chapter 06's page
 * proves.
 *
 * Legend: B = batch_size, H = num_heads, N = B * H, T = tokens, d = head
 * size, D = num_hiddens, V = vocabulary.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "alibi.h"
#include "gradcheck.h"
#include "helpers.h"
#include "io/npy.h"
#include "position_attention.h"
#include "../06_permutation_invariance/length_experiment.h"
#include "learn/position_model.h"
#include "random.h"
#include "rope.h"
#include "tensor.h"

#define FIXTURES "tests/fixtures/relpos"

/* ---- RoPE by hand ------------------------------------------------------------ */

Test(rope, turns_each_pair_by_position_times_theta)
{
    /* d = 4: theta_0 = 1, theta_1 = 10000^(-1/2) = 0.01. Position 2 turns
     * pair 0 by 2 radians and pair 1 by 0.02. */
    Tensor *x = tensor_from((const float[]){9, 9, 9, 9, 1, 0, 0, 1}, SHAPE(1, 2, 4));
    rope_rotate(x, 1, false);   /* row 0 at position 1, row 1 at position 2 */
    const float row1[4] = {cosf(2.0f), sinf(2.0f), -sinf(0.02f), cosf(0.02f)};
    for (int i = 0; i < 4; i++)
        cr_expect(fabsf(AT3(x, 0, 1, i) - row1[i]) < 1e-6f, "x[1][%d] = %g, expected %g", i,
                  (double)AT3(x, 0, 1, i), (double)row1[i]);
    const float row0[4] = {9 * (cosf(1) - sinf(1)), 9 * (sinf(1) + cosf(1)),
                           9 * (cosf(0.01f) - sinf(0.01f)), 9 * (sinf(0.01f) + cosf(0.01f))};
    for (int i = 0; i < 4; i++)
        cr_expect(fabsf(AT3(x, 0, 0, i) - row0[i]) < 1e-5f, "x[0][%d] = %g, expected %g", i,
                  (double)AT3(x, 0, 0, i), (double)row0[i]);
    rope_rotate(x, 1, true);   /* turned back */
    Tensor *original = tensor_from((const float[]){9, 9, 9, 9, 1, 0, 0, 1}, SHAPE(1, 2, 4));
    expect_close(x, original, 1e-5f, 1e-6f);
    TENSOR_FREE(x, original);
}

/* q_m . k_n depends on m - n only: the same pair of vectors at positions
 * (m, n) and (m + s, n + s) gives the same score, over all pairs. */
Test(rope, score_depends_on_the_distance_only)
{
    Rng rng = rng_new(5);
    const int T = 12, d = 8;
    Tensor *q = tensor_normal(&rng, 0, 1, SHAPE(1, 1, d));
    Tensor *k = tensor_normal(&rng, 0, 1, SHAPE(1, 1, d));
    double worst = 0.0;
    for (int m = 0; m < T; m++)
        for (int n = 0; n < T; n++) {
            const int shift = 37 * m + 5;   /* any common offset */
            float dots[2];
            for (int s = 0; s < 2; s++) {
                Tensor *qm = rope_forward(q, m + s * shift), *kn = rope_forward(k, n + s * shift);
                dots[s] = 0.0f;
                for (int i = 0; i < d; i++)
                    dots[s] += qm->data[i] * kn->data[i];
                TENSOR_FREE(qm, kn);
            }
            worst = fmax(worst, fabs((double)dots[0] - dots[1]));
        }
    cr_expect(worst < 1e-5, "largest change of q_m . k_n under a shift: %g", worst);
    TENSOR_FREE(q, k);
}

/* ---- ALiBi by hand ------------------------------------------------------------- */

Test(alibi, slopes_of_the_paper)
{
    double slopes[8];
    alibi_slopes(8, slopes);
    for (int h = 0; h < 8; h++)
        cr_expect_eq(slopes[h], ldexp(1.0, -(h + 1)), "H = 8, head %d: %g", h + 1, slopes[h]);
    /* H = 6: the four of H = 4 (2^-2, 2^-4, 2^-6, 2^-8), then the 1st and
     * 3rd of H = 8 (2^-1, 2^-3) */
    const double six[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    alibi_slopes(6, slopes);
    for (int h = 0; h < 6; h++)
        cr_expect_eq(slopes[h], six[h], "H = 6, head %d: %g, expected %g", h + 1, slopes[h],
                     six[h]);
    alibi_slopes(1, slopes);
    cr_expect_eq(slopes[0], 1.0 / 256);
}

Test(alibi, bias_is_minus_slope_times_distance)
{
    Tensor *bias = alibi_bias(2, 3, 3);   /* slopes 1/16, 1/256 */
    const float expected[2][3][3] = {
        {{0, -0.0625f, -0.125f}, {-0.0625f, 0, -0.0625f}, {-0.125f, -0.0625f, 0}},
        {{0, -1.0f / 256, -2.0f / 256}, {-1.0f / 256, 0, -1.0f / 256},
         {-2.0f / 256, -1.0f / 256, 0}}};
    Tensor *want = tensor_from(&expected[0][0][0], SHAPE(2, 3, 3));
    expect_close(bias, want, 0.0f, 0.0f);
    TENSOR_FREE(bias, want);
}

/* ---- against PyTorch ------------------------------------------------------------ */

static Tensor *load_case(const char *dir, const char *name)
{
    char path[512], err[NPY_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    Tensor *x = npy_load(path, err, sizeof err);
    cr_assert(x != NULL, "%s", err);
    return x;
}

/* (B, H, T, n) -> (B*H, T, n), the same numbers */
static Tensor *heads_flat(Tensor *x)
{
    return tensor_reshape(x, SHAPE(x->shape[0] * x->shape[1], x->shape[2], x->shape[3]));
}

static void check_case(const char *name, HeadPositions positions, bool causal, int first)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    Tensor *q = load_case(dir, "queries"), *k = load_case(dir, "keys");
    Tensor *v = load_case(dir, "values"), *g = load_case(dir, "grad_output");
    const int H = q->shape[1];
    const PositionAttention how = {positions, H, first, causal};
    Tensor *scores = NULL, *weights = NULL;
    PositionAttentionCache cache = {0};
    Tensor *output = position_attention_forward(&how, heads_flat(q), heads_flat(k),
                                                heads_flat(v), &scores, &weights, &cache);
    Tensor *gq = NULL, *gk = NULL, *gv = NULL;
    position_attention_backward(&how, &cache, heads_flat(g), &gq, &gk, &gv);

    const char *names[6] = {"scores", "weights", "output", "grad_queries", "grad_keys",
                            "grad_values"};
    Tensor *got[6] = {scores, weights, output, gq, gk, gv};
    for (int i = 0; i < 6; i++) {
        char expected_name[64];
        snprintf(expected_name, sizeof expected_name, "expected_%s", names[i]);
        Tensor *expected = heads_flat(load_case(dir, expected_name));
        cr_expect(tensor_allclose(got[i], expected, 1e-6f, 1e-5f, stderr), "%s: %s differs",
                  name, names[i]);
        tensor_free(expected);
    }
    if (causal)   /* masked weights exactly 0 */
        for (int n = 0; n < weights->shape[0]; n++)
            for (int i = 0; i < weights->shape[1]; i++)
                for (int j = i + 1; j < weights->shape[2]; j++)
                    cr_expect_eq(AT3(weights, n, i, j), 0.0f);
    position_attention_cache_free(&cache);
    TENSOR_FREE(q, k, v, g, scores, weights, output, gq, gk, gv);
}

Test(relpos_pytorch, rope_causal) { check_case("rope_causal", HEAD_POSITIONS_ROPE, true, 3); }
Test(relpos_pytorch, rope_full_offset)
{
    check_case("rope_full_offset", HEAD_POSITIONS_ROPE, false, 1000);
}
Test(relpos_pytorch, alibi_causal)
{
    check_case("alibi_causal", HEAD_POSITIONS_ALIBI, true, 0);
}
Test(relpos_pytorch, alibi_six_heads)
{
    check_case("alibi_six_heads", HEAD_POSITIONS_ALIBI, false, 7);
}
Test(relpos_pytorch, none_causal) { check_case("none_causal", HEAD_POSITIONS_NONE, true, 0); }

/* ---- finite differences --------------------------------------------------------- */

typedef struct {
    const PositionAttention *how;
    Tensor *q, *k, *v, *g;
} AttentionCtx;

static double attention_loss(void *p)
{
    const AttentionCtx *c = p;
    Tensor *out = position_attention_forward(c->how, c->q, c->k, c->v, NULL, NULL, NULL);
    double sum = 0.0;
    for (size_t i = 0; i < out->size; i++)
        sum += (double)out->data[i] * c->g->data[i];
    tensor_free(out);
    return sum;
}

static void gradcheck_attention(HeadPositions positions, bool causal)
{
    Rng rng = rng_new(11);
    const int H = 2, N = 2 * H, T = 5, d = 4;
    const PositionAttention how = {positions, H, 9, causal};
    AttentionCtx c = {&how, tensor_normal(&rng, 0, 1, SHAPE(N, T, d)),
                      tensor_normal(&rng, 0, 1, SHAPE(N, T, d)),
                      tensor_normal(&rng, 0, 1, SHAPE(N, T, d)),
                      tensor_normal(&rng, 0, 1, SHAPE(N, T, d))};
    PositionAttentionCache cache = {0};
    Tensor *out = position_attention_forward(&how, c.q, c.k, c.v, NULL, NULL, &cache);
    Tensor *grads[3] = {NULL, NULL, NULL};
    position_attention_backward(&how, &cache, c.g, &grads[0], &grads[1], &grads[2]);
    Tensor *inputs[3] = {c.q, c.k, c.v};
    for (int i = 0; i < 3; i++) {
        Tensor *numeric = gradcheck_numeric(attention_loss, &c, inputs[i], 1e-2);
        const double err = gradcheck_rel_error(grads[i], numeric);
        cr_expect(err < 1e-3, "input %d: relative error %.3g", i, err);
        TENSOR_FREE(numeric, grads[i]);
    }
    position_attention_cache_free(&cache);
    TENSOR_FREE(out, c.q, c.k, c.v, c.g);
}

Test(relpos_gradcheck, rope) { gradcheck_attention(HEAD_POSITIONS_ROPE, false); }
Test(relpos_gradcheck, rope_causal) { gradcheck_attention(HEAD_POSITIONS_ROPE, true); }
Test(relpos_gradcheck, alibi) { gradcheck_attention(HEAD_POSITIONS_ALIBI, false); }
Test(relpos_gradcheck, alibi_causal) { gradcheck_attention(HEAD_POSITIONS_ALIBI, true); }

typedef struct {
    PositionModel *model;
    int *tokens;
    Tensor *g;
} ModelCtx;

static double model_loss(void *p)
{
    const ModelCtx *c = p;
    Tensor *logits = position_model_forward(c->model, c->tokens, 2, 5, 3, NULL, NULL);
    double sum = 0.0;
    for (size_t i = 0; i < logits->size; i++)
        sum += (double)logits->data[i] * c->g->data[i];
    tensor_free(logits);
    return sum;
}

/* Every parameter of the model, for every scheme, at first position 3. */
Test(position_model, gradcheck_every_parameter_of_every_scheme)
{
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        Rng rng = rng_new(3 + (uint64_t)scheme);
        const int V = 7, D = 8, H = 2;
        ModelCtx c = {position_model_new(V, D, H, scheme, 10, scheme % 2 == 1, &rng),
                      (int[]){1, 4, 6, 0, 2, 3, 3, 5, 1, 0},
                      tensor_normal(&rng, 0, 1, SHAPE(2, 5, V))};
        PositionModelCache cache = {0};
        parameters_zero_grad(c.model->params, c.model->num_params);
        Tensor *logits = position_model_forward(c.model, c.tokens, 2, 5, 3, NULL, &cache);
        position_model_backward(c.model, &cache, c.g);
        for (int p = 0; p < c.model->num_params; p++) {
            const Parameter *param = &c.model->params[p];
            Tensor *numeric = gradcheck_numeric(model_loss, &c, param->value, 1e-2);
            const double err = gradcheck_rel_error(param->grad, numeric);
            cr_expect(err < 2e-3, "%s, %s: relative error %.3g", position_scheme_names[scheme],
                      param->name, err);
            tensor_free(numeric);
        }
        if (scheme == POSITIONS_LEARNED) {
            /* positions 3 ... 7 were used: rows 0-2 and 8-9 get nothing */
            const Tensor *grad = c.model->grad_embed_positions;
            for (int row = 0; row < 10; row++)
                for (int i = 0; i < D; i++)
                    if (row < 3 || row > 7)
                        cr_expect_eq(AT2(grad, row, i), 0.0f, "row %d", row);
        }
        position_model_cache_free(&cache);
        TENSOR_FREE(logits, c.g);
        position_model_free(c.model);
    }
}

/* The page's symmetry table in miniature: RoPE and ALiBi give the same
 * logits at any offset; sinusoidal and learned do not. */
Test(position_model, offset_changes_only_absolute_schemes)
{
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        Rng rng = rng_new(21);
        PositionModel *model = position_model_new(9, 16, 4, scheme, 600, false, &rng);
        const int tokens[6] = {3, 1, 4, 8, 5, 0};
        Tensor *at0 = position_model_forward(model, tokens, 1, 6, 0, NULL, NULL);
        Tensor *at500 = position_model_forward(model, tokens, 1, 6, 500, NULL, NULL);
        const double change = tensor_max_abs_diff(at0, at500) / tensor_max_abs(at0);
        if (scheme == POSITIONS_SINUSOIDAL || scheme == POSITIONS_LEARNED)
            cr_expect(change > 1e-2, "%s: change %g", position_scheme_names[scheme], change);
        else
            cr_expect(change < 1e-5, "%s: change %g", position_scheme_names[scheme], change);
        TENSOR_FREE(at0, at500);
        position_model_free(model);
    }
}

/* ---- the length experiment ------------------------------------------------------ */

/* ALiBi with W_q = 0: each score is the bias alone, -m_h |i - j|, so the
 * weights are worked out here from the slopes of 2 heads, 1/16 and 1/256:
 * under the causal mask query t weighs key j by exp(-m (t - j)), j <= t;
 * without it, exp(-m |t - j|) over every key. The right key is t - 1 for
 * "1 back" (queries 1 ... T-1) and T-1-t for reversal. */
static double alibi_right_key(int T, bool causal)
{
    const double slopes[2] = {1.0 / 16, 1.0 / 256};
    double sum = 0.0;
    for (int h = 0; h < 2; h++)
        for (int t = causal ? 1 : 0; t < T; t++) {
            double total = 0.0;
            for (int j = 0; j < (causal ? t + 1 : T); j++)
                total += exp(-slopes[h] * abs(t - j));
            const int right = causal ? t - 1 : T - 1 - t;
            sum += exp(-slopes[h] * abs(t - right)) / total;
        }
    return sum / (2.0 * (causal ? T - 1 : T));
}

Test(length_experiment, right_key_weight_by_hand)
{
    const int T = 6, V = 24;
    Task task = task_reversal(T, V);
    TaskBatch *set = task_batch_new(&task, 5);
    Rng rng = rng_new(8);
    task_draw(&task, set, SPLIT_HELDOUT, &rng);
    for (int causal = 0; causal < 2; causal++) {
        PositionModel *model = position_model_new(V, 8, 2, POSITIONS_ALIBI, T, causal, &rng);
        for (size_t i = 0; i < model->attention->W_q->size; i++)
            model->attention->W_q->data[i] = 0.0f;
        const LengthTask which = causal ? LENGTH_TASK_BACK : LENGTH_TASK_REVERSE;
        const double got = length_right_key_weight(model, set, which, 1);
        const double expected = alibi_right_key(T, causal);
        cr_expect(fabs(got - expected) < 1e-6, "%s: %.7f, expected %.7f",
                  length_task_names[which], got, expected);
        position_model_free(model);
    }
    task_batch_free(set);
}

/* Every model stops by the rule, before the cap: 5 checks (500 steps)
 * after its best one; one that learned the task looks at the right key. With a cap below the first check, every model
 * takes exactly the cap. */
Test(length_experiment, training_stops_when_the_check_stops_rising, .timeout = 240)
{
    LengthSetup setup = LENGTH_DEFAULTS;
    setup.seeds = 1;
    setup.examples = 50;
    LengthExperiment *e = length_experiment_run(&setup);
    for (const LengthRun *run = e->runs; run < e->runs + e->count; run++) {
        const char *name = position_scheme_names[run->scheme];
        cr_expect(!run->diverged, "%s diverged", name);
        cr_expect(run->steps < setup.steps &&
                      run->steps == run->best_step + setup.patience * LENGTH_CHECK_EVERY,
                  "%s, %s: %d steps, the best check at %d", length_task_names[run->task],
                  name, run->steps, run->best_step);
        if (run->task == LENGTH_TASK_BACK && run->scheme == POSITIONS_LEARNED)
            cr_expect(run->accuracy[0] > 0.9 && run->right_key[0] > 0.9,
                      "learned positions at L: accuracy %g, weight on the right key %g",
                      run->accuracy[0], run->right_key[0]);
    }
    length_experiment_free(e);
    setup.steps = 60;
    e = length_experiment_run(&setup);
    for (const LengthRun *run = e->runs; run < e->runs + e->count; run++)
        cr_expect_eq(run->steps, 60, "%s: %d steps", position_scheme_names[run->scheme],
                     run->steps);
    length_experiment_free(e);
}

/* --patience 2: every model stops 2 checks (200 steps) after its best */
Test(length_experiment, patience_sets_the_checks_without_a_rise, .timeout = 240)
{
    LengthSetup setup = LENGTH_DEFAULTS;
    setup.seeds = 1;
    setup.examples = 50;
    setup.patience = 2;
    LengthExperiment *e = length_experiment_run(&setup);
    for (const LengthRun *run = e->runs; run < e->runs + e->count; run++)
        cr_expect(run->steps == run->best_step + 2 * LENGTH_CHECK_EVERY,
                  "%s, %s: %d steps, the best check at %d", length_task_names[run->task],
                  position_scheme_names[run->scheme], run->steps, run->best_step);
    length_experiment_free(e);
}

/* ---- the program ----------------------------------------------------------------- */

#define RELPOS "06_permutation_invariance/relative_positions"

/* The two figures of a row of part 1's table: "  RoPE   1.3e-01   1.3e-07" */
static void table_row(const char *out, const char *scheme, double *permuted, double *offset)
{
    char start[32];
    snprintf(start, sizeof start, "\n  %-12s", scheme);
    const char *row = strstr(out, start);
    cr_assert(row != NULL, "no row for %s in:\n%s", scheme, out);
    cr_assert_eq(sscanf(row + strlen(start), "%lf %lf", permuted, offset), 2, "row %s", scheme);
}

Test(relative_positions, symmetry_table)
{
    RunResult r = run_program(RELPOS, "");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    double permuted, offset;
    table_row(r.out, "none", &permuted, &offset);
    cr_expect(permuted < 1e-5 && offset < 1e-5, "none: %g %g", permuted, offset);
    const char *absolute[2] = {"sinusoidal", "learned"};
    for (int i = 0; i < 2; i++) {
        table_row(r.out, absolute[i], &permuted, &offset);
        cr_expect(permuted > 1e-2 && offset > 1e-2, "%s: %g %g", absolute[i], permuted, offset);
    }
    const char *relative[2] = {"RoPE", "ALiBi"};
    for (int i = 0; i < 2; i++) {
        table_row(r.out, relative[i], &permuted, &offset);
        cr_expect(permuted > 1e-2 && offset < 1e-5, "%s: %g %g", relative[i], permuted, offset);
    }
    run_result_free(&r);
}

/* --from a fixture folder --to a scratch one: the three files PyTorch made */
static void check_files(const char *name, const char *args)
{
    char to[64], command[512], dir[256];
    scratch_dir_make(to, sizeof to, "relpos");
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    snprintf(command, sizeof command, "--from %s --to %s %s", dir, to, args);
    RunResult r = run_program(RELPOS, command);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", command, r.status, r.err);
    const char *names[3] = {"scores", "weights", "output"};
    for (int i = 0; i < 3; i++) {
        char expected_name[64];
        snprintf(expected_name, sizeof expected_name, "expected_%s", names[i]);
        Tensor *got = load_case(to, names[i]), *expected = load_case(dir, expected_name);
        cr_expect(tensor_allclose(got, expected, 1e-6f, 1e-5f, stderr), "%s: %s differs", name,
                  names[i]);
        TENSOR_FREE(got, expected);
    }
    run_result_free(&r);
    scratch_dir_remove(to);
}

Test(relative_positions, from_to_rope)
{
    check_files("rope_causal", "--positions rope --causal --offset 3");
}
Test(relative_positions, from_to_rope_offset)
{
    check_files("rope_full_offset", "--positions rope --offset 1000");
}
Test(relative_positions, from_to_alibi)
{
    check_files("alibi_causal", "--positions alibi --causal");
}
Test(relative_positions, from_to_alibi_six_heads)
{
    check_files("alibi_six_heads", "--positions alibi --offset 7");
}
Test(relative_positions, from_to_none) { check_files("none_causal", "--positions none --causal"); }

#define RELFILES "06_permutation_invariance/relative_files"

/* The files of one run, loaded, in the order scores, weights, output. */
static void load_results(const char *dir, Tensor *out[3])
{
    const char *names[3] = {"scores", "weights", "output"};
    for (int i = 0; i < 3; i++)
        out[i] = load_case(dir, names[i]);
}

/* relative_positions runs --from and --to with relative_files' code: the same
 * command line run both ways prints the same lines, the errors under
 * relative_positions' name, and writes the same files bit for bit. */
Test(relative_positions, file_mode_is_the_tool)
{
    char to[2][64], command[512];
    const char *const programs[2] = {RELPOS, RELFILES};
    RunResult r[2];
    Tensor *files[2][3];
    for (int p = 0; p < 2; p++) {
        scratch_dir_make(to[p], sizeof to[p], "relpos_tool");
        snprintf(command, sizeof command, "--from %s/rope_causal --to %s --positions rope "
                 "--causal --offset 3", FIXTURES, to[p]);
        r[p] = run_program(programs[p], command);
        cr_assert_eq(r[p].status, 0, "%s %s: exit %d: %s", programs[p], command, r[p].status,
                     r[p].err);
        load_results(to[p], files[p]);
    }
    /* the lines name the folder written: the same text but for it */
    const char *tail[2] = {strstr(r[0].out, to[0]), strstr(r[1].out, to[1])};
    cr_assert(tail[0] != NULL && tail[1] != NULL, "no folder in:\n%s\n%s", r[0].out, r[1].out);
    cr_expect_eq(tail[0] - r[0].out, tail[1] - r[1].out);
    cr_expect_eq(strncmp(r[0].out, r[1].out, (size_t)(tail[0] - r[0].out)), 0);
    cr_expect_str_eq(tail[0] + strlen(to[0]), tail[1] + strlen(to[1]));
    for (int i = 0; i < 3; i++)
        expect_close(files[0][i], files[1][i], 0.0f, 0.0f);
    /* an error: one line, the same words, each under its own name */
    snprintf(command, sizeof command, "--from %s/rope_causal --to %s --positions sideways",
             FIXTURES, to[0]);
    RunResult e[2] = {run_program(RELPOS, command), run_program(RELFILES, command)};
    cr_expect(e[0].status == 2 && e[1].status == 2, "exits %d and %d", e[0].status, e[1].status);
    cr_expect_str_eq(e[0].err, "relative_positions: --positions 'sideways': expected none, "
                     "rope or alibi\n");
    cr_expect_str_eq(e[1].err, "relative_files: --positions 'sideways': expected none, "
                     "rope or alibi\n");
    run_result_free(&e[0]);
    run_result_free(&e[1]);
    for (int p = 0; p < 2; p++) {
        TENSOR_FREE(files[p][0], files[p][1], files[p][2]);
        run_result_free(&r[p]);
        scratch_dir_remove(to[p]);
    }
}

/* Every seed trains on its own streams: one thread or two, the same output. */
Test(relative_positions, training_does_not_depend_on_threads)
{
    const char *args = "--train --steps 20 --seeds 2 --examples 20 --threads %d";
    char command[2][128];
    RunResult r[2];
    for (int i = 0; i < 2; i++) {
        snprintf(command[i], sizeof command[i], args, i + 1);
        r[i] = run_program(RELPOS, command[i]);
        cr_assert_eq(r[i].status, 0, "%s: exit %d: %s", command[i], r[i].status, r[i].err);
    }
    cr_expect_str_eq(r[0].out, r[1].out);
    cr_expect(strstr(r[0].out, "Task 2: reversal") != NULL);
    run_result_free(&r[0]);
    run_result_free(&r[1]);
}
