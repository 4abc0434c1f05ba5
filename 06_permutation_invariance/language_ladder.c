/*
 * language_ladder.c - the language model built up one piece at a time
 * (introduced in chapter 06's page "Building the GPT"). See
 * language_ladder.h.
 *
 * Beside language_model.c, the one program that uses it (the Makefile's
 * WITH_ lists).
 */
#include "language_ladder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/plot.h"
#include "memory.h"
#include "random.h"

/* What each rung has: one head or the training's, one block or the
 * training's, and the parts it leaves out. */
typedef struct {
    const char *label;
    bool one_head, one_block;
    LanguageParts parts;
} Rung;

static const Rung RUNGS[LADDER_RUNGS] = {
    {"1. bigram: a table of next scores", true, true, {.bigram = true}},
    {"2. one causal attention head", true, true,
     {.block = {.no_layer_norm = true, .no_residual = true, .no_mlp = true}}},
    {"3. more heads", false, true,
     {.block = {.no_layer_norm = true, .no_residual = true, .no_mlp = true}}},
    {"4. the MLP after attention", false, true,
     {.block = {.no_layer_norm = true, .no_residual = true}}},
    {"5. residuals, more blocks", false, false, {.block = {.no_layer_norm = true}}},
    {"6. layer norm: the page's model", false, false, {0}},
};

LanguageModel *ladder_rung_new(int r, const Corpus *corpus, const LanguageTraining *t,
                               uint64_t seed)
{
    const Rung *rung = &RUNGS[r];
    const int V = corpus->vocab;
    const bool bigram = rung->parts.bigram;
    Rng rng = rng_use(seed, RNG_PARAMETERS);
    return language_model_new_parts(corpus->bytes, V, t->context, bigram ? V : t->num_hiddens,
                                    rung->one_head ? 1 : t->num_heads,
                                    bigram ? 0 : rung->one_block ? 1 : t->num_layers,
                                    rung->parts, &rng);
}

/* t's steps on m, as language_model's part 2 takes them (without its
 * looks, which draw from streams of their own); 0, or the step whose loss
 * stopped being a number. */
static int train(LanguageModel *m, const Corpus *c, const LanguageTraining *t, uint64_t seed)
{
    Adam *adam = language_adamw_new(m, t);
    int *tokens = checked_malloc((size_t)t->batch_size * (t->context + 1), sizeof *tokens);
    Rng batches = rng_use(seed, RNG_BATCHES);
    int diverged_at = 0;
    const double start = language_seconds();
    for (int step = 0; step < t->steps && diverged_at == 0; step++) {
        text_batch_draw(c->ids, c->train_n, t->batch_size, t->context, &batches, tokens);
        adam->lr = (float)lm_learning_rate(step, t->lr, t->min_lr, t->warmup, t->steps);
        const double loss = language_model_train_step(m, adam, tokens, t->batch_size, t->clip);
        if (!isfinite(loss) || !parameters_finite(m->params, m->num_params))
            diverged_at = step + 1;
        language_progress(step + 1, t->steps, loss, (double)t->batch_size * t->context, start);
    }
    free(tokens);
    adam_free(adam);
    return diverged_at;
}

/* rung r trained and scored */
static LadderRung climb(int r, const Corpus *c, const LanguageTraining *t, uint64_t seed,
                        const LanguageKernels *kernels)
{
    LanguageModel *m = ladder_rung_new(r, c, t, seed);
    m->kernels = *kernels;
    LadderRung rung = {RUNGS[r].label, RUNGS[r].parts.bigram ? 0 : m->num_heads,
                       RUNGS[r].parts.bigram ? 0 : m->num_layers, language_model_size(m), NAN,
                       train(m, c, t, seed)};
    if (rung.diverged_at == 0)
        rung.held_out = language_model_text_loss(m, c->ids + c->train_n, c->n - c->train_n, 32);
    language_model_free(m);
    return rung;
}

/* The bigram counted, not trained, as the lecture's first model: every
 * pair of the training text counted, each count plus one; the mean of
 * -log p(next | this) over the held-out pairs rung 1 is scored on. */
static double counted_bigram_loss(const Corpus *c)
{
    const int V = c->vocab;
    double *counts = checked_calloc((size_t)V * V, sizeof *counts);
    double *rows = checked_calloc((size_t)V, sizeof *rows);
    for (size_t i = 0; i + 1 < c->train_n; i++) {
        counts[(size_t)c->ids[i] * V + c->ids[i + 1]] += 1.0;
        rows[c->ids[i]] += 1.0;
    }
    double sum = 0.0;
    for (size_t i = c->train_n; i + 1 < c->n; i++) {
        const int a = c->ids[i], b = c->ids[i + 1];
        sum -= log((counts[(size_t)a * V + b] + 1.0) / (rows[a] + V));
    }
    free(counts);
    free(rows);
    return sum / (double)(c->n - c->train_n - 1);
}

static void print_row(const LadderRung *r)
{
    printf("  %-33s %5d %8d %12zu", r->label, r->heads, r->blocks, r->parameters);
    if (r->diverged_at == 0)
        printf("   %13.4f\n", r->held_out);
    else
        printf("   not a number at step %d\n", r->diverged_at);
    fflush(stdout);   /* a row a minute or so: each seen when it is done */
}

int ladder_part(const Corpus *c, const LanguageTraining *t, uint64_t seed,
                const char *kernel_name, int num_threads, const char *plot_dir)
{
    LanguageKernels table;
    if (!language_kernels(kernel_name, num_threads, &table))
        die("no kernels named '%s'", kernel_name);   /* the program checked it */
    const LanguageKernels *kernels = &table;
    printf("The ladder: the model built up one piece at a time, every rung trained as\n"
           "the model is (%d AdamW steps of %d windows of %d characters, seed %llu, on\n"
           "the %s kernels), each scored on all %zu held-out characters.\n\n",
           t->steps, t->batch_size, t->context, (unsigned long long)seed, kernels->name,
           c->n - c->train_n - 1);
    printf("  rung                              heads   blocks   parameters   held-out loss\n");
    LadderRung rungs[LADDER_RUNGS];
    const char *labels[LADDER_RUNGS];
    double losses[LADDER_RUNGS];
    int drawn = 0;
    for (int r = 0; r < LADDER_RUNGS; r++) {
        rungs[r] = climb(r, c, t, seed, kernels);
        print_row(&rungs[r]);
        if (rungs[r].diverged_at == 0) {
            labels[drawn] = rungs[r].label;
            losses[drawn++] = rungs[r].held_out;
        }
    }
    printf("\nFor scale, the bigram counted instead of trained (every pair of the training\n"
           "text counted, plus one, as the lecture's first model): %.4f.\n",
           counted_bigram_loss(c));
    printf("\nThe held-out losses (nats per character; lower is better):\n\n");
    bars_terminal(stdout, labels, losses, drawn, 40);
    printf("\n");
    if (plot_dir == NULL || drawn == 0)
        return 0;
    return plot_bars(plot_dir, "language_model_ladder", labels, losses, drawn,
                     "held-out loss (nats per character)");
}
