/*
 * head_pruning.c - which heads a trained two-key model can lose
 * (introduced in chapter 05's page "Why several heads"). See
 * head_pruning.h.
 *
 * Legend: N = held-out examples, H = num_heads, D = num_hiddens.
 */
#include "head_pruning.h"

#include <stdlib.h>

#include "error.h"
#include "learn/seeds.h"
#include "memory.h"
#include "random.h"

/* examples (N) -> the heads (N, 1, D) */
HeldOut held_out_new(const TwoKeyModel *model, const TaskBatch *examples)
{
    if (model->num_heads > PRUNING_MAX_HEADS)
        die("%d heads, more than the %d a pruning holds", model->num_heads,
            PRUNING_MAX_HEADS);
    return (HeldOut){model, examples, two_key_heads(model, examples)};
}

void held_out_free(HeldOut *held)
{
    tensor_free(held->heads);
    held->heads = NULL;
}

/* gates (H,) -> the share of N with both answers right */
double held_out_accuracy(const HeldOut *held, const float *gates)
{
    TwoKeyCorrect correct;
    two_key_evaluate_heads(held->model, held->examples, held->heads, gates, &correct);
    return (double)correct.pairs / held->examples->batch_size;
}

/* values (n,) -> order (n,), by insertion sort: stable, and n is small */
void argsort(const double *values, int *order, int n)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && values[order[j]] < values[order[j - 1]]; j--) {
            const int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
}

/* gates (H,) = 1 */
static void all_open(float *gates, int H)
{
    for (int h = 0; h < H; h++)
        gates[h] = 1.0f;
}

/* ranking, held -> worth, every array (H,) */
void head_worth(TwoKeyModel *model, const TaskBatch *ranking, const HeldOut *held,
                HeadWorth *worth)
{
    const int H = model->num_heads;
    HeadWorth *w = worth;
    two_key_head_importance(model, ranking, w->importance);
    const double full = held_out_accuracy(held, NULL);
    float gates[PRUNING_MAX_HEADS] = {0};
    all_open(gates, H);
    for (int h = 0; h < H; h++) {
        gates[h] = 0.0f;
        w->masked[h] = held_out_accuracy(held, gates);
        w->lost[h] = full - w->masked[h];
        gates[h] = 1.0f;
    }
    argsort(w->importance, w->by_importance, H);
    argsort(w->lost, w->by_lost, H);
    for (int i = 0; i < H; i++) {
        w->rank_importance[w->by_importance[i]] = i + 1;
        w->rank_lost[w->by_lost[i]] = i + 1;
    }
}

/* order (H,) -> curve (H + 1,) */
void pruning_curve(const HeldOut *held, const int *order, double *curve)
{
    const int H = held->model->num_heads;
    float gates[PRUNING_MAX_HEADS] = {0};
    all_open(gates, H);
    curve[0] = held_out_accuracy(held, gates);
    for (int k = 1; k <= H; k++) {
        gates[order[k - 1]] = 0.0f;
        curve[k] = held_out_accuracy(held, gates);
    }
}

/* -> best (H + 1,): subset `kept` keeps head h when its bit h is set */
bool best_subsets(const HeldOut *held, double *best)
{
    const int H = held->model->num_heads;
    if (H > PRUNING_MAX_SUBSET_HEADS)
        return false;
    for (int k = 0; k <= H; k++)
        best[k] = -1.0;
    for (unsigned kept = 0; kept < 1u << H; kept++) {
        float gates[PRUNING_MAX_HEADS] = {0};
        int count = 0;
        for (int h = 0; h < H; h++) {
            gates[h] = (float)(kept >> h & 1u);
            count += (int)(kept >> h & 1u);
        }
        const double accuracy = held_out_accuracy(held, gates);
        if (accuracy > best[H - count])
            best[H - count] = accuracy;
    }
    return true;
}

/* importance (H,) -> every curve of pruning */
void prune_heads(const HeldOut *held, const double *importance, int num_orders, uint64_t seed,
                 Pruning *pruning)
{
    const int H = held->model->num_heads;
    Pruning *p = pruning;
    int most_first[PRUNING_MAX_HEADS] = {0}, order[PRUNING_MAX_HEADS] = {0};
    argsort(importance, p->least_first, H);
    for (int i = 0; i < H; i++)
        most_first[i] = p->least_first[H - 1 - i];
    pruning_curve(held, p->least_first, p->by_least);
    pruning_curve(held, most_first, p->by_most);
    double one_order[PRUNING_MAX_HEADS + 1];
    for (int k = 0; k <= H; k++)
        p->random[k] = 0.0;
    Rng rng = rng_use(seed, RNG_ORDERS);
    for (int r = 0; r < num_orders; r++) {
        rng_permutation(&rng, order, H);
        pruning_curve(held, order, one_order);
        for (int k = 0; k <= H; k++)
            p->random[k] += one_order[k] / num_orders;
    }
    p->has_best = best_subsets(held, p->best);
}

/* curve (H + 1,) -> its mean */
double curve_area(const double *curve, int num_heads)
{
    double sum = 0.0;
    for (int k = 0; k <= num_heads; k++)
        sum += curve[k];
    return sum / (num_heads + 1);
}

/* curve (H + 1,) -> heads kept */
int fewest_heads(const double *curve, int num_heads)
{
    int k = 0;
    while (k < num_heads && curve[k + 1] >= curve[0] - 0.01)
        k++;
    return num_heads - k;
}

double pruning_margin(const Pruning *pruning, int num_heads)
{
    return curve_area(pruning->by_least, num_heads) - curve_area(pruning->random, num_heads);
}

/* prunings (n,) -> median: by_least, by_most, random, best (H + 1,) */
void pruning_median(const Pruning *prunings, int n, int num_heads, Pruning *median)
{
    double *values = checked_calloc(4 * (size_t)n, sizeof *values);
    double *least = values, *most = values + n, *random = values + 2 * n, *best = values + 3 * n;
    *median = (Pruning){.has_best = prunings[0].has_best};
    for (int k = 0; k <= num_heads; k++) {
        for (int i = 0; i < n; i++) {
            least[i] = prunings[i].by_least[k];
            most[i] = prunings[i].by_most[k];
            random[i] = prunings[i].random[k];
            best[i] = prunings[i].best[k];
        }
        median->by_least[k] = seeds_median(least, n);
        median->by_most[k] = seeds_median(most, n);
        median->random[k] = seeds_median(random, n);
        median->best[k] = seeds_median(best, n);
    }
    free(values);
}

double pruning_bytes_needed(int key_vocab, int value_vocab, int num_pairs, int num_hiddens,
                            int num_heads, int num_seeds, int at_once, int batch, int examples)
{
    const int Vk = key_vocab, Vv = value_vocab, P = num_pairs, D = num_hiddens, H = num_heads;
    const double model = two_key_bytes_needed(Vk, Vv, P, D, H, 0, 0, 0);
    const double training = at_once * two_key_bytes_needed(Vk, Vv, P, D, H, 0, batch, 0);
    const double pruning = two_key_bytes_needed(Vk, Vv, P, D, H, 0, examples, examples) +
                           4.0 * examples * D;
    return num_seeds * model + (training > pruning ? training : pruning);
}
