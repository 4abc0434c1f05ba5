/*
 * induction_heads - what two attention layers do together that one cannot:
 * a two-layer attention-only model learns to continue sequences that
 * repeat, through a previous-token head in layer 1 and an induction head
 * in layer 2 that reads it (chapter 06's page "Induction heads").
 *
 * Part 1: the task and the model.
 * Part 2: the first seed's training, the loss of each part of the
 *         sequences over the steps, the step of the phase change and how
 *         many steps the climb took.
 * Part 3: every head's previous-token and induction scores, the best
 *         previous-token head's weight query by query, and where the best
 *         two look on one held-out sequence.
 * Part 4: each head silenced in turn, its output zeroed and replaced by
 *         its mean; a one-layer model of the same width trained the same
 *         way, beside two bags that know only the tokens seen.
 * Part 5: all of it over several seeds, with success rates.
 * --to DIR saves the first seed's model; --from DIR reads a model instead
 * of training and runs parts 3 and 4 on it.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads of a
 * layer, D = num_hiddens, V = vocabulary, P = a sequence's period.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_attention_layer.h"
#include "heads.h"
#include "induction_experiment.h"
#include "io/cli.h"
#include "io/model.h"
#include "io/plot.h"
#include "learn/induction_model.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "tensor.h"

static const char PROG[] = "induction_heads";

enum { MAX_SEEDS = INDUCTION_MAX_SEEDS, MAX_LAYERS = 2, MAX_HEADS = INDUCTION_MAX_HEADS, MAX_LENGTH = 128,
       MAX_THREADS = 64, CROP = HEATMAP_TERMINAL_MAX };

typedef struct {
    uint64_t seed;
    int vocab, length, num_hiddens, steps, batch, seeds, examples, num_threads;
    int num_heads[MAX_LAYERS];   /* of layer 1 (and of the one-layer model), of layer 2 */
    float lr;
    const char *plot_dir, *to_dir, *from_dir;
} Options;

/* The experiment's part of the options; the models train on the fast
 * layer with one thread each (the threads go to the seeds). */
static InductionSetup setup_of(const Options *opt)
{
    return (InductionSetup){opt->seed, opt->vocab, opt->length, opt->num_hiddens, opt->steps,
                            opt->batch, opt->examples, {opt->num_heads[0], opt->num_heads[1]},
                            opt->lr, fast_attention_layer(1)};
}

/* What the options must satisfy together (exit 2); then the memory a run
 * needs: the held-out set's weights, streams and logits for every layer,
 * and a step's the same on its batch, with gradients, on each thread. 0,
 * or the exit status after one line. */
static int check_options(const Options *opt)
{
    if (opt->vocab < opt->length / 2)
        cli_fail(PROG, "--vocab %d is fewer than %d: a period holds up to T/2 different tokens",
                 opt->vocab, opt->length / 2);
    if (opt->from_dir != NULL && opt->to_dir != NULL)
        cli_fail(PROG, "--from reads a model; --to saves a trained one: use one of them");
    const double T = opt->length, D = opt->num_hiddens, V = opt->vocab;
    const double H = opt->num_heads[0] + opt->num_heads[1];
    const double per_sequence = (MAX_LAYERS + 1) * 8.0 * T * D + 3.0 * H * T * T + 2.0 * T * V;
    const double threads = opt->num_threads < opt->seeds ? opt->num_threads : opt->seeds;
    char detail[96];
    snprintf(detail, sizeof detail, "%d held-out sequences of %d tokens", opt->examples,
             opt->length);
    return memory_require(4.0 * per_sequence * (opt->examples + 3.0 * threads * opt->batch),
                          detail, "use a smaller --examples, --batch or --threads");
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .vocab = 64, .length = 32, .num_hiddens = 64, .num_heads = {2, 1},
                   .steps = 600, .batch = 32, .seeds = 8, .examples = 200, .num_threads = 2,
                   .lr = 0.005f};
    const CliOption options[] = {
        {"--vocab", CLI_INT, &opt.vocab, .min = 2, .max = 512, .metavar = "V",
         .help = "tokens to draw from, at least T / 2"},
        {"--length", CLI_INT, &opt.length, .min = 8, .max = MAX_LENGTH, .metavar = "T",
         .help = "tokens a sequence holds (periods from T/4 to T/2)"},
        {"--hiddens", CLI_INT, &opt.num_hiddens, .min = 2, .max = 256, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads1", CLI_INT, &opt.num_heads[0], .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads of layer 1 and of the one-layer model, dividing D",
         .splits = &opt.num_hiddens},
        {"--heads2", CLI_INT, &opt.num_heads[1], .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads of layer 2, dividing D", .splits = &opt.num_hiddens},
        {"--steps", CLI_INT, &opt.steps, .min = INDUCTION_WINDOW, .max = 100000, .metavar = "N",
         .help = "Adam steps per model"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 1024, .metavar = "B",
         .help = "sequences per step"},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "seeds (parameters, batches) in part 5"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S",
         .help = "the first seed, and the held-out set's"},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = 2000, .metavar = "N",
         .help = "held-out sequences"},
        {"--threads", CLI_INT, &opt.num_threads, .min = 1, .max = MAX_THREADS, .metavar = "N",
         .help = "threads over seeds (the results do not depend on it)"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write DIR/induction_losses and DIR/induction_heads {.dat,.gp}"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the first seed's two-layer model as .npy files"},
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "read a model saved with --to instead of training"},
    };
    *done = cli_parse(&(CliTable){PROG, "Two attention layers learn to copy from context: a "
                                  "previous-token head and an induction head.", CLI_COUNT(options),
                                  options},
                      argc, argv);
    return opt;
}

/* ---- the parts ----------------------------------------------------------------------- */

static void part1_task(const Options *opt, const InductionHeldOut *held_out, bool trained)
{
    const int T = opt->length, P = held_out->periods[0];
    const InductionSetup setup = setup_of(opt);
    printf("Induction heads: two attention layers that copy from context\n\n"
           "Part 1. The task and the model\n\n"
           "A sequence is P different tokens out of %d, then the same P again, and again,\n"
           "until it holds %d; P changes from sequence to sequence, from %d to %d. The\n"
           "model reads tokens 0 .. t and predicts token t + 1. A held-out example, P = %d:\n\n ",
           opt->vocab, T + 1, induction_min_period(&setup), induction_max_period(&setup), P);
    for (int t = 0; t <= T; t++)
        printf(" %d%s", held_out->tokens[t], t == P - 1 ? " |" : "");
    printf("\n\nIn the first part (predictions at t < P) the next token is new: a guess\n"
           "costs log %d = %.3f (a little less among the tokens not seen yet). In the\n"
           "repeated part (t >= P) token t appeared P places back, and what followed\n"
           "it then follows it now.\n\n",
           opt->vocab, log((double)opt->vocab));
    printf("The model: embed_tokens (%d, %d) + embed_positions (%d, %d), then two\n"
           "layers of causal self-attention, %d %s in layer 1 and %d in layer 2, no\n"
           "biases, no MLP, no layer norm, each layer's output added to its input;\n"
           "unembed %d -> %d.%s\n\n",
           opt->vocab, opt->num_hiddens, T, opt->num_hiddens, opt->num_heads[0],
           opt->num_heads[0] == 1 ? "head" : "heads", opt->num_heads[1], opt->num_hiddens,
           opt->vocab, trained ? "" : " Read from --from.");
    if (trained)
        printf("Training: %d Adam steps of %d sequences, lr %g, for each of %d seeds from\n"
               "%llu, a one-layer model (layer 1 alone) beside each; held out: %d sequences,\n"
               "none trained on.\n\n",
               opt->steps, opt->batch, (double)opt->lr, opt->seeds,
               (unsigned long long)opt->seed, opt->examples);
}

static int part2_training(const Options *opt, const InductionSeedResult *r)
{
    const double log_v = log((double)opt->vocab);
    printf("Part 2. Seed %llu's training: the loss of each part, on each step's batch\n\n"
           "   step   first part   repeated part   in-context gain\n",
           (unsigned long long)opt->seed);
    const int every = opt->steps >= 200 ? 50 : opt->steps >= 20 ? 10 : 1;
    for (int s = every; s <= opt->steps; s += every)
        printf("  %5d   %10.3f   %13.3f   %15.3f\n", s, (double)r->first_curve[s - 1],
               (double)r->repeated_curve[s - 1],
               (double)(r->first_curve[s - 1] - r->repeated_curve[s - 1]));
    if (r->phase_step > 0)
        printf("\nThe phase change: at step %d the gain, averaged over %d steps, first\n"
               "reaches half of log %d (%.3f).\n", r->phase_step, INDUCTION_WINDOW, opt->vocab,
               0.5 * log_v);
    if (r->phase_step > 0 && r->rise_start > 0 && r->rise_end > 0)
        printf("It took %d steps to reach a quarter of log %d, then %d more to go from a\n"
               "quarter to three quarters (steps %d to %d).\n\n", r->rise_start, opt->vocab,
               r->rise_end - r->rise_start, r->rise_start, r->rise_end);
    else if (r->phase_step > 0)
        printf("\n");
    else
        printf("\nNo phase change: the gain, averaged over %d steps, never reaches half of\n"
               "log %d (%.3f).\n\n", INDUCTION_WINDOW, opt->vocab, 0.5 * log_v);
    if (opt->plot_dir == NULL)
        return 0;
    const int S = opt->steps;
    Tensor *xs = tensor_zeros(SHAPE(S)), *ys = tensor_zeros(SHAPE(3, S));
    for (int s = 0; s < S; s++) {
        xs->data[s] = (float)(s + 1);
        AT2(ys, 0, s) = r->first_curve[s];
        AT2(ys, 1, s) = r->repeated_curve[s];
        AT2(ys, 2, s) = r->first_curve[s] - r->repeated_curve[s];
    }
    const char *titles[3] = {"first part", "repeated part", "in-context gain"};
    const int status = plot_curves(opt->plot_dir, "induction_losses", xs, ys, "step",
                                   "cross-entropy loss (nats)", titles, false);
    if (status == 0)
        printf("wrote %s/induction_losses.dat and .gp (render: gnuplot "
               "%s/induction_losses.gp)\n\n", opt->plot_dir, opt->plot_dir);
    TENSOR_FREE(xs, ys);
    return status;
}

/* rows [r0, r0 + n) and columns [c0, c0 + n) of matrix (T, T), new (n, n) */
static Tensor *crop(const float *matrix, int T, int r0, int c0, int n)
{
    Tensor *out = tensor_zeros(SHAPE(n, n));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (r0 + i < T && c0 + j >= 0 && c0 + j < T)
                AT2(out, i, j) = matrix[(r0 + i) * T + c0 + j];
    return out;
}



/* The two maps in the terminal, each cropped to its stripe and labelled
 * with the positions: layer 1 on the queries 1 .. 16 (key t - 1), layer 2
 * on the 16 queries where the repeat starts (key t - P + 1). */
static void print_stripes(const float *prev_map, int hp, const float *ind_map, int hi, int T,
                          int P, int b)
{
    const int n = T - P < CROP ? T - P : CROP, n1 = T - 1 < CROP ? T - 1 : CROP;
    printf("Held-out sequence %d (P = %d); rows are queries, columns keys, both by\n"
           "position:\n\n", b, P);
    char title[128];
    Tensor *view = crop(prev_map, T, 1, 0, n1);
    snprintf(title, sizeof title, "layer 1, head %d: queries 1 .. %d, keys 0 .. %d (key t - 1 on "
             "the diagonal)", hp, n1, n1 - 1);
    heatmap_terminal_at(stdout, view, title, 1, 0);
    tensor_free(view);
    view = crop(ind_map, T, P, 1, n);
    snprintf(title, sizeof title, "layer 2, head %d: queries %d .. %d, keys 1 .. %d (key t - P + 1 "
             "on the diagonal)", hi, P, P + n - 1, n);
    printf("\n");
    heatmap_terminal_at(stdout, view, title, P, 1);
    tensor_free(view);
}

/* --plot: the two whole (T, T) maps. Returns 0 or 1. */
static int plot_stripes(const char *dir, const float *prev_map, int hp, const float *ind_map,
                        int hi, int T)
{
    Tensor *panels = tensor_zeros(SHAPE(2, T, T));
    memcpy(panels->data, prev_map, (size_t)T * T * sizeof(float));
    memcpy(panels->data + (size_t)T * T, ind_map, (size_t)T * T * sizeof(float));
    char t0[64], t1[64];
    snprintf(t0, sizeof t0, "layer 1, head %d (previous token)", hp);
    snprintf(t1, sizeof t1, "layer 2, head %d (induction)", hi);
    const char *titles[2] = {t0, t1};
    const int status = plot_heatmaps(dir, "induction_heads", panels, "key position",
                                     "query position", titles);
    if (status == 0)
        printf("\nwrote %s/induction_heads.dat and .gp (render: gnuplot "
               "%s/induction_heads.gp)\n", dir, dir);
    tensor_free(panels);
    return status;
}

static int part3_heads(const Options *opt, InductionModel *model, const InductionHeldOut *held_out,
                       const InductionMeasures *m)
{
    const int T = model->length;
    induction_print_scores(model, m);
    if (model->num_layers < 2)
        return 0;
    // one held-out sequence of period T/2, or the first one
    int b = 0;
    for (int i = 0; i < held_out->count; i++)
        if (held_out->periods[i] == T / 2) {
            b = i;
            break;
        }
    Tensor *weights[INDUCTION_MAX_LAYERS] = {NULL};   /* (1, H_l, T, T) each */
    Tensor *logits = induction_forward(model, held_out->tokens + (size_t)b * (T + 1), 1, weights,
                                       NULL);
    const int hp = induction_best_head(m->previous_needed[0], model->num_heads[0]);
    const int hi = induction_best_head(m->induction[1], model->num_heads[1]);
    induction_print_previous_by_query(model, held_out, hp);
    const float *prev_map = &AT4(weights[0], 0, hp, 0, 0), *ind_map = &AT4(weights[1], 0, hi, 0, 0);
    print_stripes(prev_map, hp, ind_map, hi, T, held_out->periods[b], b);
    const int status = opt->plot_dir != NULL
                           ? plot_stripes(opt->plot_dir, prev_map, hp, ind_map, hi, T) : 0;
    printf("\n");
    TENSOR_FREE(weights[0], weights[1], logits);
    return status;
}

/* Each head, then each layer, silenced: its output set to zero (the
 * table over seeds uses this) and, beside it, replaced by its mean over
 * the held-out sequences at each position. */
static void part4_ablation(const Options *opt, InductionModel *model,
                           const InductionHeldOut *held_out, const InductionMeasures *m,
                           const InductionSeedResult *r, double seen_tokens, double least_seen)
{
    const double log_v = log((double)opt->vocab);
    printf("Part 4. Each head silenced in turn: the repeated part's held-out loss,\n"
           "%.3f with every head, log %d = %.3f for a guess. Zero: the head's output\n"
           "set to zero; mean: replaced by its mean at each position over the held-out\n"
           "sequences.\n\n"
           "  silenced            zero     mean\n", m->repeated, opt->vocab, log_v);
    for (int l = 0; l < model->num_layers; l++)
        for (int h = 0; h < model->num_heads[l]; h++)
            printf("  layer %d, head %d    %6.3f   %6.3f\n", l + 1, h, m->ablated[l][h],
                   induction_mean_ablated(model, held_out, l, h));
    for (int l = 0; l < model->num_layers; l++)
        printf("  all of layer %d     %6.3f   %6.3f\n", l + 1, m->ablated_layer[l],
               induction_mean_ablated(model, held_out, l, -1));
    if (r != NULL)
        printf("\nThe one-layer model (layer 1 alone), same seed and batches: first part\n"
               "%.3f, repeated part %.3f (%.2f of log %d). Bags of the tokens seen: betting\n"
               "evenly on every token seen, %.3f; on the tokens seen the fewest times,\n"
               "the current one left out, %.3f.\n",
               r->one_layer_first, r->one_layer_repeated, r->one_layer_repeated / log_v,
               opt->vocab, seen_tokens, least_seen);
    printf("\n");
}

/* ---- main --------------------------------------------------------------------------- */

/* --to DIR: the model's files, and beside them the held-out tokens
 * (B * (T + 1) ints) and the model's loss on each prediction (B * T), so
 * that tests/fixtures/make_induction_fixtures.py --check DIR can redo the
 * losses in PyTorch. */
static int save_model(const Options *opt, const InductionModel *model, const InductionHeldOut *held_out,
                      char *err, size_t err_len)
{
    const int B = held_out->count, T = opt->length;
    Tensor *losses = tensor_zeros(SHAPE(B * T));
    induction_losses(model, held_out->tokens, B, losses->data);
    ModelFile files[INDUCTION_MAX_FILES + 2];
    memcpy(files, model->files, (size_t)model->num_files * sizeof *files);
    files[model->num_files] = (ModelFile){.name = "heldout_tokens", .ints = held_out->tokens,
                                          .num_ints = B * (T + 1)};
    files[model->num_files + 1] = (ModelFile){.name = "heldout_losses", .parts = {losses}};
    const int status = model_save(opt->to_dir, files, model->num_files + 2, err, err_len);
    tensor_free(losses);
    return status;
}

/* --from DIR: the two-layer model as saved, then parts 3 and 4. */
static int run_from(const Options *opt, const InductionHeldOut *held_out)
{
    int layers = 0;
    Options shown = *opt;
    char err[MODEL_ERR_LEN];
    if (model_read_ints(opt->from_dir, "num_layers", &layers, 1, err, sizeof err) != 0)
        return fail("%s", err);
    if (layers != MAX_LAYERS)
        return fail("%s: num_layers is %d; --from reads the %d-layer models "
                    "that --to saves", opt->from_dir, layers, MAX_LAYERS);
    if (model_read_ints(opt->from_dir, "num_heads", shown.num_heads, MAX_LAYERS, err,
                        sizeof err) != 0)
        return fail("%s", err);
    for (int l = 0; l < MAX_LAYERS; l++)
        if (shown.num_heads[l] > MAX_HEADS ||
            !heads_split(opt->num_hiddens, shown.num_heads[l], NULL, NULL, NULL, 0))
            return fail("%s: layer %d's num_heads %d does not fit --hiddens %d "
                        "(1 to %d heads)", opt->from_dir, l + 1, shown.num_heads[l],
                        opt->num_hiddens, MAX_HEADS);
    Rng rng = rng_new(0);
    InductionModel *model = induction_new(opt->vocab, opt->length, opt->num_hiddens,
                                          shown.num_heads, layers, &rng);
    if (model_load(opt->from_dir, model->files, model->num_files, err, sizeof err) != 0) {
        induction_free(model);
        return fail("%s", err);
    }
    const InductionMeasures m = induction_measure(model, held_out);
    if (!isfinite(m.first) || !isfinite(m.repeated)) {
        induction_free(model);
        return fail("%s: the held-out loss is %s: the model's forward overflows "
                    "float32 on these sequences", opt->from_dir,
                    non_finite_name(isfinite(m.first) ? m.repeated : m.first));
    }
    part1_task(&shown, held_out, false);
    printf("Held-out loss: first part %.3f, repeated part %.3f\n\n", m.first, m.repeated);
    const int status = part3_heads(&shown, model, held_out, &m);
    part4_ablation(&shown, model, held_out, &m, NULL, 0.0, 0.0);
    induction_free(model);
    return status;
}

/* Every seed trained, then the parts that read seed 0's model and the
 * table over seeds; --to saves seed 0's model. Returns the exit status. */
static int run_experiment(const Options *opt, const InductionHeldOut *held_out)
{
    part1_task(opt, held_out, true);
    fflush(stdout);
    InductionSeedResult *results = checked_calloc((size_t)opt->seeds, sizeof *results);
    InductionSetup setup = setup_of(opt);
    InductionExperiment e = {&setup, held_out, results};
    seeds_run(opt->seeds, opt->num_threads, induction_seed_job, &e);
    int status = 0;
    for (int s = 0; s < opt->seeds; s++)
        if (results[s].broke)
            status = fail("seed %llu: the loss stopped being a number; try a smaller --lr",
                          (unsigned long long)(opt->seed + (uint64_t)s));
    if (status == 0) {
        /* each part plots whatever became of the other's plot; the first
         * failure's status is the run's */
        const int trained = part2_training(opt, &results[0]);
        const int heads = part3_heads(opt, results[0].model, held_out, &results[0].two_layer);
        status = trained != 0 ? trained : heads;
        const double seen = induction_seen_tokens_loss(held_out, opt->length);
        const double least_seen = induction_least_seen_loss(held_out, opt->length);
        part4_ablation(opt, results[0].model, held_out, &results[0].two_layer, &results[0], seen,
                       least_seen);
        induction_print_seeds(results, opt->seeds, &setup, least_seen);
        if (opt->to_dir != NULL) {
            char err[MODEL_ERR_LEN];
            if (save_model(opt, results[0].model, held_out, err, sizeof err) == 0)
                printf("\nsaved seed %llu's two-layer model in %s\n",
                       (unsigned long long)opt->seed, opt->to_dir);
            else
                status = fail("%s", err);
        }
    }
    for (int s = 0; s < opt->seeds; s++) {
        induction_free(results[s].model);
        free(results[s].first_curve);
        free(results[s].repeated_curve);
    }
    free(results);
    return status;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    int status = check_options(&opt);
    if (status != 0)
        return status;
    const InductionSetup setup = setup_of(&opt);
    InductionHeldOut held_out = induction_held_out_new(&setup);
    status = opt.from_dir != NULL ? run_from(&opt, &held_out)
                                  : run_experiment(&opt, &held_out);
    induction_held_out_free(&held_out);
    return status;
}
