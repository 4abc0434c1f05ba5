/*
 * language_model - attention that writes: a character-level GPT built from the chapters'
 * multi-head layer, trained on Shakespeare's plays (chapter 06's page "A language model").
 *
 * Part 1: the text and the model.
 * Part 2: training; both losses every few hundred steps, each with a sample.
 * Part 3: the loss on all of the held-out text, and a longer sample.
 * Part 4: the heads' scores on probes that repeat, and the best silenced.
 * --to DIR saves the model; --from DIR reads one and runs parts 3 and 4.
 * --ladder trains the build-up instead, six models, and prints their losses.
 *
 * Legend: B = batch_size, C = context, V = vocabulary, D = num_hiddens,
 * H = num_heads, N = num_layers, P = C / 2, a probe's half.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "io/model.h"
#include "language_ladder.h"
#include "language_probes.h"
#include "language_run.h"
#include "learn/language_model.h"
#include "run/saved_models.h"
#include "tensor.h"

static const char PROG[] = "language_model";
static const char SUMMARY[] = "A character-level GPT built from chapter 05's layer, trained on "
                              "Shakespeare.";

enum { MAX_CONTEXT = 512, MAX_THREADS = 64, PROBES = 40, SAMPLE_AT_EVAL = 160,
       EVAL_BATCHES = 20, BENCH_STEPS = 30, CURVE_EVERY = 100 };
/* The sizes --context and --hiddens take, and a --from set's too. */
static const LanguageLimits LIMITS = {.min_context = 2, .max_context = MAX_CONTEXT,
                                      .min_hiddens = 2, .max_hiddens = 1024};

typedef struct {
    LanguageTraining train;   /* sizes, steps and AdamW's settings */
    uint64_t seed;
    int eval_every, sample, num_threads;
    float temperature;
    bool bench, trains, ladder;   /* trains: a sizing or training option given */
    const char *text, *prompt, *plot_dir, *to_dir, *from_dir, *kernels, *size;
} Options;

/* The checks between options (exit 2), then the memory: 0, or the exit
 * status after one line. */
static int check_options(const Options *opt)
{
    const LanguageTraining *t = &opt->train;
    if (opt->prompt != NULL && opt->prompt[0] == '\0')
        cli_fail(PROG, "--prompt is empty: give at least one character");
    if (!language_kernels(opt->kernels, 1, &(LanguageKernels){0}))
        cli_fail(PROG, "--kernels '%s': expected clear or fast", opt->kernels);
    if (opt->from_dir != NULL && (opt->to_dir != NULL || opt->bench))
        cli_fail(PROG, "--from reads a trained model: it takes neither --to nor --bench");
    if (opt->from_dir != NULL && opt->trains)
        cli_fail(PROG, "--from reads a trained model, its sizes from the saved set: it takes no "
                 "--size, --layers, --heads, --hiddens, --context, --batch, --steps, --lr or "
                 "--eval-every");
    if (opt->ladder && (opt->from_dir != NULL || opt->to_dir != NULL || opt->bench))
        cli_fail(PROG, "--ladder trains six models of its own: it takes no --from, --to, --bench");
    /* per token and block, about 20 D floats, and H C of attention weights */
    const double per_token = t->num_layers * (20.0 * t->num_hiddens + t->num_heads * t->context);
    return memory_require(4.0 * (per_token + 2.0 * LM_MAX_VOCAB) * t->batch_size * t->context,
                          "the training step's activations",
                          "use a smaller --batch, --context or --hiddens");
}

/* argv read by the table into opt, whose values are the defaults, and the
 * status (cli_parse's, or quietly cli_parse_args', for --size alone). */
static Options read_options(Options opt, int argc, char **argv, bool quietly, int *status)
{
    LanguageTraining *t = &opt.train;
    const CliOption options[] = {
        {"--text", CLI_STRING, &opt.text, .metavar = "FILE",
         .help = "the text to learn, UTF-8 (default: the chapter's tinyshakespeare.txt)"},
        {"--size", CLI_STRING, &opt.size, .metavar = "S", .given = &opt.trains,
         .help = "small or large: the sizes, steps and lr; those given win"},
        {"--layers", CLI_INT, &t->num_layers, .min = 1, .max = LM_MAX_LAYERS, .metavar = "N",
         .help = "transformer blocks", .given = &opt.trains},
        {"--heads", CLI_INT, &t->num_heads, .min = 1, .max = LM_MAX_HEADS, .metavar = "H",
         .help = "heads per block, dividing D", .given = &opt.trains, .splits = &t->num_hiddens},
        {"--hiddens", CLI_INT, &t->num_hiddens, .min = LIMITS.min_hiddens,
         .max = LIMITS.max_hiddens, .metavar = "D",
         .help = "num_hiddens, the width of the residual stream", .given = &opt.trains},
        {"--context", CLI_INT, &t->context, .min = LIMITS.min_context,
         .max = LIMITS.max_context, .metavar = "C",
         .help = "characters the model sees at once", .given = &opt.trains},
        {"--batch", CLI_INT, &t->batch_size, .min = 1, .max = 1024, .metavar = "B",
         .help = "windows of C + 1 characters per step", .given = &opt.trains},
        {"--steps", CLI_INT, &t->steps, .min = 0, .max = 1000000, .metavar = "N",
         .help = "AdamW steps: 100 of warmup, then a cosine to lr / 10", .given = &opt.trains},
        {"--lr", CLI_DOUBLE, &t->lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "the learning rate after the warmup", .given = &opt.trains},
        {"--eval-every", CLI_INT, &opt.eval_every, .min = 1, .max = 1000000, .metavar = "N",
         .help = "steps between two looks at the losses, each with a sample", .given = &opt.trains},
        {"--sample", CLI_INT, &opt.sample, .min = 0, .max = 1000000, .metavar = "N",
         .help = "characters to write at the end"},
        {"--temperature", CLI_FLOAT, &opt.temperature, .min = 0.0, .max = 10.0, .metavar = "T",
         .help = "divides the logits before sampling; 0 takes the likeliest"},
        {"--prompt", CLI_STRING, &opt.prompt, .metavar = "TEXT",
         .help = "what the final sample continues (default: a newline, or the\n"
                 "vocabulary's first character when the text has none)"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S", .help = "parameters, batches, samples"},
        {"--kernels", CLI_STRING, &opt.kernels, .metavar = "K", .help = "clear or fast code"},
        {"--threads", CLI_INT, &opt.num_threads, .min = 1, .max = MAX_THREADS, .metavar = "N",
         .help = "threads of the fast path that trains"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR", .help = "write the loss and heads"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR", .help = "save the model as .npy files"},
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "read a model, not train"},
        {"--bench", CLI_FLAG, &opt.bench, .help = "time training steps on 1 and 2 threads"},
        {"--ladder", CLI_FLAG, &opt.ladder, .help = "the build-up: six models trained, a table"},
    };
    const CliTable cli = {PROG, SUMMARY, CLI_COUNT(options), options};
    char err[CLI_ERR_LEN];
    *status = quietly ? (int)cli_parse_args(&cli, argc, argv, err, sizeof err)
                      : cli_parse(&cli, argc, argv);
    return opt;
}

/* --size first: its preset (language_run.h) holds the defaults the other options change. */
static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.train = LANGUAGE_TRAINING, .eval_every = 500, .sample = 500,
                   .num_threads = 2, .temperature = 0.8f, .kernels = "fast", .size = "small"};
    opt.size = read_options(opt, argc, argv, true, done).size;
    if (!language_size(opt.size, &opt.train))
        cli_fail(PROG, "--size '%s': expected small or large", opt.size);
    opt = read_options(opt, argc, argv, false, done);
    opt.train.min_lr = opt.train.lr / 10.0;
    return opt;
}

/* ---- the parts ----------------------------------------------------------------------- */

static void part1_text(const Options *opt, const Corpus *c, const LanguageModel *m)
{
    const LanguageTraining *t = &opt->train;
    printf("A language model: attention that writes\n\n"
           "Part 1. The text and the model\n\n"
           "The text: %zu bytes, %d distinct (the vocabulary: a token is a byte).\n"
           "The first %zu train; the last %zu are held out. Guessing uniformly costs\n"
           "log %d = %.3f nats per character.\n\n",
           c->n, c->vocab, c->train_n, c->n - c->train_n, c->vocab, log((double)c->vocab));
    printf("The model: wte (%d, %d) + wpe (%d, %d), %d %s of [layer norm, causal\n"
           "attention with %d heads of %d, residual; layer norm, MLP %d -> %d -> %d with\n"
           "GELU, residual], a last layer norm, and wte again as the unembedding:\n"
           "%zu parameters.\n\n",
           m->vocab, m->num_hiddens, m->context, m->num_hiddens, m->num_layers,
           m->num_layers == 1 ? "block" : "blocks", m->num_heads,
           m->num_hiddens / m->num_heads, m->num_hiddens, 4 * m->num_hiddens, m->num_hiddens,
           language_model_size(m));
    if (opt->from_dir == NULL)
        printf("Training: %d AdamW steps of %d windows of %d characters; lr %g, warmed up\n"
               "over %d steps, then a cosine to %g; weight decay %g on matrices; gradients\n"
               "clipped to a norm of %g; seed %llu; on the %s kernels (--kernels).\n\n",
               t->steps, t->batch_size, t->context, t->lr, t->warmup, t->min_lr,
               t->weight_decay, t->clip, (unsigned long long)opt->seed, m->kernels.name);
    else
        printf("Read from --from; not trained here; on the %s kernels.\n\n", m->kernels.name);
}

/* Both parts' losses into a row of curve; printed with a short sample when
 * shown (--plot's curve looks more often than the table). */
static void look(const LanguageModel *m, const Options *opt, const Corpus *c, int step,
                 Tensor *curve, int row, bool shown)
{
    const int B = opt->train.batch_size;
    Rng windows = rng_use(opt->seed, RNG_HELDOUT);   /* the same windows at every look */
    const double held_out = language_model_sampled_loss(m, c->ids + c->train_n,
                                                        c->n - c->train_n, B, EVAL_BATCHES,
                                                        &windows);
    const double train = language_model_sampled_loss(m, c->ids, c->train_n, B, EVAL_BATCHES,
                                                     &windows);
    AT2(curve, row, 0) = (float)step;
    AT2(curve, row, 1) = (float)train;
    AT2(curve, row, 2) = (float)held_out;
    if (!shown)
        return;
    printf("  step %5d   training loss %.3f   held-out loss %.3f\n", step, train, held_out);
    Rng rng = rng_step(opt->seed, (uint64_t)step + 1);   /* a sample's own stream */
    char start[2];
    print_sample(m, sample_prompt(m, NULL, start), opt->temperature, SAMPLE_AT_EVAL, &rng);
    printf("\n");
}

/* A look at step: 2 shown (every --eval-every and the last step), 1 on
 * --plot's curve alone (every multiple of every), 0 none. */
static int look_at(const Options *opt, int every, int step)
{
    if (step % opt->eval_every == 0 || step == opt->train.steps)
        return 2;
    return step % every == 0;
}

/* AdamW on the fast path, as llm.c's loop: a batch, a step, now and then a look. */
static int part2_training(LanguageModel *m, const Options *opt, const Corpus *c)
{
    const LanguageTraining *t = &opt->train;
    printf("Part 2. Training: the loss on %d batches of each part, and a sample\n\n",
           EVAL_BATCHES);
    Adam *adam = language_adamw_new(m, t);
    const bool often = opt->plot_dir != NULL && CURVE_EVERY < opt->eval_every;
    const int every = often ? CURVE_EVERY : opt->eval_every;   /* --plot's curve */
    int looks = 0;   /* a row of the curve each, counted by the loop's own rule */
    for (int step = 0; step <= t->steps; step++)
        looks += look_at(opt, every, step) > 0;
    Tensor *curve = tensor_zeros(SHAPE(looks, 3));
    int *tokens = checked_malloc((size_t)t->batch_size * (t->context + 1), sizeof *tokens);
    Rng batches = rng_use(opt->seed, RNG_BATCHES);
    int rows = 0, status = 0;
    const double start = language_seconds();
    for (int step = 0; step <= t->steps; step++) {
        const int kind = look_at(opt, every, step);
        if (kind > 0) {
            const bool shown = kind == 2;
            look(m, opt, c, step, curve, rows++, shown);
            if (shown && (status = cli_stdout_check()) != 0)
                break;   /* a full disk stops the run at its first look */
        }
        if (step == t->steps)
            break;
        text_batch_draw(c->ids, c->train_n, t->batch_size, t->context, &batches, tokens);
        adam->lr = (float)lm_learning_rate(step, t->lr, t->min_lr, t->warmup, t->steps);
        const double loss = language_model_train_step(m, adam, tokens, t->batch_size, t->clip);
        if (!isfinite(loss) || !parameters_finite(m->params, m->num_params)) {
            status = fail("step %d: the loss stopped being a number (%g): try "
                          "a smaller --lr", step + 1, loss);
            break;
        }
        language_progress(step + 1, t->steps, loss, (double)t->batch_size * t->context, start);
    }
    if (status == 0 && opt->plot_dir != NULL)
        status = language_plot_curve(opt->plot_dir, curve, rows);
    free(tokens);
    tensor_free(curve);
    adam_free(adam);
    return status;
}

static int part3_sample(const LanguageModel *m, const Options *opt, const Corpus *c)
{
    const size_t held_n = c->n - c->train_n;
    const double loss = language_model_text_loss(m, c->ids + c->train_n, held_n, 32);
    if (!isfinite(loss))
        return fail("the model's held-out loss is not a number (%g): its "
                    "weights overflow", loss);
    printf("Part 3. The held-out loss and a sample\n\n"
           "The loss on all %zu held-out characters (each predicted from up to %d before\n"
           "it): %.4f nats.\n\n", held_n - 1, m->context, loss);
    language_print_estimate(m, c, opt->train.batch_size, EVAL_BATCHES, opt->seed);
    if (opt->sample > 0) {
        printf("%d characters at temperature %g:\n\n", opt->sample, (double)opt->temperature);
        Rng rng = rng_use(opt->seed, RNG_ORDERS);
        char start[2];
        print_sample(m, sample_prompt(m, opt->prompt, start), opt->temperature, opt->sample, &rng);
        printf("\n");
    }
    return 0;
}

/* ---- part 4: the heads (language_probes.h) ---------------------------------------- */

static const double INDUCTION_LINE = 0.4;   /* a head above it is called an induction head */

static void print_scores(const LanguageModel *m, const double *previous,
                         const double *induction, const double *text_induction)
{
    const int H = m->num_heads;
    printf("  block   head   previous-token   induction   induction on text\n");
    for (int i = 0; i < m->num_layers * H; i++)
        printf("  %5d   %4d   %14.2f   %9.2f   %17.2f%s\n", i / H + 1, i % H + 1, previous[i],
               induction[i], text_induction[i],
               induction[i] > INDUCTION_LINE ? "   an induction head" : "");
}

static void silence_row(LanguageModel *m, const LanguageProbes *p, const int *heads, int k,
                        const char *label)
{
    const LanguageSilenced r = language_silence(m, p, heads, k);
    printf("  %-29s %14.3f %13.3f %10.3f\n", label, r.random_repeat, r.text_repeat, r.held_out);
}

/* The silencing table: no head, each induction head, all of them, and as many of the
 * lowest-scoring heads; the best head alone when none passes the line. */
static void silencing_table(LanguageModel *m, const LanguageProbes *p, const int *order,
                            int count)
{
    const int H = m->num_heads, NH = m->num_layers * H;
    printf("Silenced (zero ablation: a head's values set to 0), the loss of the repeat\n"
           "on %d probes of random characters and %d of held-out text, and the loss on\n"
           "the first %zu held-out characters:\n\n"
           "  silenced                      random repeat   text repeat   held out\n",
           p->count, p->count, p->held_out_n);
    silence_row(m, p, order, 0, "none");
    char label[64];
    const int rows = count > 0 ? count : 1;
    for (int i = 0; i < rows; i++) {
        snprintf(label, sizeof label, "block %d head %d%s", order[i] / H + 1, order[i] % H + 1,
                 count > 0 ? "" : " (the best)");
        silence_row(m, p, order + i, 1, label);
    }
    if (count > 1) {
        snprintf(label, sizeof label, "all %d induction heads", count);
        silence_row(m, p, order, count, label);
    }
    if (2 * rows <= NH) {
        const int last = order[NH - 1];
        if (rows == 1)
            snprintf(label, sizeof label, "block %d head %d (the lowest)", last / H + 1,
                     last % H + 1);
        else
            snprintf(label, sizeof label, "the %d lowest-scoring heads", rows);
        silence_row(m, p, order + NH - rows, rows, label);
    }
    printf("\n");
}

static int part4_heads(LanguageModel *m, const Options *opt, const Corpus *c)
{
    const int C = m->context, P = C / 2, NH = m->num_layers * m->num_heads;
    const int *held = c->ids + c->train_n;
    const size_t held_n = c->n - c->train_n;
    LanguageProbes p = {.random = language_probes_new(m, NULL, 0, PROBES),
                        .text = language_probes_new(m, held, held_n, PROBES), .count = PROBES,
                        .held_out = held, .held_out_n = held_n < 16384 ? held_n : 16384};
    printf("Part 4. What the heads learned\n\n"
           "A probe: %d characters, then the same %d again. On %d probes of random\n"
           "characters the first half costs %.3f nats a character and the repeat %.3f;\n"
           "on %d of held-out text, %.3f and %.3f.\n\n", P, P, PROBES,
           language_probe_loss(m, p.random, PROBES, 0, P - 1),
           language_probe_loss(m, p.random, PROBES, P, C), PROBES,
           language_probe_loss(m, p.text, PROBES, 0, P - 1),
           language_probe_loss(m, p.text, PROBES, P, C));
    double previous[LM_MAX_ALL_HEADS], induction[LM_MAX_ALL_HEADS];
    double text_previous[LM_MAX_ALL_HEADS], text_induction[LM_MAX_ALL_HEADS];
    Tensor *first[LM_MAX_LAYERS] = {NULL};
    language_head_scores(m, p.random, PROBES, previous, induction, first);
    language_head_scores(m, p.text, PROBES, text_previous, text_induction, NULL);
    printf("Scores on the random probes (on the text probes for the last column):\n\n");
    print_scores(m, previous, induction, text_induction);
    int order[LM_MAX_ALL_HEADS] = {0}, count = 0;
    heads_by_score(induction, NH, order);
    while (count < NH && induction[order[count]] > INDUCTION_LINE)
        count++;
    printf("\n%d of %d heads score above %.1f as induction heads.\n\n", count, NH,
           INDUCTION_LINE);
    silencing_table(m, &p, order, count);
    int status = opt->plot_dir != NULL ? language_plot_heads(opt->plot_dir, m, c, first) : 0;
    for (int l = 0; l < m->num_layers; l++)
        tensor_free(first[l]);
    free((int *)p.random);
    free((int *)p.text);
    return status;
}

/* ---- main ---------------------------------------------------------------------------- */

/* --from: the model, then the text in its vocabulary; refused when its
 * loss on the text is not a number (finite weights can overflow). */
static LanguageModel *load_model(const Options *opt, Corpus *c, int *status)
{
    char err[MODEL_ERR_LEN];
    LanguageModel *m = language_model_load_new(opt->from_dir, &LIMITS, err, sizeof err);
    if (m == NULL) {
        *status = fail("%s", err);
        return NULL;
    }
    *status = text_load(opt->text, m, m->context, c);
    if (*status == 0) {
        const double loss = language_model_text_loss(m, c->ids + c->train_n, 4 * m->context, 4);
        if (!isfinite(loss))
            *status = fail("%s: the model's loss on the text is not a number "
                           "(%g): its weights overflow", opt->from_dir, loss);
    }
    return m;
}

static int save_model(const LanguageModel *m, const Options *opt)
{
    char err[MODEL_ERR_LEN];
    if (model_save(opt->to_dir, m->files, m->num_files, err, sizeof err) != 0)
        return fail("%s", err);
    printf("Saved to %s: %d files, as PyTorch names the parameters.\n\n", opt->to_dir,
           m->num_files);
    return 0;
}

/* The model to show: trained here, or read by --from. */
static int run(LanguageModel *m, const Options *opt, const Corpus *c)
{
    check_prompt(m, opt->prompt);
    language_kernels(opt->kernels, opt->num_threads, &m->kernels);   /* checked: check_options */
    part1_text(opt, c, m);
    int status = cli_stdout_check();   /* a full disk stops the run before it trains */
    if (status == 0 && opt->from_dir == NULL)
        status = part2_training(m, opt, c);
    if (status == 0 && opt->to_dir != NULL)
        status = save_model(m, opt);
    if (status == 0)
        status = part3_sample(m, opt, c);
    if (status == 0)
        status = cli_stdout_check();
    if (status == 0)
        status = part4_heads(m, opt, c);
    return status;
}

int main(int argc, char **argv)
{
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    Corpus corpus = {0};
    LanguageModel *m = NULL;
    int status = check_options(&opt);
    if (status == 0 && opt.from_dir != NULL) {
        m = load_model(&opt, &corpus, &status);
    } else if (status == 0 &&
               (status = text_load(opt.text, NULL, opt.train.context, &corpus)) == 0 &&
               !opt.bench && !opt.ladder) {
        Rng rng = rng_use(opt.seed, RNG_PARAMETERS);
        const LanguageTraining *t = &opt.train;
        m = language_model_new(corpus.bytes, corpus.vocab, t->context, t->num_hiddens,
                               t->num_heads, t->num_layers, &rng);
    }
    if (status == 0)
        status = opt.bench    ? language_bench(&corpus, &opt.train, BENCH_STEPS)
                 : opt.ladder ? ladder_part(&corpus, &opt.train, opt.seed, opt.kernels,
                                            opt.num_threads, opt.plot_dir)
                              : run(m, &opt, &corpus);
    language_model_free(m);
    corpus_free(&corpus);
    return status;
}
