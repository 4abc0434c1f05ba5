/*
 * induction_heads - what two attention layers do together that one cannot:
 * a two-layer attention-only model learns to continue sequences that
 * repeat, through a previous-token head in layer 1 and an induction head
 * in layer 2 that reads it (chapter 06's page "Induction heads").
 *
 * Part 1: the task and the model.
 * Part 2: the first seed's training, the loss of each part of the
 *         sequences over the steps, and the step of the phase change.
 * Part 3: every head's previous-token and induction scores, and where the
 *         best two look on one held-out sequence.
 * Part 4: each head silenced in turn, and a one-layer model of the same
 *         width trained the same way.
 * Part 5: all of it over several seeds, with success rates.
 * --to DIR saves the first seed's model; --from DIR reads a model instead
 * of training and runs parts 3 and 4 on it.
 *
 * Legend: B = batch_size, T = tokens of a sequence, H = num_heads,
 * D = num_hiddens, V = vocabulary, P = a sequence's period.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast/fast_attention_layer.h"
#include "io/cli.h"
#include "io/model.h"
#include "io/plot.h"
#include "learn/induction_model.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "tensor.h"

static const char PROG[] = "induction_heads";

enum { MAX_SEEDS = 64, MAX_LAYERS = 2, MAX_HEADS = 8, MAX_HEADS_ALL = MAX_LAYERS * MAX_HEADS,
       MAX_LENGTH = 128, MAX_THREADS = 64, CROP = HEATMAP_TERMINAL_MAX, WINDOW = 10 };

/* A run succeeds when the repeated part's held-out loss falls below this
 * share of log V while the first part stays within FIRST_PART_BAND of it. */
static const double SUCCESS_SHARE = 0.1, FIRST_PART_BAND = 0.1;

typedef struct {
    uint64_t seed;
    int vocab, length, num_hiddens, num_heads, steps, batch, seeds, examples, num_threads;
    float lr;
    const char *plot_dir, *to_dir, *from_dir;
} Options;

/* The periods of a run: a quarter to a half of the sequence. */
static int min_period(const Options *opt) { return opt->length / 4; }
static int max_period(const Options *opt) { return opt->length / 2; }

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .vocab = 64, .length = 32, .num_hiddens = 64, .num_heads = 2,
                   .steps = 600, .batch = 32, .seeds = 8, .examples = 200, .num_threads = 2,
                   .lr = 0.003f};
    const CliOption options[] = {
        {"--vocab", CLI_INT, &opt.vocab, .min = 2, .max = 512, .metavar = "V",
         .help = "tokens to draw from, at least T / 2"},
        {"--length", CLI_INT, &opt.length, .min = 8, .max = MAX_LENGTH, .metavar = "T",
         .help = "tokens a sequence holds (periods from T/4 to T/2)"},
        {"--hiddens", CLI_INT, &opt.num_hiddens, .min = 2, .max = 256, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &opt.num_heads, .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads of each layer, dividing D"},
        {"--steps", CLI_INT, &opt.steps, .min = WINDOW, .max = 100000, .metavar = "N",
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
        {"--from", CLI_STRING, &opt.from_dir, .metavar = "DIR",
         .help = "read a model saved with --to instead of training"},
    };
    cli_parse(&(CliTable){PROG, "Two attention layers learn to copy from context: a "
                          "previous-token head and an induction head.", CLI_COUNT(options),
                          options},
              argc, argv);
    if (opt.num_hiddens % opt.num_heads != 0)
        cli_fail(PROG, "--hiddens %d does not divide by --heads %d", opt.num_hiddens,
                 opt.num_heads);
    if (opt.vocab < opt.length / 2)
        cli_fail(PROG, "--vocab %d is fewer than %d: a period holds up to T/2 different tokens",
                 opt.vocab, opt.length / 2);
    if (opt.from_dir != NULL) {
        cli_check_input_dir(PROG, "--from", opt.from_dir);
        if (opt.to_dir != NULL)
            cli_fail(PROG, "--from reads a model; --to saves a trained one: use one of them");
    }
    /* the held-out set's weights, streams and logits for every layer; a step's
     * the same on its batch, with gradients, on each thread */
    const double T = opt.length, D = opt.num_hiddens, H = opt.num_heads, V = opt.vocab;
    const double per_sequence = (MAX_LAYERS + 1) * 8.0 * T * D + 3.0 * MAX_LAYERS * H * T * T +
                                2.0 * T * V;
    const double threads = opt.num_threads < opt.seeds ? opt.num_threads : opt.seeds;
    char detail[96];
    snprintf(detail, sizeof detail, "%d held-out sequences of %d tokens", opt.examples,
             opt.length);
    memory_require(4.0 * per_sequence * (opt.examples + 3.0 * threads * opt.batch), detail,
                   "use a smaller --examples, --batch or --threads");
    return opt;
}

/* ---- one seed --------------------------------------------------------------------- */

/* The held-out sequences: tokens (B, T + 1) and their periods (B,). */
typedef struct {
    int count;
    int *tokens, *periods;
} HeldOut;

/* What is measured of a model on the held-out set. */
typedef struct {
    double first, repeated;                    /* the mean loss of each part */
    double previous[MAX_HEADS_ALL];            /* per head, layer-major */
    double induction[MAX_HEADS_ALL];
    double ablated[MAX_HEADS_ALL];             /* repeated-part loss, that head silenced */
    double ablated_layer[MAX_LAYERS];          /* the same, every head of the layer silenced */
} Measures;

/* Everything a seed's job produces. */
typedef struct {
    InductionModel *model;       /* kept for the first seed only */
    float *first_curve, *repeated_curve;   /* (steps,): each step's batch, before the step */
    int phase_step;              /* 0: no phase change */
    Measures two_layer;
    double one_layer_first, one_layer_repeated;
    bool broke;                  /* a loss that was not a number */
} SeedResult;

/* losses (B*T) of sequences with periods (B,) -> the mean of each part. A
 * prediction at t (of token t + 1) is in the repeated part when t >= P. */
static void part_means(const float *losses, const int *periods, int B, int T, double *first,
                       double *repeated)
{
    double sums[2] = {0.0, 0.0};
    long counts[2] = {0, 0};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int part = t >= periods[b];
            sums[part] += losses[b * T + t];
            counts[part]++;
        }
    *first = sums[0] / (double)counts[0];
    *repeated = counts[1] > 0 ? sums[1] / (double)counts[1] : 0.0;
}

static double heldout_parts(const InductionModel *model, const HeldOut *held_out,
                            float *losses, double *first)
{
    double repeated;
    induction_losses(model, held_out->tokens, held_out->count, losses);
    part_means(losses, held_out->periods, held_out->count, model->length, first, &repeated);
    return repeated;
}

/* weights (B, H, T, T) of one layer -> each head's two scores:
 *   previous-token: the mean weight query t puts on key t - 1, t >= 1;
 *   induction: the weight query t puts on the keys just after the earlier
 *   occurrences of its token (t - P + 1, t - 2P + 1, ... >= 1), summed,
 *   and averaged over the queries of the repeated part (t >= P). */
static void head_scores(const Tensor *weights, const HeldOut *held_out, double *previous,
                        double *induction)
{
    const int B = weights->shape[0], H = weights->shape[1], T = weights->shape[2];
    for (int h = 0; h < H; h++) {
        double prev = 0.0, ind = 0.0;
        long n_prev = 0, n_ind = 0;
        for (int b = 0; b < B; b++) {
            const int P = held_out->periods[b];
            for (int t = 1; t < T; t++) {
                prev += AT4(weights, b, h, t, t - 1);
                n_prev++;
                if (t < P)
                    continue;
                for (int s = t - P + 1; s >= 1; s -= P)
                    ind += AT4(weights, b, h, t, s);
                n_ind++;
            }
        }
        previous[h] = prev / (double)n_prev;
        induction[h] = ind / (double)n_ind;
    }
}

/* The model on the held-out set: both parts' losses, the heads' scores and
 * the repeated part's loss with each head silenced. */
static Measures measure(InductionModel *model, const HeldOut *held_out)
{
    const int B = held_out->count, T = model->length, H = model->num_heads;
    const int D = model->num_hiddens;
    Measures m = {0};
    float *losses = checked_calloc(PROG, (size_t)B * T, sizeof *losses);
    m.repeated = heldout_parts(model, held_out, losses, &m.first);

    int *inputs = checked_calloc(PROG, (size_t)B * T, sizeof *inputs);
    for (int b = 0; b < B; b++)
        memcpy(inputs + (size_t)b * T, held_out->tokens + (size_t)b * (T + 1),
               (size_t)T * sizeof *inputs);
    Tensor *weights[INDUCTION_MAX_LAYERS] = {NULL};   /* (B, H, T, T) each */
    Tensor *logits = induction_forward(model, inputs, B, weights, NULL);
    for (int l = 0; l < model->num_layers; l++) {
        head_scores(weights[l], held_out, m.previous + l * H, m.induction + l * H);
        tensor_free(weights[l]);
    }
    tensor_free(logits);
    free(inputs);

    float *saved = checked_calloc(PROG, (size_t)D * D, sizeof *saved);
    const size_t head_floats = (size_t)D * D / (size_t)H;
    double first;
    for (int l = 0; l < model->num_layers; l++) {
        for (int h = 0; h < H; h++) {
            induction_ablate_head(model, l, h, saved);
            m.ablated[l * H + h] = heldout_parts(model, held_out, losses, &first);
            induction_restore_head(model, l, h, saved);
        }
        for (int h = 0; h < H; h++)
            induction_ablate_head(model, l, h, saved + h * head_floats);
        m.ablated_layer[l] = heldout_parts(model, held_out, losses, &first);
        for (int h = 0; h < H; h++)
            induction_restore_head(model, l, h, saved + h * head_floats);
    }
    free(saved);
    free(losses);
    return m;
}

/* The first step at which the in-context gain (first part's loss minus the
 * repeated part's), averaged over the last WINDOW steps, reaches half of
 * log V; 0 when it never does. */
static int phase_change_step(const float *first, const float *repeated, int steps, int vocab)
{
    double window = 0.0;
    for (int s = 0; s < steps; s++) {
        window += first[s] - repeated[s];
        if (s >= WINDOW)
            window -= first[s - WINDOW] - repeated[s - WINDOW];
        if (s >= WINDOW - 1 && window / WINDOW >= 0.5 * log((double)vocab))
            return s + 1;
    }
    return 0;
}

/* A model of num_layers layers trained from seed's streams, on the fast
 * layer with one thread (the threads go to the seeds). curves, when not
 * NULL, receive each step's two part losses. NULL when the loss stops
 * being a number. */
static InductionModel *train(const Options *opt, int num_layers, uint64_t seed,
                             float *first_curve, float *repeated_curve)
{
    Rng init = rng_use(seed, RNG_PARAMETERS), data = rng_use(seed, RNG_BATCHES);
    InductionModel *model = induction_new(opt->vocab, opt->length, opt->num_hiddens,
                                          opt->num_heads, num_layers, &init);
    model->attend = fast_attention_layer(1);
    Adam *adam = adam_new(model->params, model->num_params, opt->lr);
    const int B = opt->batch, T = opt->length;
    int *tokens = checked_calloc(PROG, (size_t)B * (T + 1), sizeof *tokens);
    int *periods = checked_calloc(PROG, (size_t)B, sizeof *periods);
    float *losses = checked_calloc(PROG, (size_t)B * T, sizeof *losses);
    for (int step = 1; step <= opt->steps; step++) {
        repeats_draw(tokens, periods, B, T, opt->vocab, min_period(opt), max_period(opt), &data);
        const double loss = induction_train_step(model, adam, tokens, B, losses);
        if (!isfinite(loss)) {
            induction_free(model);
            model = NULL;
            break;
        }
        if (first_curve != NULL) {
            double first, repeated;
            part_means(losses, periods, B, T, &first, &repeated);
            first_curve[step - 1] = (float)first;
            repeated_curve[step - 1] = (float)repeated;
        }
    }
    free(losses);
    free(periods);
    free(tokens);
    adam_free(adam);
    return model;
}

typedef struct {
    const Options *opt;
    const HeldOut *held_out;
    SeedResult *results;
} Experiment;

/* Job j: seed opt->seed + j, the two-layer model and the one-layer control. */
static void seed_job(void *arg, int j)
{
    const Experiment *e = arg;
    const Options *opt = e->opt;
    SeedResult *r = &e->results[j];
    const uint64_t seed = opt->seed + (uint64_t)j;
    r->first_curve = checked_calloc(PROG, (size_t)opt->steps, sizeof *r->first_curve);
    r->repeated_curve = checked_calloc(PROG, (size_t)opt->steps, sizeof *r->repeated_curve);
    InductionModel *model = train(opt, 2, seed, r->first_curve, r->repeated_curve);
    InductionModel *control = train(opt, 1, seed, NULL, NULL);
    if (model == NULL || control == NULL) {
        r->broke = true;
        induction_free(model);
        induction_free(control);
        return;
    }
    r->phase_step = phase_change_step(r->first_curve, r->repeated_curve, opt->steps,
                                      opt->vocab);
    r->two_layer = measure(model, e->held_out);
    const Measures c = measure(control, e->held_out);
    r->one_layer_first = c.first;
    r->one_layer_repeated = c.repeated;
    induction_free(control);
    if (j == 0)
        r->model = model;
    else
        induction_free(model);
}

/* ---- the parts ----------------------------------------------------------------------- */

static void part1_task(const Options *opt, const HeldOut *held_out, bool trained)
{
    const int T = opt->length, P = held_out->periods[0];
    printf("Induction heads: two attention layers that copy from context\n\n"
           "Part 1. The task and the model\n\n"
           "A sequence is P different tokens out of %d, then the same P again, and again,\n"
           "until it holds %d; P changes from sequence to sequence, from %d to %d. The\n"
           "model reads tokens 0 .. t and predicts token t + 1. A held-out example, P = %d:\n\n ",
           opt->vocab, T + 1, min_period(opt), max_period(opt), P);
    for (int t = 0; t <= T; t++)
        printf(" %d%s", held_out->tokens[t], t == P - 1 ? " |" : "");
    printf("\n\nIn the first part (predictions at t < P) the next token is new: a guess\n"
           "costs log %d = %.3f (a little less among the tokens not seen yet). In the\n"
           "repeated part (t >= P) token t appeared P places back, and what followed\n"
           "it then follows it now.\n\n",
           opt->vocab, log((double)opt->vocab));
    printf("The model: embed_tokens (%d, %d) + embed_positions (%d, %d), then %s\n"
           "causal self-attention, %d heads each, no biases, no MLP, no layer norm, each\n"
           "layer's output added to its input; unembed %d -> %d.%s\n\n",
           opt->vocab, opt->num_hiddens, T, opt->num_hiddens,
           trained ? "two layers of" : "the layers of", opt->num_heads, opt->num_hiddens,
           opt->vocab,
           trained ? "" : " Read from --from.");
    if (trained)
        printf("Training: %d Adam steps of %d sequences, lr %g, for each of %d seeds from\n"
               "%llu, a one-layer model beside each; held out: %d sequences, none trained on.\n\n",
               opt->steps, opt->batch, (double)opt->lr, opt->seeds,
               (unsigned long long)opt->seed, opt->examples);
}

static int part2_training(const Options *opt, const SeedResult *r)
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
               "reaches half of log %d (%.3f).\n\n", r->phase_step, WINDOW, opt->vocab,
               0.5 * log_v);
    else
        printf("\nNo phase change: the gain, averaged over %d steps, never reaches half of\n"
               "log %d (%.3f).\n\n", WINDOW, opt->vocab, 0.5 * log_v);
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
    return status == 0 ? 0 : 1;
}

/* The head of layer l with the largest score. */
static int best_head(const double *scores, int l, int H)
{
    int best = 0;
    for (int h = 1; h < H; h++)
        if (scores[l * H + h] > scores[l * H + best])
            best = h;
    return best;
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

static int part3_heads(const Options *opt, InductionModel *model, const HeldOut *held_out,
                       const Measures *m)
{
    const int H = model->num_heads, L = model->num_layers, T = model->length;
    printf("Part 3. The heads, on the held-out set\n\n"
           "previous-token score: the mean weight query t puts on key t - 1;\n"
           "induction score: the weight a query of the repeated part puts on the\n"
           "tokens that followed its token's earlier occurrences.\n\n"
           "  layer  head   previous-token   induction\n");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            printf("  %5d  %4d   %14.3f   %9.3f\n", l + 1, h, m->previous[l * H + h],
                   m->induction[l * H + h]);
    /* where are the best of each, over both layers? */
    int prev_at = 0, ind_at = 0;
    for (int i = 1; i < L * H; i++) {
        if (m->previous[i] > m->previous[prev_at])
            prev_at = i;
        if (m->induction[i] > m->induction[ind_at])
            ind_at = i;
    }
    printf("\nThe best previous-token head is in layer %d, the best induction head in\n"
           "layer %d%s\n\n", prev_at / H + 1, ind_at / H + 1,
           L == 2 && prev_at / H == 0 && ind_at / H == 1
               ? ": the previous-token head writes, the induction head reads."
               : ".");
    if (L < 2)
        return 0;

    // one held-out sequence of period T/2, or the first one
    int b = 0;
    for (int i = 0; i < held_out->count; i++)
        if (held_out->periods[i] == T / 2) {
            b = i;
            break;
        }
    const int P = held_out->periods[b];
    Tensor *weights[INDUCTION_MAX_LAYERS] = {NULL};
    Tensor *logits = induction_forward(model, held_out->tokens + (size_t)b * (T + 1), 1, weights,
                                       NULL);
    const int hp = best_head(m->previous, 0, H), hi = best_head(m->induction, 1, H);
    const float *prev_map = &AT4(weights[0], 0, hp, 0, 0);
    const float *ind_map = &AT4(weights[1], 0, hi, 0, 0);
    const int n = T - P < CROP ? T - P : CROP;
    printf("Held-out sequence %d (P = %d), queries t = %d .. %d, the start of the repeat:\n\n",
           b, P, P, P + n - 1);
    char title[128];
    Tensor *view = crop(prev_map, T, P, P - 1, n);
    snprintf(title, sizeof title, "layer 1, head %d: keys %d .. %d (key t - 1 on the diagonal)",
             hp, P - 1, P + n - 2);
    heatmap_terminal(stdout, view, title);
    tensor_free(view);
    view = crop(ind_map, T, P, 1, n);
    snprintf(title, sizeof title, "layer 2, head %d: keys 1 .. %d (key t - P + 1 on the diagonal)",
             hi, n);
    printf("\n");
    heatmap_terminal(stdout, view, title);
    tensor_free(view);
    int status = 0;
    if (opt->plot_dir != NULL) {
        Tensor *panels = tensor_zeros(SHAPE(2, T, T));
        memcpy(panels->data, prev_map, (size_t)T * T * sizeof(float));
        memcpy(panels->data + (size_t)T * T, ind_map, (size_t)T * T * sizeof(float));
        char t0[64], t1[64];
        snprintf(t0, sizeof t0, "layer 1, head %d (previous token)", hp);
        snprintf(t1, sizeof t1, "layer 2, head %d (induction)", hi);
        const char *titles[2] = {t0, t1};
        status = plot_heatmaps(opt->plot_dir, "induction_heads", panels, "key position",
                               "query position", titles);
        if (status == 0)
            printf("\nwrote %s/induction_heads.dat and .gp (render: gnuplot "
                   "%s/induction_heads.gp)\n", opt->plot_dir, opt->plot_dir);
        tensor_free(panels);
    }
    printf("\n");
    for (int l = 0; l < L; l++)
        tensor_free(weights[l]);
    tensor_free(logits);
    return status == 0 ? 0 : 1;
}

static void part4_ablation(const Options *opt, const InductionModel *model, const Measures *m,
                           const SeedResult *r)
{
    const int H = model->num_heads, L = model->num_layers;
    const double log_v = log((double)opt->vocab);
    printf("Part 4. Each head silenced in turn (its output set to zero): the repeated\n"
           "part's held-out loss, %.3f with every head, log %d = %.3f for a guess\n\n"
           "  silenced          repeated part   share of log %d\n", m->repeated, opt->vocab,
           log_v, opt->vocab);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            printf("  layer %d, head %d   %13.3f   %14.2f\n", l + 1, h, m->ablated[l * H + h],
                   m->ablated[l * H + h] / log_v);
    for (int l = 0; l < L; l++)
        printf("  all of layer %d   %13.3f   %14.2f\n", l + 1, m->ablated_layer[l],
               m->ablated_layer[l] / log_v);
    if (r != NULL)
        printf("\nThe one-layer model of the same width, same seed and batches: first part\n"
               "%.3f, repeated part %.3f (%.2f of log %d).\n\n", r->one_layer_first,
               r->one_layer_repeated, r->one_layer_repeated / log_v, opt->vocab);
    else
        printf("\n");
}

/* The layer-1 head with the best previous-token score and the layer-2 head
 * with the best induction score; the largest ablation loss of the others. */
typedef struct {
    int prev_head, ind_head;
    double prev, ind, ablate_prev, ablate_ind, ablate_other;
    bool success, heads_found, ablation_clear;
} SeedVerdict;

static SeedVerdict verdict(const Options *opt, const SeedResult *r)
{
    const Measures *m = &r->two_layer;
    const int H = opt->num_heads;
    const double log_v = log((double)opt->vocab);
    SeedVerdict v = {.prev_head = best_head(m->previous, 0, H),
                     .ind_head = best_head(m->induction, 1, H)};
    v.prev = m->previous[v.prev_head];
    v.ind = m->induction[H + v.ind_head];
    v.ablate_prev = m->ablated[v.prev_head];
    v.ablate_ind = m->ablated[H + v.ind_head];
    for (int i = 0; i < 2 * H; i++)
        if (i != v.prev_head && i != H + v.ind_head && m->ablated[i] > v.ablate_other)
            v.ablate_other = m->ablated[i];
    v.success = m->repeated < SUCCESS_SHARE * log_v &&
                fabs(m->first - log_v) <= FIRST_PART_BAND * log_v;
    v.heads_found = v.prev >= 0.4 && v.ind >= 0.4;
    /* both ablations at 0.8 log V or more; any other costs under a quarter of that */
    const double cost = fmin(v.ablate_prev, v.ablate_ind) - m->repeated;
    v.ablation_clear = v.ablate_prev >= 0.8 * log_v && v.ablate_ind >= 0.8 * log_v &&
                       v.ablate_other - m->repeated < 0.25 * cost;
    return v;
}

static void summary_line(const char *label, double *values, int n, const char *unit_fmt)
{
    double lowest = values[0], highest = values[0];
    for (int i = 1; i < n; i++) {
        lowest = fmin(lowest, values[i]);
        highest = fmax(highest, values[i]);
    }
    const double median = seeds_median(values, n);
    printf("  %-34s", label);
    printf(unit_fmt, median);
    printf("   ");
    printf(unit_fmt, lowest);
    printf(" to ");
    printf(unit_fmt, highest);
    printf("\n");
}

static void part5_seeds(const Options *opt, const SeedResult *results)
{
    const int S = opt->seeds;
    const double log_v = log((double)opt->vocab);
    printf("Part 5. Over %d %s (%llu to %llu), on the held-out set; log %d = %.3f\n\n"
           "                     two layers                          silenced          one layer\n"
           "  seed  phase   first  repeated  prev. (head)  ind. (head)   prev.  ind.  other   repeated\n",
           S, plural(S, "seed", "seeds"), (unsigned long long)opt->seed,
           (unsigned long long)(opt->seed + (uint64_t)S - 1), opt->vocab, log_v);
    int succeeded = 0, found = 0, clear = 0, control_failed = 0;
    double phase[MAX_SEEDS], prev[MAX_SEEDS], ind[MAX_SEEDS], rep[MAX_SEEDS];
    double abl_prev[MAX_SEEDS], abl_ind[MAX_SEEDS], abl_other[MAX_SEEDS], control[MAX_SEEDS];
    double abl_layer2[MAX_SEEDS];
    int n_phase = 0;
    for (int s = 0; s < S; s++) {
        const SeedResult *r = &results[s];
        const SeedVerdict v = verdict(opt, r);
        char phase_text[16];
        if (r->phase_step > 0)
            snprintf(phase_text, sizeof phase_text, "%d", r->phase_step);
        else
            snprintf(phase_text, sizeof phase_text, "none");
        printf("  %4llu  %5s   %5.3f   %7.3f  %5.2f (%d)     %5.2f (%d)    %5.2f  %5.2f  %5.2f   %8.3f%s\n",
               (unsigned long long)(opt->seed + (uint64_t)s), phase_text, r->two_layer.first,
               r->two_layer.repeated, v.prev, v.prev_head, v.ind, v.ind_head, v.ablate_prev,
               v.ablate_ind, v.ablate_other, r->one_layer_repeated, v.success ? "" : "  failed");
        succeeded += v.success;
        found += v.success && v.heads_found;
        clear += v.success && v.ablation_clear;
        control_failed += !(r->one_layer_repeated < SUCCESS_SHARE * log_v);
        if (r->phase_step > 0)
            phase[n_phase++] = r->phase_step;
        prev[s] = v.prev;
        ind[s] = v.ind;
        rep[s] = r->two_layer.repeated;
        abl_prev[s] = v.ablate_prev;
        abl_ind[s] = v.ablate_ind;
        abl_other[s] = v.ablate_other;
        abl_layer2[s] = r->two_layer.ablated_layer[1];
        control[s] = r->one_layer_repeated;
    }
    printf("\n  (phase: the step of the phase change; prev., ind.: the best previous-token\n"
           "  head of layer 1 and the best induction head of layer 2, their scores and,\n"
           "  under silenced, the repeated part's loss without them; other: the worst\n"
           "  loss with any other head silenced)\n\n");
    printf("  two layers succeed (repeated part below %.3f = %.1f log %d,\n"
           "    first part within %.0f%% of log %d)        %d of %d\n",
           SUCCESS_SHARE * log_v, SUCCESS_SHARE, opt->vocab, 100.0 * FIRST_PART_BAND,
           opt->vocab, succeeded, S);
    printf("  of those, both scores at least 0.4         %d of %d\n", found, succeeded);
    printf("  of those, silencing either head gives at least %.3f (0.8 log %d)\n"
           "    and any other head costs under a quarter of that   %d of %d\n",
           0.8 * log_v, opt->vocab, clear, succeeded);
    printf("  one layer fails (repeated part not below %.3f)  %d of %d\n\n",
           SUCCESS_SHARE * log_v, control_failed, S);
    printf("                                      median   lowest to highest\n");
    if (n_phase > 0)
        summary_line("phase change step", phase, n_phase, "%6.0f");
    summary_line("previous-token score (layer 1)", prev, S, "%6.2f");
    summary_line("induction score (layer 2)", ind, S, "%6.2f");
    summary_line("repeated part, two layers", rep, S, "%6.3f");
    summary_line("  previous-token head silenced", abl_prev, S, "%6.3f");
    summary_line("  induction head silenced", abl_ind, S, "%6.3f");
    summary_line("  another head silenced (worst)", abl_other, S, "%6.3f");
    summary_line("  all of layer 2 silenced", abl_layer2, S, "%6.3f");
    summary_line("repeated part, one layer", control, S, "%6.3f");
}

/* ---- main --------------------------------------------------------------------------- */

static HeldOut held_out_new(const Options *opt)
{
    HeldOut h = {.count = opt->examples};
    h.tokens = checked_calloc(PROG, (size_t)h.count * (opt->length + 1), sizeof *h.tokens);
    h.periods = checked_calloc(PROG, (size_t)h.count, sizeof *h.periods);
    Rng rng = rng_use(opt->seed, RNG_HELDOUT);
    repeats_draw(h.tokens, h.periods, h.count, opt->length, opt->vocab, min_period(opt),
                 max_period(opt), &rng);
    return h;
}

/* --to DIR: the model's files, and beside them the held-out tokens
 * (B * (T + 1) ints) and the model's loss on each prediction (B * T), so
 * that tests/fixtures/make_induction_fixtures.py --check DIR can redo the
 * losses in PyTorch. */
static int save_model(const Options *opt, const InductionModel *model, const HeldOut *held_out,
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

/* --from DIR: the model as saved, then parts 3 and 4. */
static int run_from(const Options *opt, const HeldOut *held_out)
{
    int sizes[2];
    char err[MODEL_ERR_LEN];
    if (model_read_ints(opt->from_dir, "num_heads", &sizes[0], 1, err, sizeof err) != 0 ||
        model_read_ints(opt->from_dir, "num_layers", &sizes[1], 1, err, sizeof err) != 0)
        return report_error(PROG, "%s", err), 1;
    if (sizes[0] < 1 || sizes[0] > MAX_HEADS || opt->num_hiddens % sizes[0] != 0 ||
        sizes[1] < 1 || sizes[1] > MAX_LAYERS)
        return report_error(PROG, "%s: num_heads %d and num_layers %d do not fit --hiddens %d "
                            "(layers 1 to %d)", opt->from_dir, sizes[0], sizes[1],
                            opt->num_hiddens, MAX_LAYERS), 1;
    Rng rng = rng_new(0);
    InductionModel *model = induction_new(opt->vocab, opt->length, opt->num_hiddens, sizes[0],
                                          sizes[1], &rng);
    if (model_load(opt->from_dir, model->files, model->num_files, err, sizeof err) != 0) {
        induction_free(model);
        return report_error(PROG, "%s", err), 1;
    }
    Options shown = *opt;
    shown.num_heads = sizes[0];
    part1_task(&shown, held_out, false);
    const Measures m = measure(model, held_out);
    printf("Held-out loss: first part %.3f, repeated part %.3f\n\n", m.first, m.repeated);
    const int status = part3_heads(&shown, model, held_out, &m);
    part4_ablation(&shown, model, &m, NULL);
    induction_free(model);
    return status;
}

/* Every seed trained, then the parts that read seed 0's model and the
 * table over seeds; --to saves seed 0's model. Returns the exit status. */
static int run_experiment(const Options *opt, const HeldOut *held_out)
{
    part1_task(opt, held_out, true);
    fflush(stdout);
    SeedResult *results = checked_calloc(PROG, (size_t)opt->seeds, sizeof *results);
    Experiment e = {opt, held_out, results};
    seeds_run(opt->seeds, opt->num_threads, seed_job, &e);
    int status = 0;
    for (int s = 0; s < opt->seeds; s++)
        if (results[s].broke) {
            report_error(PROG, "seed %llu: the loss stopped being a number; try a "
                         "smaller --lr", (unsigned long long)(opt->seed + (uint64_t)s));
            status = 1;
        }
    if (status == 0) {
        status |= part2_training(opt, &results[0]);
        status |= part3_heads(opt, results[0].model, held_out, &results[0].two_layer);
        part4_ablation(opt, results[0].model, &results[0].two_layer, &results[0]);
        part5_seeds(opt, results);
        if (opt->to_dir != NULL) {
            char err[MODEL_ERR_LEN];
            if (save_model(opt, results[0].model, held_out, err, sizeof err) == 0)
                printf("\nsaved seed %llu's two-layer model in %s\n",
                       (unsigned long long)opt->seed, opt->to_dir);
            else {
                report_error(PROG, "%s", err);
                status = 1;
            }
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
    Options opt = parse_options(argc, argv);
    HeldOut held_out = held_out_new(&opt);
    int status = opt.from_dir != NULL ? run_from(&opt, &held_out)
                                      : run_experiment(&opt, &held_out);
    free(held_out.tokens);
    free(held_out.periods);
    return status;
}
