/*
 * language_ladder.h - the language model built up one piece at a time,
 * each rung trained as the model is and scored on the held-out text
 * (introduced in chapter 06's page "Building the GPT").
 *
 *   1. bigram: a (V, V) table, a row of next-character scores per character
 *   2. one causal attention head, with position embeddings
 *   3. H heads
 *   4. the MLP (GELU) after attention
 *   5. residual connections, and N blocks
 *   6. layer norm: the page's model
 *
 * Rungs 2 to 4 have one block; rungs 2 to 5 no layer norm; rungs 2 to 4 no
 * residual (each half's output replaces the stream). The sizes (D, C, H,
 * N) are the training's (learn/language_model.h's LanguageTraining), so
 * the last rung is the model language_model trains, to the bit.
 */
#ifndef LANGUAGE_LADDER_H
#define LANGUAGE_LADDER_H

#include <stdint.h>

#include "learn/language_model.h"
#include "language_run.h"

enum { LADDER_RUNGS = 6 };

typedef struct {
    const char *label;          /* "1. bigram: ...", as the table prints it */
    int heads, blocks;          /* 0 and 0 for the bigram */
    size_t parameters;          /* language_model_size of the rung */
    double held_out;            /* the loss on all of the held-out text, nats */
    int diverged_at;            /* 0, or the step whose loss stopped being a number */
} LadderRung;

/* Rung r (0 .. LADDER_RUNGS - 1) of t's sizes over corpus's vocabulary,
 * drawn from seed's RNG_PARAMETERS stream: a new model, its kernels the
 * clear ones. */
LanguageModel *ladder_rung_new(int r, const Corpus *corpus, const LanguageTraining *t,
                               uint64_t seed);

/* language_model --ladder: every rung trained as language_model trains
 * (t's steps of AdamW on batches of seed's RNG_BATCHES stream, on the
 * kernels named, "clear" or "fast", language_run.h), then scored on all of the held-out text, each printed as a
 * row of the table once it is done; then the losses as bars of
 * characters, and with plot_dir, DIR/language_model_ladder.{dat,gp}.
 * Returns 0, or the status of a plot that could not be written. */
int ladder_part(const Corpus *corpus, const LanguageTraining *t, uint64_t seed,
                const char *kernels, int num_threads, const char *plot_dir);

#endif
