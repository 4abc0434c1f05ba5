/*
 * language_probes.h - what the language model's heads do, measured on
 * probes that repeat (introduced in chapter 06's page "A language model",
 * with the scores of the page "Induction heads").
 *
 * Legend: C = context, P = C / 2, V = vocabulary, N = num_layers,
 * H = num_heads.
 *
 * A probe is P characters, then the same P again, and one more: C + 1
 * tokens, so that the window of C inputs has C targets. A prediction at
 * t >= P can copy: token t appeared P places back, and what followed it
 * then follows it now. The P characters are drawn uniformly from the
 * vocabulary (random probes) or cut from a text (text probes).
 *
 * The scores of a head, averaged over the probes:
 *   previous-token: the weight query t puts on key t - 1, over t >= 1;
 *   induction:      the weight query t >= P puts on key t - P + 1, the
 *                   token after the one earlier copy of token t (with one
 *                   earlier copy, "after the most recent copy" and "after
 *                   every copy" are the same key).
 * Silencing is zero ablation (language_model_ablate_head): the head's
 * values, and so its output, set to 0.
 *
 * Beside language_model.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef LANGUAGE_PROBES_H
#define LANGUAGE_PROBES_H

#include <stddef.h>

#include "learn/language_model.h"
#include "tensor.h"

enum { LM_MAX_ALL_HEADS = LM_MAX_LAYERS * LM_MAX_HEADS };   /* N * H: the heads a table holds */

/* tokens (count, C + 1): random probes when text is NULL (drawn from a
 * fixed stream), else text probes cut from text[0 .. n) at count evenly
 * spaced offsets. New; the caller frees. */
int *language_probes_new(const LanguageModel *model, const int *text, size_t n, int count);

/* The mean loss of the predictions at t in [from, to) over count probes. */
double language_probe_loss(const LanguageModel *model, const int *probes, int count, int from,
                           int to);

/* previous (N*H,) and induction (N*H,), head l*H + h; weights, when not
 * NULL, receives each block's weights on the first probe (1, H, C, C). */
void language_head_scores(const LanguageModel *model, const int *probes, int count,
                          double *previous, double *induction, Tensor **weights);

/* order (count,): the heads by score, highest first (ties: the lower head first). */
void heads_by_score(const double *scores, int count, int *order);

/* What silencing heads[0 .. k) together does: the loss of the repeat on
 * both kinds of probes, and the loss on a held-out text. */
typedef struct {
    const int *random, *text;   /* probes (count, C + 1) each */
    int count;
    const int *held_out;        /* ids */
    size_t held_out_n;
} LanguageProbes;

typedef struct {
    double random_repeat, text_repeat, held_out;
} LanguageSilenced;

LanguageSilenced language_silence(LanguageModel *model, const LanguageProbes *probes,
                                  const int *heads, int k);

#endif
