/* induction_experiment.c - the experiment of chapter 06's page "Induction
 * heads": see induction_experiment.h. */
#include "induction_experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "learn/training.h"
#include "memory.h"


int induction_min_period(const InductionSetup *setup) { return setup->length / 4; }
int induction_max_period(const InductionSetup *setup) { return setup->length / 2; }

/* losses (B*T) of sequences with periods (B,) -> the mean of each part. A
 * prediction at t (of token t + 1) is in the repeated part when t >= P. */
static void induction_part_means(const float *losses, const int *periods, int B, int T, double *first,
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

static double induction_heldout_parts(const InductionModel *model, const InductionHeldOut *held_out,
                            float *losses, double *first)
{
    double repeated;
    induction_losses(model, held_out->tokens, held_out->count, losses);
    induction_part_means(losses, held_out->periods, held_out->count, model->length, first, &repeated);
    return repeated;
}

/* weights (B, H, T, T) of layer l -> each head's scores into m:
 *   previous-token: the mean weight query t puts on key t - 1, over every
 *   t >= 1, and over t = 1 .. P alone (previous_needed);
 *   induction: the weight query t puts on the keys just after the earlier
 *   occurrences of its token (t - P + 1, t - 2P + 1, ... >= 1), summed,
 *   and averaged over the queries of the repeated part (t >= P); on key
 *   t - P + 1 alone, the most recent copy (induction_last). */
static void induction_head_scores(const Tensor *weights, const InductionHeldOut *held_out, int l,
                                  InductionMeasures *m)
{
    const int B = weights->shape[0], H = weights->shape[1], T = weights->shape[2];
    for (int h = 0; h < H; h++) {
        double prev = 0.0, needed = 0.0, ind = 0.0, last = 0.0;
        long n_prev = 0, n_needed = 0, n_ind = 0;
        for (int b = 0; b < B; b++) {
            const int P = held_out->periods[b];
            for (int t = 1; t < T; t++) {
                const double w = AT4(weights, b, h, t, t - 1);
                prev += w;
                n_prev++;
                if (t <= P) {
                    needed += w;
                    n_needed++;
                }
                if (t < P)
                    continue;
                for (int s = t - P + 1; s >= 1; s -= P)
                    ind += AT4(weights, b, h, t, s);
                last += AT4(weights, b, h, t, t - P + 1);
                n_ind++;
            }
        }
        m->previous[l][h] = prev / (double)n_prev;
        m->previous_needed[l][h] = needed / (double)n_needed;
        m->induction[l][h] = ind / (double)n_ind;
        m->induction_last[l][h] = last / (double)n_ind;
    }
}

double induction_seen_tokens_loss(const InductionHeldOut *held_out, int length)
{
    const int T = length;
    double sum = 0.0;
    long count = 0;
    for (int b = 0; b < held_out->count; b++) {
        const int *row = held_out->tokens + (size_t)b * (T + 1);
        int distinct = 0;
        for (int t = 0; t < T; t++) {
            bool seen = false;
            for (int s = 0; s < t && !seen; s++)
                seen = row[s] == row[t];
            distinct += !seen;
            if (t >= held_out->periods[b]) {
                sum += log((double)distinct);
                count++;
            }
        }
    }
    return count > 0 ? sum / (double)count : 0.0;
}

/* row (T + 1) of a sequence, the query t: the tokens among 0 .. t seen
 * the fewest times, token t left out; returns how many, and whether the
 * next token (t + 1) is one of them. */
static int least_seen(const int *row, int t, bool *has_next)
{
    int fewest = 0, count = 0;
    *has_next = false;
    for (int s = 0; s <= t; s++) {
        bool earlier = false;   /* count each token once, at its first place */
        for (int r = 0; r < s && !earlier; r++)
            earlier = row[r] == row[s];
        if (earlier || row[s] == row[t])
            continue;
        int seen = 0;
        for (int r = 0; r <= t; r++)
            seen += row[r] == row[s];
        if (count == 0 || seen < fewest) {
            fewest = seen;
            count = 0;
            *has_next = false;
        }
        if (seen == fewest) {
            count++;
            *has_next = *has_next || row[s] == row[t + 1];
        }
    }
    return count;
}

double induction_least_seen_loss(const InductionHeldOut *held_out, int length)
{
    const int T = length;
    double sum = 0.0;
    long count = 0;
    for (int b = 0; b < held_out->count; b++) {
        const int *row = held_out->tokens + (size_t)b * (T + 1);
        for (int t = held_out->periods[b]; t < T; t++) {
            bool has_next;
            const int n = least_seen(row, t, &has_next);
            if (!has_next)
                die("sequence %d, t = %d: the next token is not among the least seen", b,
                    t);
            sum += log((double)n);
            count++;
        }
    }
    return count > 0 ? sum / (double)count : 0.0;
}

/* The held-out inputs, tokens 0 .. T-1 of each row: (B, T), new. */
static int *held_out_inputs(const InductionHeldOut *held_out, int T)
{
    const int B = held_out->count;
    int *inputs = checked_calloc((size_t)B * T, sizeof *inputs);
    for (int b = 0; b < B; b++)
        memcpy(inputs + (size_t)b * T, held_out->tokens + (size_t)b * (T + 1),
               (size_t)T * sizeof *inputs);
    return inputs;
}

/* Each head's scores, from one forward of the held-out set. */
static void measure_scores(const InductionModel *model, const InductionHeldOut *held_out,
                           InductionMeasures *m)
{
    const int B = held_out->count, T = model->length;
    int *inputs = held_out_inputs(held_out, T);
    Tensor *weights[INDUCTION_MAX_LAYERS] = {NULL};   /* (B, H_l, T, T) each */
    Tensor *logits = induction_forward(model, inputs, B, weights, NULL);
    for (int l = 0; l < model->num_layers; l++) {
        induction_head_scores(weights[l], held_out, l, m);
        tensor_free(weights[l]);
    }
    tensor_free(logits);
    free(inputs);
}

void induction_previous_by_query(const InductionModel *model, const InductionHeldOut *held_out,
                                 int layer, int head, double *by_query)
{
    const int B = held_out->count, T = model->length;
    int *inputs = held_out_inputs(held_out, T);
    Tensor *weights[INDUCTION_MAX_LAYERS] = {NULL};   /* (B, H_l, T, T) each */
    Tensor *logits = induction_forward(model, inputs, B, weights, NULL);
    by_query[0] = 0.0;
    for (int t = 1; t < T; t++) {
        double sum = 0.0;
        for (int b = 0; b < B; b++)
            sum += AT4(weights[layer], b, head, t, t - 1);
        by_query[t] = sum / B;
    }
    for (int l = 0; l < model->num_layers; l++)
        tensor_free(weights[l]);
    tensor_free(logits);
    free(inputs);
}

/* Layer l's output (x_{l+1} - x_l) at each position, averaged over the
 * held-out sequences: mean (T, D). */
static void mean_layer_output(const InductionModel *model, const int *inputs, int B, int l,
                              double *mean)
{
    const int T = model->length, D = model->num_hiddens;
    InductionCache cache;
    Tensor *logits = induction_forward(model, inputs, B, NULL, &cache);
    for (int i = 0; i < T * D; i++)
        mean[i] = 0.0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                mean[t * D + j] += (AT3(cache.stream[l + 1], b, t, j) -
                                    AT3(cache.stream[l], b, t, j)) / B;
    induction_cache_free(&cache);
    tensor_free(logits);
}

/* No bias, so a layer's output is the sum of its heads' (each through its
 * columns of W_o), and the silenced heads' mean output is the layer's mean
 * output with them minus without them; it is added back at every position
 * through layer_offsets. */
double induction_mean_ablated(InductionModel *model, const InductionHeldOut *held_out, int layer,
                              int head)
{
    const int B = held_out->count, T = model->length, D = model->num_hiddens;
    const int H = model->num_heads[layer];
    const size_t head_floats = (size_t)D * D / (size_t)H;
    int *inputs = held_out_inputs(held_out, T);
    double *with = checked_calloc((size_t)T * D, sizeof *with);
    double *without = checked_calloc((size_t)T * D, sizeof *without);
    float *offset = checked_calloc((size_t)T * D, sizeof *offset);
    float *saved = checked_calloc((size_t)D * D, sizeof *saved);
    float *losses = checked_calloc((size_t)B * T, sizeof *losses);
    mean_layer_output(model, inputs, B, layer, with);
    for (int h = 0; h < H; h++)
        if (head < 0 || h == head)
            induction_ablate_head(model, layer, h, saved + h * head_floats);
    mean_layer_output(model, inputs, B, layer, without);
    for (int i = 0; i < T * D; i++)
        offset[i] = (float)(with[i] - without[i]);
    model->layer_offsets[layer] = offset;
    double first;
    const double repeated = induction_heldout_parts(model, held_out, losses, &first);
    model->layer_offsets[layer] = NULL;
    for (int h = 0; h < H; h++)
        if (head < 0 || h == head)
            induction_restore_head(model, layer, h, saved + h * head_floats);
    free(losses);
    free(saved);
    free(offset);
    free(without);
    free(with);
    free(inputs);
    return repeated;
}

/* The model on the held-out set: both parts' losses, the heads' scores and
 * the repeated part's loss with each head, then each layer, silenced. */
InductionMeasures induction_measure(InductionModel *model, const InductionHeldOut *held_out)
{
    const int B = held_out->count, T = model->length, D = model->num_hiddens;
    InductionMeasures m = {0};
    float *losses = checked_calloc((size_t)B * T, sizeof *losses);
    m.repeated = induction_heldout_parts(model, held_out, losses, &m.first);
    measure_scores(model, held_out, &m);

    float *saved = checked_calloc((size_t)D * D, sizeof *saved);
    double first;
    for (int l = 0; l < model->num_layers; l++) {
        const int H = model->num_heads[l];
        const size_t head_floats = (size_t)D * D / (size_t)H;
        for (int h = 0; h < H; h++) {
            induction_ablate_head(model, l, h, saved);
            m.ablated[l][h] = induction_heldout_parts(model, held_out, losses, &first);
            induction_restore_head(model, l, h, saved);
        }
        for (int h = 0; h < H; h++)
            induction_ablate_head(model, l, h, saved + h * head_floats);
        m.ablated_layer[l] = induction_heldout_parts(model, held_out, losses, &first);
        for (int h = 0; h < H; h++)
            induction_restore_head(model, l, h, saved + h * head_floats);
    }
    free(saved);
    free(losses);
    return m;
}

/* The first step at which the in-context gain (first part's loss minus the
 * repeated part's), averaged over the last INDUCTION_WINDOW steps, reaches
 * share of log V; 0 when it never does. The phase change is share 1/2; the
 * steps from 1/4 to 3/4 say how abrupt it was. */
static int induction_gain_step(const float *first, const float *repeated, int steps, int vocab,
                               double share)
{
    double window = 0.0;
    for (int s = 0; s < steps; s++) {
        window += first[s] - repeated[s];
        if (s >= INDUCTION_WINDOW)
            window -= first[s - INDUCTION_WINDOW] - repeated[s - INDUCTION_WINDOW];
        if (s >= INDUCTION_WINDOW - 1 && window / INDUCTION_WINDOW >= share * log((double)vocab))
            return s + 1;
    }
    return 0;
}

/* One model's training, as the loop of learn/training.h sees it: the
 * model, the batch of repeating sequences (not a task: a draw of its own),
 * each prediction's loss on it, and the curves its watch fills. */
typedef struct {
    const InductionSetup *setup;
    InductionModel *model;
    int *tokens, *periods;                /* the step's batch: (B, T + 1), (B,) */
    float *losses;                        /* (B*T): the step's, before its update */
    float *first_curve, *repeated_curve;  /* (steps,), or NULL */
} InductionTraining;

static void draw_repeats(void *state, Rng *rng)
{
    InductionTraining *t = state;
    const InductionSetup *setup = t->setup;
    repeats_draw(t->tokens, t->periods, setup->batch, setup->length, setup->vocab,
                 induction_min_period(setup), induction_max_period(setup), rng);
}

static double train_step(void *state, Adam *adam, const void *tokens, int *correct)
{
    (void)correct;
    InductionTraining *t = state;
    return induction_train_step(t->model, adam, tokens, t->setup->batch, t->losses);
}

/* After step s: its two part losses into the curves; false (stop) when the
 * loss is not a number. */
static TrainingStatus record_parts(void *state, int step, double loss, int correct)
{
    (void)correct;
    const InductionTraining *t = state;
    if (!isfinite(loss))
        return TRAINING_DIVERGED;
    if (t->first_curve != NULL) {
        double first, repeated;
        induction_part_means(t->losses, t->periods, t->setup->batch, t->setup->length, &first,
                             &repeated);
        t->first_curve[step - 1] = (float)first;
        t->repeated_curve[step - 1] = (float)repeated;
    }
    return TRAINING_GOES_ON;
}

/* A model of num_layers layers trained from seed's streams, on the fast
 * layer with one thread (the threads go to the seeds). curves, when not
 * NULL, receive each step's two part losses. NULL when the loss stops
 * being a number. */
static InductionModel *induction_train(const InductionSetup *setup, int num_layers, uint64_t seed,
                             float *first_curve, float *repeated_curve)
{
    Rng init = rng_use(seed, RNG_PARAMETERS);
    const int B = setup->batch, T = setup->length;
    InductionTraining t = {.setup = setup, .first_curve = first_curve,
                           .repeated_curve = repeated_curve};
    t.model = induction_new(setup->vocab, T, setup->num_hiddens, setup->num_heads, num_layers,
                            &init);   /* the first num_layers of num_heads */
    t.model->attend = setup->attend;
    t.tokens = checked_calloc((size_t)B * (T + 1), sizeof *t.tokens);
    t.periods = checked_calloc((size_t)B, sizeof *t.periods);
    t.losses = checked_calloc((size_t)B * T, sizeof *t.losses);
    Adam *adam = adam_new(t.model->params, t.model->num_params, setup->lr);
    const BatchDraw repeats = {&t, draw_repeats, t.tokens};
    const TrainingPlan plan = {.seed = seed, .first_step = 1, .last_step = setup->steps,
                               .batches = BATCH_STREAM, .draw = &repeats};
    const Trainee trainee = {&t, adam, train_step, NULL};
    const TrainingWatch watch = {&t, NULL, record_parts, NULL};
    if (training_loop(&trainee, &plan, &watch) != TRAINING_DONE) {
        induction_free(t.model);
        t.model = NULL;
    }
    free(t.losses);
    free(t.periods);
    free(t.tokens);
    adam_free(adam);
    return t.model;
}

/* Job j: seed setup->seed + j, the two-layer model and the one-layer control. */
void induction_seed_job(void *arg, int j)
{
    const InductionExperiment *e = arg;
    const InductionSetup *setup = e->setup;
    InductionSeedResult *r = &e->results[j];
    const uint64_t seed = setup->seed + (uint64_t)j;
    r->first_curve = checked_calloc((size_t)setup->steps, sizeof *r->first_curve);
    r->repeated_curve = checked_calloc((size_t)setup->steps, sizeof *r->repeated_curve);
    InductionModel *model = induction_train(setup, 2, seed, r->first_curve, r->repeated_curve);
    InductionModel *control = induction_train(setup, 1, seed, NULL, NULL);
    if (model == NULL || control == NULL) {
        r->broke = true;
        induction_free(model);
        induction_free(control);
        return;
    }
    r->phase_step = induction_gain_step(r->first_curve, r->repeated_curve, setup->steps,
                                        setup->vocab, 0.5);
    r->rise_start = induction_gain_step(r->first_curve, r->repeated_curve, setup->steps,
                                        setup->vocab, 0.25);
    r->rise_end = induction_gain_step(r->first_curve, r->repeated_curve, setup->steps,
                                      setup->vocab, 0.75);
    r->two_layer = induction_measure(model, e->held_out);
    const InductionMeasures c = induction_measure(control, e->held_out);
    r->one_layer_first = c.first;
    r->one_layer_repeated = c.repeated;
    induction_free(control);
    if (j == 0)
        r->model = model;
    else
        induction_free(model);
}


InductionHeldOut induction_held_out_new(const InductionSetup *setup)
{
    InductionHeldOut h = {.count = setup->examples};
    h.tokens = checked_calloc((size_t)h.count * (setup->length + 1), sizeof *h.tokens);
    h.periods = checked_calloc((size_t)h.count, sizeof *h.periods);
    Rng rng = rng_use(setup->seed, RNG_HELDOUT);
    repeats_draw(h.tokens, h.periods, h.count, setup->length, setup->vocab, induction_min_period(setup),
                 induction_max_period(setup), &rng);
    return h;
}

void induction_held_out_free(InductionHeldOut *held_out)
{
    free(held_out->tokens);
    free(held_out->periods);
}

int induction_best_head(const double *scores, int H)
{
    int best = 0;
    for (int h = 1; h < H; h++)
        if (scores[h] > scores[best])
            best = h;
    return best;
}

InductionVerdict induction_verdict(const InductionSeedResult *r, const int *num_heads, int vocab)
{
    const InductionMeasures *m = &r->two_layer;
    const double log_v = log((double)vocab);
    InductionVerdict v = {.prev_head = induction_best_head(m->previous_needed[0], num_heads[0]),
                          .ind_head = induction_best_head(m->induction[1], num_heads[1])};
    v.prev = m->previous_needed[0][v.prev_head];
    v.ind = m->induction[1][v.ind_head];
    v.ablate_prev = m->ablated[0][v.prev_head];
    v.ablate_ind = m->ablated[1][v.ind_head];
    v.ablate_other = m->repeated;   /* no other head: it costs nothing */
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < num_heads[l]; h++)
            if (h != (l == 0 ? v.prev_head : v.ind_head) && m->ablated[l][h] > v.ablate_other)
                v.ablate_other = m->ablated[l][h];
    v.success = m->repeated < INDUCTION_SUCCESS_SHARE * log_v &&
                fabs(m->first - log_v) <= INDUCTION_FIRST_PART_BAND * log_v;
    v.heads_found = v.prev >= INDUCTION_SCORE_LINE && v.ind >= INDUCTION_SCORE_LINE;
    v.ablation_clear = v.ablate_prev >= INDUCTION_SILENCED_SHARE * log_v &&
                       v.ablate_ind >= INDUCTION_SILENCED_SHARE * log_v &&
                       v.ablate_other < INDUCTION_OTHER_FACTOR * m->repeated;
    return v;
}

/* "label   median   lowest to highest", each value in unit_fmt. */
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

/* The columns of the table over seeds, one value per seed. */
typedef struct {
    double phase[INDUCTION_MAX_SEEDS], prev[INDUCTION_MAX_SEEDS], ind[INDUCTION_MAX_SEEDS];
    double repeated[INDUCTION_MAX_SEEDS], ablate_prev[INDUCTION_MAX_SEEDS];
    double ablate_ind[INDUCTION_MAX_SEEDS], ablate_other[INDUCTION_MAX_SEEDS];
    double layer2[INDUCTION_MAX_SEEDS], control[INDUCTION_MAX_SEEDS];
    double rise[INDUCTION_MAX_SEEDS];   /* steps from a quarter to three quarters of log V */
    int n_phase, n_rise, succeeded, found, clear, control_failed;
} SeedColumns;

/* One seed's row of the table, and its values added to the columns. */
static void print_seed_row(const InductionSeedResult *r, uint64_t seed, int s,
                           const InductionSetup *setup, SeedColumns *c)
{
    const double log_v = log((double)setup->vocab);
    const InductionVerdict v = induction_verdict(r, setup->num_heads, setup->vocab);
    char phase_text[16];
    if (r->phase_step > 0)
        snprintf(phase_text, sizeof phase_text, "%d", r->phase_step);
    else
        snprintf(phase_text, sizeof phase_text, "none");
    printf("  %4llu  %5s   %5.3f   %7.3f  %5.2f (%d)     %5.2f (%d)    %5.2f  %5.2f  %5.3f  "
           "%8.3f%s\n", (unsigned long long)seed, phase_text, r->two_layer.first,
           r->two_layer.repeated, v.prev, v.prev_head, v.ind, v.ind_head, v.ablate_prev,
           v.ablate_ind, v.ablate_other, r->one_layer_repeated, v.success ? "" : "  failed");
    c->succeeded += v.success;
    c->found += v.success && v.heads_found;
    c->clear += v.success && v.ablation_clear;
    c->control_failed += !(r->one_layer_repeated < INDUCTION_SUCCESS_SHARE * log_v);
    if (r->phase_step > 0)
        c->phase[c->n_phase++] = r->phase_step;
    if (r->rise_start > 0 && r->rise_end > 0)
        c->rise[c->n_rise++] = r->rise_end - r->rise_start;
    c->prev[s] = v.prev;
    c->ind[s] = v.ind;
    c->repeated[s] = r->two_layer.repeated;
    c->ablate_prev[s] = v.ablate_prev;
    c->ablate_ind[s] = v.ablate_ind;
    c->ablate_other[s] = v.ablate_other;
    c->layer2[s] = r->two_layer.ablated_layer[1];
    c->control[s] = r->one_layer_repeated;
}

/* The verdicts counted, each with the line it is judged by. */
static void print_verdicts(const SeedColumns *c, int S, int vocab, double bag)
{
    const double log_v = log((double)vocab), line = INDUCTION_SUCCESS_SHARE * log_v;
    printf("  two layers succeed (repeated part below %.3f = %.1f log %d,\n"
           "    first part within %.0f%% of log %d)        %d of %d\n",
           line, INDUCTION_SUCCESS_SHARE, vocab, 100.0 * INDUCTION_FIRST_PART_BAND, vocab,
           c->succeeded, S);
    printf("  of those, both scores at least %.1f         %d of %d\n", INDUCTION_SCORE_LINE,
           c->found, c->succeeded);
    printf("  of those, silencing either head gives at least %.3f (%.1f log %d)\n"
           "    and any other head less than %.0f times the loss with every head   %d of %d\n",
           INDUCTION_SILENCED_SHARE * log_v, INDUCTION_SILENCED_SHARE, vocab,
           INDUCTION_OTHER_FACTOR, c->clear, c->succeeded);
    printf("  one layer fails (repeated part not below %.3f)  %d of %d\n", line,
           c->control_failed, S);
    printf("  (the strongest bag of tokens computed here: %.3f)\n\n", bag);
}

void induction_print_seeds(const InductionSeedResult *results, int S,
                           const InductionSetup *setup, double bag)
{
    printf("Part 5. Over %d %s (%llu to %llu), on the held-out set; log %d = %.3f\n\n"
           "                     two layers                          silenced          one layer\n"
           "  seed  phase   first  repeated  prev. (head)  ind. (head)   prev.  ind.  other   repeated\n",
           S, S == 1 ? "seed" : "seeds", (unsigned long long)setup->seed,
           (unsigned long long)(setup->seed + (uint64_t)S - 1), setup->vocab,
           log((double)setup->vocab));
    SeedColumns c = {0};
    for (int s = 0; s < S; s++)
        print_seed_row(&results[s], setup->seed + (uint64_t)s, s, setup, &c);
    printf("\n  (phase: the step of the phase change; first, repeated: each part's loss;\n"
           "  prev., ind.: the best previous-token head of layer 1 (its score on queries\n"
           "  1 .. P) and the best induction head of layer 2, their scores and, under\n"
           "  silenced, the repeated part's loss without them; other: the worst loss\n"
           "  with any other head silenced; silenced means its output set to zero)\n\n");
    print_verdicts(&c, S, setup->vocab, bag);
    printf("                                      median   lowest to highest\n");
    if (c.n_phase > 0)
        summary_line("phase change step", c.phase, c.n_phase, "%6.0f");
    if (c.n_rise > 0)
        summary_line("steps from 1/4 to 3/4 of log V", c.rise, c.n_rise, "%6.0f");
    summary_line("previous-token score (t <= P)", c.prev, S, "%6.2f");
    summary_line("induction score (layer 2)", c.ind, S, "%6.2f");
    summary_line("repeated part, two layers", c.repeated, S, "%6.3f");
    summary_line("  previous-token head silenced", c.ablate_prev, S, "%6.3f");
    summary_line("  induction head silenced", c.ablate_ind, S, "%6.3f");
    summary_line("  another head silenced (worst)", c.ablate_other, S, "%6.3f");
    summary_line("  all of layer 2 silenced", c.layer2, S, "%6.3f");
    summary_line("repeated part, one layer", c.control, S, "%6.3f");
}

/* ---- what part 3 of induction_heads prints ------------------------------------ */

/* Every head's two scores, and the layers the best of each is in. */
void induction_print_scores(const InductionModel *model, const InductionMeasures *m)
{
    printf("Part 3. The heads, on the held-out set\n\n"
           "previous-token score: the mean weight query t puts on key t - 1, over every\n"
           "query, and over the queries t = 1 .. P alone (key t - 1 holds a token's\n"
           "first occurrence: the keys an induction head reads). Induction score: the\n"
           "weight a query of the repeated part puts on the tokens that followed its\n"
           "token's earlier occurrences, summed over them, and on the most recent alone.\n\n"
           "                  previous-token              induction\n"
           "  layer  head   every t   t = 1 .. P   every copy   last copy\n");
    int prev_layer = 0, prev_head = 0, ind_layer = 0, ind_head = 0;
    for (int l = 0; l < model->num_layers; l++)
        for (int h = 0; h < model->num_heads[l]; h++) {
            printf("  %5d  %4d   %7.3f   %10.3f   %10.3f   %9.3f\n", l + 1, h,
                   m->previous[l][h], m->previous_needed[l][h], m->induction[l][h],
                   m->induction_last[l][h]);
            if (m->previous_needed[l][h] > m->previous_needed[prev_layer][prev_head])
                prev_layer = l, prev_head = h;
            if (m->induction[l][h] > m->induction[ind_layer][ind_head])
                ind_layer = l, ind_head = h;
        }
    printf("\nThe best previous-token head is in layer %d, the best induction head in\n"
           "layer %d%s\n\n", prev_layer + 1, ind_layer + 1,
           model->num_layers == 2 && prev_layer == 0 && ind_layer == 1
               ? ": the previous-token head writes, the induction head reads."
               : ".");
}

/* The weight layer 1's head hp puts on key t - 1 at each query t, averaged
 * over the held-out set, eight queries a line. */
void induction_print_previous_by_query(const InductionModel *model,
                                       const InductionHeldOut *held_out, int hp)
{
    const int T = model->length;
    double *by_query = checked_calloc((size_t)T, sizeof *by_query);
    induction_previous_by_query(model, held_out, 0, hp, by_query);
    printf("Layer 1, head %d: the weight on key t - 1 at each query t, on the held-out set\n\n",
           hp);
    for (int first = 1; first < T; first += 8) {
        const int last = first + 7 < T - 1 ? first + 7 : T - 1;
        printf("  t = %3d .. %3d ", first, last);
        for (int t = first; t <= last; t++)
            printf(" %4.2f", by_query[t]);
        printf("\n");
    }
    printf("\n");
    free(by_query);
}
