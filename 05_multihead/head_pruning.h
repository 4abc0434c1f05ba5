/*
 * head_pruning.h - which heads a trained two-key model can lose: held-out
 * accuracy with heads masked, pruning curves along an order of the heads,
 * and the best subset of each size, the bound no order can pass
 * (introduced in chapter 05's page "Why several heads", d2l's exercise 2).
 *
 * Legend: N = held-out examples, H = num_heads, D = num_hiddens.
 *
 * A curve has H + 1 points, one per number of heads masked:
 *
 *     curve[k] = held-out accuracy with k heads masked, H - k kept, k = 0..H
 *
 * Masking a head changes only what comes after the heads (W_o and the
 * readout, head_gates.h), so the heads' outputs on the held-out examples
 * are computed once (HeldOut) and every accuracy below starts from them.
 *
 * Beside head_importance.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef HEAD_PRUNING_H
#define HEAD_PRUNING_H

#include <stdbool.h>
#include <stdint.h>

#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "tensor.h"

/* Every subset is tried up to PRUNING_MAX_SUBSET_HEADS heads (2^H
 * evaluations). */
enum { PRUNING_MAX_HEADS = 16, PRUNING_MAX_SUBSET_HEADS = 10 };

typedef struct {
    const TwoKeyModel *model;    /* borrowed */
    const TaskBatch *examples;   /* N examples never trained on, borrowed */
    Tensor *heads;               /* (N, 1, D): the heads side by side, before W_o */
} HeldOut;

/* model, examples (N) -> the heads' outputs on them, computed once. */
HeldOut held_out_new(const TwoKeyModel *model, const TaskBatch *examples);
void held_out_free(HeldOut *held);
/* gates (H,) or NULL (all 1) -> the share of the N examples with both
 * answers right. */
double held_out_accuracy(const HeldOut *held, const float *gates);

/* values (n,) -> order (n,): the indices sorted by value, ascending,
 * stable (ties keep their index order). */
void argsort(const double *values, int *order, int n);

/* Each head's worth two ways, and the order each gives, least first. */
typedef struct {
    double importance[PRUNING_MAX_HEADS];   /* I_h on the ranking examples */
    double masked[PRUNING_MAX_HEADS];       /* held-out accuracy with head h alone masked */
    double lost[PRUNING_MAX_HEADS];         /* the accuracy masking h costs */
    int by_importance[PRUNING_MAX_HEADS];   /* heads, least important first */
    int by_lost[PRUNING_MAX_HEADS];         /* heads, least missed first */
    int rank_importance[PRUNING_MAX_HEADS]; /* head h's place in by_importance, from 1 */
    int rank_lost[PRUNING_MAX_HEADS];       /* head h's place in by_lost, from 1 */
} HeadWorth;

/* ranking (examples the model trained on), held -> worth: the importance
 * of two_key_head_importance (the model's gradients are left zero) and the
 * held-out accuracy with each head alone masked. */
void head_worth(TwoKeyModel *model, const TaskBatch *ranking, const HeldOut *held,
                HeadWorth *worth);

/* order (H,) -> curve (H + 1,): the heads masked one by one in that order. */
void pruning_curve(const HeldOut *held, const int *order, double *curve);

/* best (H + 1,): best[k] = the best accuracy of any H - k heads kept.
 * false when H > PRUNING_MAX_SUBSET_HEADS: too many subsets to try. */
bool best_subsets(const HeldOut *held, double *best);

/* A model's pruning: its ranking and its curves, k masked -> [k]. */
typedef struct {
    int least_first[PRUNING_MAX_HEADS];            /* the ranking, least important first */
    double by_least[PRUNING_MAX_HEADS + 1];        /* least important first */
    double by_most[PRUNING_MAX_HEADS + 1];         /* most important first */
    double random[PRUNING_MAX_HEADS + 1];          /* the mean of the random orders */
    double best[PRUNING_MAX_HEADS + 1];            /* best_subsets, when has_best */
    bool has_best;
} Pruning;

/* importance (H,) -> the ranking and every curve; the random orders,
 * num_orders of them, are drawn from seed's RNG_ORDERS stream. */
void prune_heads(const HeldOut *held, const double *importance, int num_orders, uint64_t seed,
                 Pruning *pruning);

/* curve (H + 1,) -> its mean over heads kept 0 to H: the area under it, as
 * a share of the whole box. */
double curve_area(const double *curve, int num_heads);

/* curve (H + 1,) -> the fewest heads kept whose accuracy stays within one
 * point of all H, pruning along the curve. */
int fewest_heads(const double *curve, int num_heads);

/* The area between the ranking's curve and the random orders' mean:
 * above 0 when least important first keeps more accuracy. */
double pruning_margin(const Pruning *pruning, int num_heads);

/* prunings (n,) of models with H heads -> median, each curve the median
 * at each k (its ranking and by_most are not set). */
void pruning_median(const Pruning *prunings, int n, int num_heads, Pruning *median);

/* Bytes head_importance holds at its largest, about: num_seeds models
 * (two_key_bytes_needed with neither batch nor examples: the parameters,
 * their gradients and Adam's moments), at_once of them training, each
 * with its step on batch examples; then the importance's step on examples
 * ranking ones beside the held-out heads (examples, D). */
double pruning_bytes_needed(int key_vocab, int value_vocab, int num_pairs, int num_hiddens,
                            int num_heads, int num_seeds, int at_once, int batch, int examples);

#endif
