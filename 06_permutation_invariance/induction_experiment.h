/*
 * induction_experiment.h - the experiment of chapter 06's page "Induction
 * heads" (06_permutation_invariance/induction_heads.md): models trained on
 * sequences that repeat, one seed at a time, and what is measured of them.
 *
 * Legend: B = sequences, T = tokens, V = vocabulary, D = num_hiddens,
 * H = heads of a layer, P = a sequence's period.
 *
 * A seed trains a two-layer model (induction_model.h) and a one-layer
 * control from its own streams, then measures both on the held-out
 * sequences: each part's loss, every head's previous-token and induction
 * scores, and the repeated part's loss with each head (and each layer)
 * silenced. Layer 1 and layer 2 each have their own number of heads; the
 * control is layer 1 alone. The program passes the attention layer the
 * models train with.
 *
 * Beside induction_heads.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef INDUCTION_EXPERIMENT_H
#define INDUCTION_EXPERIMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "attention_layer.h"
#include "learn/induction_model.h"

enum {
    INDUCTION_MAX_HEADS = 8,
    INDUCTION_WINDOW = 10,   /* steps averaged to find the phase change */
    INDUCTION_MAX_SEEDS = 64,
};

/* What a run is: the sizes, the training and the layer it trains with. */
typedef struct {
    uint64_t seed;           /* seed j of the experiment is seed + j */
    int vocab, length, num_hiddens, steps, batch, examples;
    int num_heads[2];        /* of layer 1 (the one-layer control's too) and of layer 2 */
    float lr;
    AttentionLayer attend;
} InductionSetup;

/* The periods of a run: a quarter to a half of the sequence. */
int induction_min_period(const InductionSetup *setup);
int induction_max_period(const InductionSetup *setup);

/* The held-out sequences: tokens (B, T + 1) and their periods (B,). */
typedef struct {
    int count;
    int *tokens, *periods;
} InductionHeldOut;
/* What is measured of a model on the held-out set. */
typedef struct {
    double first, repeated;                    /* the mean loss of each part */
    /* [layer][head]: the previous-token score over every query t >= 1, and
     * over the queries 1 .. P alone, whose key t - 1 holds a token's first
     * occurrence (the keys an induction head needs); the induction score
     * summed over every earlier copy, and on the most recent copy alone */
    double previous[INDUCTION_MAX_LAYERS][INDUCTION_MAX_HEADS];
    double previous_needed[INDUCTION_MAX_LAYERS][INDUCTION_MAX_HEADS];
    double induction[INDUCTION_MAX_LAYERS][INDUCTION_MAX_HEADS];
    double induction_last[INDUCTION_MAX_LAYERS][INDUCTION_MAX_HEADS];
    double ablated[INDUCTION_MAX_LAYERS][INDUCTION_MAX_HEADS];     /* repeated-part loss, that
                                                                      head silenced */
    double ablated_layer[INDUCTION_MAX_LAYERS];   /* the same, every head of the layer silenced */
} InductionMeasures;
/* Everything a seed's job produces. */
typedef struct {
    InductionModel *model;       /* kept for the first seed only */
    float *first_curve, *repeated_curve;   /* (steps,): each step's batch, before the step */
    int phase_step;              /* 0: no phase change */
    int rise_start, rise_end;    /* the steps where the mean gain first reaches a quarter and
                                    three quarters of log V (0: never) */
    InductionMeasures two_layer;
    double one_layer_first, one_layer_repeated;
    bool broke;                  /* a loss that was not a number */
} InductionSeedResult;
typedef struct {
    const InductionSetup *setup;
    const InductionHeldOut *held_out;
    InductionSeedResult *results;
} InductionExperiment;

/* The held-out sequences of a run, from its own stream; free with
 * induction_held_out_free. */
InductionHeldOut induction_held_out_new(const InductionSetup *setup);
void induction_held_out_free(InductionHeldOut *held_out);
/* The repeated part's loss of a predictor that knows only which tokens it
 * has seen: at t, uniform over the distinct tokens among 0 .. t (P of them
 * once the repeat has begun), averaged over the held-out repeated part. */
double induction_seen_tokens_loss(const InductionHeldOut *held_out, int length);
/* The same for a bag that counts: at t, uniform over the tokens seen the
 * fewest times among 0 .. t, token t left out (it never comes next). In
 * the repeated part those are the tokens of the period not yet repeated in
 * the current round, the next one among them: the strongest bag computed
 * here, not a bound on every bag. */
double induction_least_seen_loss(const InductionHeldOut *held_out, int length);
/* The weight head h of layer l puts on key t - 1 at each query t, averaged
 * over the held-out sequences: by_query (T,), by_query[0] = 0. */
void induction_previous_by_query(const InductionModel *model, const InductionHeldOut *held_out,
                                 int layer, int head, double *by_query);
/* Mean ablation: the repeated part's held-out loss with head h of layer l
 * (every head of it when h < 0) replaced by its mean output at each
 * position over the held-out sequences, instead of 0. The model is left
 * as it was. */
double induction_mean_ablated(InductionModel *model, const InductionHeldOut *held_out, int layer,
                              int head);
/* What is measured of a model on the held-out set. */
InductionMeasures induction_measure(InductionModel *model, const InductionHeldOut *held_out);
/* seeds_run's job j (arg an InductionExperiment): seed setup->seed + j, the
 * two-layer model and the one-layer control; the model is kept for j = 0. */
void induction_seed_job(void *arg, int j);

/* A run succeeds when the repeated part's held-out loss falls below
 * INDUCTION_SUCCESS_SHARE of log V while the first part stays within
 * INDUCTION_FIRST_PART_BAND of it. */
#define INDUCTION_SUCCESS_SHARE 0.1
#define INDUCTION_FIRST_PART_BAND 0.1
/* The verdicts on the heads: both previous-token (queries 1 .. P) and
 * induction scores at least INDUCTION_SCORE_LINE; silencing either head
 * brings the repeated part to INDUCTION_SILENCED_SHARE of log V or more,
 * and silencing any other leaves it below INDUCTION_OTHER_FACTOR times the
 * loss with every head. */
#define INDUCTION_SCORE_LINE 0.4
#define INDUCTION_SILENCED_SHARE 0.8
#define INDUCTION_OTHER_FACTOR 2.0

/* The index of the largest of H scores (a layer's heads). */
int induction_best_head(const double *scores, int H);

/* A two-layer seed judged: its best previous-token head (layer 1) and best
 * induction head (layer 2), their scores, the repeated part's loss with
 * each silenced and with the worst of the other heads silenced, and the
 * page's three verdicts. */
typedef struct {
    int prev_head, ind_head;
    double prev, ind, ablate_prev, ablate_ind, ablate_other;
    bool success, heads_found, ablation_clear;
} InductionVerdict;
InductionVerdict induction_verdict(const InductionSeedResult *r, const int *num_heads, int vocab);

/* The table over S seeds (setup->seed, setup->seed + 1, ...) on stdout:
 * each seed's phase change, losses, best heads and ablations, the verdicts
 * counted, and the median and range of every column; bag is
 * induction_least_seen_loss of the held-out set. */
void induction_print_seeds(const InductionSeedResult *results, int S,
                           const InductionSetup *setup, double bag);

/* Part 3 of induction_heads: every head's previous-token and induction
 * scores (measures of induction_measure), the layers the best of each is
 * in; and head hp of layer 1's weight on key t - 1 at each query t, eight
 * queries a line. */
void induction_print_scores(const InductionModel *model, const InductionMeasures *m);
void induction_print_previous_by_query(const InductionModel *model,
                                       const InductionHeldOut *held_out, int hp);

#endif
