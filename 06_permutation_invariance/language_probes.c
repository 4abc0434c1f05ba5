/*
 * language_probes.c - the language model's heads measured on probes that
 * repeat (introduced in chapter 06's page "A language model"). See
 * language_probes.h.
 *
 * Legend: C = context, P = C / 2, V = vocabulary, N = num_layers,
 * H = num_heads.
 */
#include "language_probes.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "learn/loss.h"
#include "memory.h"

int *language_probes_new(const LanguageModel *model, const int *text, size_t n, int count)
{
    const int C = model->context, P = C / 2;
    if (text != NULL && n < (size_t)P)
        die("a text of %zu tokens is shorter than a probe's half, %d", n,
            P);
    int *tokens = checked_malloc((size_t)count * (C + 1), sizeof *tokens);
    Rng rng = rng_use(0, RNG_PROBES);   /* the same probes for every model */
    for (int s = 0; s < count; s++) {
        int *row = tokens + (size_t)s * (C + 1);
        const size_t start = text != NULL ? (n - (size_t)P) * (size_t)s / (size_t)count : 0;
        for (int t = 0; t <= C; t++)
            row[t] = t >= P ? row[t - P]   /* the repeat */
                     : text != NULL ? text[start + (size_t)t]
                                    : (int)rng_below(&rng, (uint32_t)model->vocab);
    }
    return tokens;
}

double language_probe_loss(const LanguageModel *model, const int *probes, int count, int from,
                           int to)
{
    const int C = model->context, V = model->vocab;
    double sum = 0.0;
    for (int s = 0; s < count; s++) {
        const int *row = probes + (size_t)s * (C + 1);
        Tensor *logits = language_model_forward(model, row, 1, C, NULL, NULL);   /* (1, C, V) */
        for (int t = from; t < to; t++)
            sum += logsumexp_row(logits->data + (size_t)t * V, V) -
                   logits->data[(size_t)t * V + row[t + 1]];
        tensor_free(logits);
    }
    return sum / ((double)count * (to - from));
}

/* one probe's weights (1, H, C, C) of block l -> its share of the scores */
static void add_scores(const Tensor *weights, int l, int H, int C, int count, double *previous,
                       double *induction)
{
    const int P = C / 2;
    for (int h = 0; h < H; h++) {
        for (int t = 1; t < C; t++)
            previous[l * H + h] += AT4(weights, 0, h, t, t - 1) / (C - 1.0) / count;
        for (int t = P; t < C; t++)
            induction[l * H + h] += AT4(weights, 0, h, t, t - P + 1) / (double)(C - P) / count;
    }
}

void language_head_scores(const LanguageModel *model, const int *probes, int count,
                          double *previous, double *induction, Tensor **weights)
{
    const int C = model->context, N = model->num_layers, H = model->num_heads;
    memset(previous, 0, (size_t)N * H * sizeof *previous);
    memset(induction, 0, (size_t)N * H * sizeof *induction);
    for (int s = 0; s < count; s++) {
        Tensor *probe_weights[LM_MAX_LAYERS] = {NULL};
        Tensor *logits = language_model_forward(model, probes + (size_t)s * (C + 1), 1, C,
                                                probe_weights, NULL);
        for (int l = 0; l < N; l++) {
            add_scores(probe_weights[l], l, H, C, count, previous, induction);
            if (s == 0 && weights != NULL)
                weights[l] = probe_weights[l];
            else
                tensor_free(probe_weights[l]);
        }
        tensor_free(logits);
    }
}

void heads_by_score(const double *scores, int count, int *order)
{
    for (int i = 0; i < count; i++)
        order[i] = i;
    for (int i = 1; i < count; i++)   /* insertion sort: stable, and count is small */
        for (int j = i; j > 0 && scores[order[j]] > scores[order[j - 1]]; j--) {
            const int swap = order[j];
            order[j] = order[j - 1];
            order[j - 1] = swap;
        }
}

LanguageSilenced language_silence(LanguageModel *model, const LanguageProbes *probes,
                                  const int *heads, int k)
{
    const int H = model->num_heads, C = model->context;
    const size_t per_head = (size_t)(model->num_hiddens + 1) * (model->num_hiddens / H);
    float *saved = checked_malloc((size_t)k * per_head, sizeof *saved);
    for (int i = 0; i < k; i++)
        language_model_ablate_head(model, heads[i] / H, heads[i] % H, saved + i * per_head);
    const LanguageSilenced result = {
        .random_repeat = language_probe_loss(model, probes->random, probes->count, C / 2, C),
        .text_repeat = language_probe_loss(model, probes->text, probes->count, C / 2, C),
        .held_out = language_model_text_loss(model, probes->held_out, probes->held_out_n, 32)};
    for (int i = k - 1; i >= 0; i--)
        language_model_restore_head(model, heads[i] / H, heads[i] % H, saved + i * per_head);
    free(saved);
    return result;
}
