/*
 * language_model - attention that writes: a character-level GPT built from
 * the chapters' multi-head layer, trained on Shakespeare's plays (chapter
 * 06's page "A language model").
 *
 * Part 1: the text and the model.
 * Part 2: training, with the training and held-out loss every few hundred
 *         steps and a sample at each of those points.
 * Part 3: the loss on all of the held-out text, and a longer sample.
 * Part 4: what the heads learned: previous-token and induction scores on
 *         repeated random characters, and each induction head silenced.
 * --to DIR saves the trained model; --from DIR reads one instead of
 * training and runs parts 3 and 4 on it. --bench times training steps.
 *
 * Legend: B = batch_size, C = context, V = vocabulary, D = num_hiddens,
 * H = num_heads, N = num_layers, P = C / 2, a repeated stretch.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fast/fast_attention_layer.h"
#include "fast/fast_exp.h"
#include "io/cli.h"
#include "io/model.h"
#include "io/plot.h"
#include "io/text_file.h"
#include "learn/language_model.h"
#include "learn/loss.h"
#include "run/saved_models.h"
#include "tensor.h"

static const char PROG[] = "language_model";
static const char DEFAULT_TEXT[] = "06_permutation_invariance/tinyshakespeare.txt";

enum { MAX_CONTEXT = 512, MAX_THREADS = 64, PROBES = 40, SAMPLE_AT_EVAL = 160 };

typedef struct {
    uint64_t seed;
    int num_layers, num_heads, num_hiddens, context, batch, steps, warmup, eval_every,
        eval_batches, sample, num_threads;
    double lr, min_lr, weight_decay, clip;
    float temperature;
    bool bench;
    const char *text, *prompt, *plot_dir, *to_dir, *from_dir;
} Options;

/* The text as tokens: the first 90% trains, the rest is held out. */
typedef struct {
    int *ids;
    size_t n, train_n;
    int vocab, bytes[LM_MAX_VOCAB];
} Corpus;

static void check_options(const Options *opt)
{
    cli_require_heads_split(PROG, opt->num_hiddens, opt->num_heads, "--hiddens", "--heads");
    if (opt->prompt[0] == '\0')
        cli_fail(PROG, "--prompt is empty: give at least one character");
    if (opt->min_lr > opt->lr)
        cli_fail(PROG, "--min-lr %g is above --lr %g: the schedule decays to it", opt->min_lr,
                 opt->lr);
    if (opt->from_dir != NULL) {
        cli_check_input_dir(PROG, "--from", opt->from_dir);
        if (opt->to_dir != NULL || opt->bench)
            cli_fail(PROG, "--from reads a trained model: it takes neither --to nor --bench");
    }
    const double C = opt->context, D = opt->num_hiddens, B = opt->batch;
    /* a step keeps about 20 D floats per token and layer, and H C per
     * token and layer of attention weights in the heads' part */
    const double per_token = opt->num_layers * (20.0 * D + opt->num_heads * C) + 8.0 * 256;
    memory_require(4.0 * per_token * B * C * 2.0, "the training step's activations",
                   "use a smaller --batch, --context or --hiddens");
}

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .num_layers = 4, .num_heads = 4, .num_hiddens = 128,
                   .context = 64, .batch = 12, .steps = 2000, .warmup = 100,
                   .eval_every = 500, .eval_batches = 20, .sample = 500, .num_threads = 2,
                   .lr = 1e-3, .min_lr = 1e-4, .weight_decay = 0.1, .clip = 1.0,
                   .temperature = 0.8f, .text = NULL, .prompt = "\n"};
    const CliOption options[] = {
        {"--text", CLI_STRING, &opt.text, .metavar = "FILE",
         .help = "the text to learn, UTF-8 (default: the chapter's tinyshakespeare.txt)"},
        {"--layers", CLI_INT, &opt.num_layers, .min = 1, .max = LM_MAX_LAYERS, .metavar = "N",
         .help = "transformer blocks"},
        {"--heads", CLI_INT, &opt.num_heads, .min = 1, .max = 64, .metavar = "H",
         .help = "num_heads of every block, dividing D"},
        {"--hiddens", CLI_INT, &opt.num_hiddens, .min = 2, .max = 1024, .metavar = "D",
         .help = "num_hiddens, the width of the residual stream"},
        {"--context", CLI_INT, &opt.context, .min = 2, .max = MAX_CONTEXT, .metavar = "C",
         .help = "characters the model sees at once"},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 1024, .metavar = "B",
         .help = "sequences per step"},
        {"--steps", CLI_INT, &opt.steps, .min = 0, .max = 1000000, .metavar = "N",
         .help = "AdamW steps"},
        {"--lr", CLI_DOUBLE, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "the learning rate after the warmup"},
        {"--min-lr", CLI_DOUBLE, &opt.min_lr, .min = 0.0, .max = 1.0, .metavar = "LR",
         .help = "the learning rate the cosine decays to at the last step"},
        {"--warmup", CLI_INT, &opt.warmup, .min = 0, .max = 1000000, .metavar = "N",
         .help = "steps of linear warmup"},
        {"--weight-decay", CLI_DOUBLE, &opt.weight_decay, .min = 0.0, .max = 1.0,
         .metavar = "W", .help = "AdamW's weight decay, on matrices only"},
        {"--clip", CLI_DOUBLE, &opt.clip, .min = 1e-3, .max = 1e6, .metavar = "G",
         .help = "the gradients' global norm is clipped to G"},
        {"--eval-every", CLI_INT, &opt.eval_every, .min = 1, .max = 1000000, .metavar = "N",
         .help = "steps between two looks at the losses and a sample"},
        {"--eval-batches", CLI_INT, &opt.eval_batches, .min = 1, .max = 10000, .metavar = "N",
         .help = "batches each look averages over, for each split"},
        {"--sample", CLI_INT, &opt.sample, .min = 0, .max = 1000000, .metavar = "N",
         .help = "characters to write at the end"},
        {"--temperature", CLI_FLOAT, &opt.temperature, .min = 0.0, .max = 10.0, .metavar = "T",
         .help = "divides the logits before sampling; 0 takes the likeliest"},
        {"--prompt", CLI_STRING, &opt.prompt, .metavar = "TEXT",
         .help = "what the final sample continues (default: a newline)"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S",
         .help = "parameters, batches and samples"},
        {"--threads", CLI_INT, &opt.num_threads, .min = 1, .max = MAX_THREADS, .metavar = "N",
         .help = "threads of the fast path that trains"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the loss curve and every head's heatmaps"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the trained model as .npy files"},
        {"--from", CLI_STRING, &opt.from_dir, .metavar = "DIR",
         .help = "read a model saved with --to instead of training"},
        {"--bench", CLI_FLAG, &opt.bench,
         .help = "time training steps on 1 and 2 threads, then stop"},
    };
    cli_parse(&(CliTable){PROG, "A character-level GPT built from chapter 05's layer, "
                          "trained on Shakespeare.", CLI_COUNT(options), options},
              argc, argv);
    check_options(&opt);
    return opt;
}

/* ---- the text ------------------------------------------------------------------------ */

/* The text's bytes as tokens of vocabulary bytes (the model's, or the
 * text's own when bytes is NULL); 1 and a line on stderr when it cannot be
 * used. */
static int corpus_load(const Options *opt, const int *model_bytes, int model_vocab,
                       Corpus *corpus)
{
    const char *path = opt->text != NULL ? opt->text : DEFAULT_TEXT;
    char err[512];
    unsigned char *text;
    size_t n;
    if (text_file_read(path, &text, &n, err, sizeof err) != 0) {
        if (opt->text == NULL)
            return report_failure(NULL, "%s (run from the repository's root, or give --text "
                                  "FILE)", err);
        return report_failure(NULL, "%s", err);
    }
    *corpus = (Corpus){.n = n, .train_n = n - n / 10};
    corpus->vocab = model_bytes != NULL ? model_vocab
                                        : text_vocabulary(text, n, corpus->bytes);
    if (model_bytes != NULL)
        memcpy(corpus->bytes, model_bytes, (size_t)model_vocab * sizeof *model_bytes);
    corpus->ids = checked_malloc(PROG, n, sizeof *corpus->ids);
    const size_t bad = text_encode(text, n, corpus->bytes, corpus->vocab, corpus->ids);
    const unsigned bad_byte = bad < n ? text[bad] : 0;
    free(text);
    /* both parts need a whole window of C + 1 characters */
    const size_t need = 10 * ((size_t)opt->context + 2);
    if (bad < n)
        return report_failure(NULL, "%s: byte %zu (0x%02x) is not in the model's vocabulary of "
                              "%d characters", path, bad, bad_byte, corpus->vocab);
    if (corpus->vocab < 2)
        return report_failure(NULL, "%s: a text of one repeated character teaches nothing",
                              path);
    if (n < need)
        return report_failure(NULL, "%s: %zu bytes is too short for a context of %d: the "
                              "held-out tenth needs %d, so at least %zu bytes", path, n,
                              opt->context, opt->context + 2, need);
    return 0;
}

/* tokens (B, C + 1): B windows of ids[0 .. n) starting at random offsets */
static void draw_batch(const int *ids, size_t n, int B, int C, Rng *rng, int *tokens)
{
    for (int b = 0; b < B; b++) {
        const size_t start = (size_t)rng_below(rng, (uint32_t)(n - (size_t)C));
        memcpy(tokens + (size_t)b * (C + 1), ids + start, (size_t)(C + 1) * sizeof *ids);
    }
}

/* The mean loss over batches windows of one split, the same windows at
 * every look (their own stream). */
static double split_loss(const LanguageModel *model, const int *ids, size_t n, int batches,
                         int B, uint64_t stream)
{
    const int C = model->context;
    int *tokens = checked_malloc(PROG, (size_t)B * (C + 1), sizeof *tokens);
    Rng rng = rng_new_stream(0x5eed, stream);
    double sum = 0.0;
    for (int i = 0; i < batches; i++) {
        draw_batch(ids, n, B, C, &rng, tokens);
        sum += language_model_loss(model, tokens, B, C);
    }
    free(tokens);
    return sum / batches;
}

/* text (n,) tokens -> printed as the bytes they stand for, each line indented */
static void print_text(const LanguageModel *model, const int *tokens, int n)
{
    printf("    ");
    for (int i = 0; i < n; i++) {
        const int c = model->bytes[tokens[i]];
        putchar(c);
        if (c == '\n')
            printf("    ");
    }
    printf("\n");
}

/* The prompt as tokens: a wrong --prompt was refused before any work
 * (check_prompt). */
static void prompt_tokens(const LanguageModel *model, const char *prompt, int **tokens,
                          int *length)
{
    const size_t n = strlen(prompt);
    *tokens = checked_malloc(PROG, n, sizeof **tokens);
    const size_t bad = text_encode((const unsigned char *)prompt, n, model->bytes,
                                   model->vocab, *tokens);
    if (bad < n)
        die("prompt_tokens", "character %zu of the prompt is not in the vocabulary", bad);
    *length = (int)n;
}

/* A usage error, before any output, when a character of --prompt is not
 * one the model knows. */
static void check_prompt(const LanguageModel *model, const char *prompt)
{
    for (size_t i = 0; prompt[i] != '\0'; i++) {
        const int c = (unsigned char)prompt[i];
        bool known = false;
        for (int t = 0; t < model->vocab; t++)
            known = known || model->bytes[t] == c;
        if (!known)
            cli_fail(PROG, "--prompt: character %zu (0x%02x) is not in the vocabulary", i,
                     (unsigned)c);
    }
}

static void print_sample(const LanguageModel *model, const Options *opt, int n, Rng *rng)
{
    int *prompt, length;
    prompt_tokens(model, opt->prompt, &prompt, &length);
    int *out = checked_malloc(PROG, (size_t)n, sizeof *out);
    language_model_sample(model, prompt, length, out, n, opt->temperature, rng);
    print_text(model, out, n);
    free(out);
    free(prompt);
}

/* ---- the parts ----------------------------------------------------------------------- */

static void part1_text(const Options *opt, const Corpus *c, const LanguageModel *m)
{
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
               "clipped to a norm of %g; seed %llu.\n\n",
               opt->steps, opt->batch, opt->context, opt->lr, opt->warmup, opt->min_lr,
               opt->weight_decay, opt->clip, (unsigned long long)opt->seed);
    else
        printf("Read from --from; not trained here.\n\n");
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* In place on a terminal: step, loss, characters per second, time left. */
static void progress(int step, int steps, double loss, double tokens_per_step, double start)
{
    if (!isatty(fileno(stderr)))
        return;
    const double elapsed = seconds_now() - start;
    const double rate = step > 0 ? step / elapsed : 0.0;
    fprintf(stderr, "\r  step %d/%d  loss %.3f  %.0f characters/s  %.0f s left   ", step, steps,
            loss, rate * tokens_per_step, rate > 0 ? (steps - step) / rate : 0.0);
    if (step == steps)
        fprintf(stderr, "\n");
}

/* One look at the losses (a row of the table) and a short sample. */
static void evaluate(LanguageModel *m, const Options *opt, const Corpus *c, int step,
                     Tensor *curve, int row)
{
    const double train = split_loss(m, c->ids, c->train_n, opt->eval_batches, opt->batch, 1);
    const double held_out = split_loss(m, c->ids + c->train_n, c->n - c->train_n,
                                       opt->eval_batches, opt->batch, 2);
    printf("  step %5d   training loss %.3f   held-out loss %.3f\n", step, train, held_out);
    AT2(curve, row, 0) = (float)step;
    AT2(curve, row, 1) = (float)train;
    AT2(curve, row, 2) = (float)held_out;
    Rng rng = rng_new_stream(opt->seed, 100 + (uint64_t)step);
    const Options short_opt = {.prompt = "\n", .temperature = opt->temperature};
    print_sample(m, &short_opt, SAMPLE_AT_EVAL, &rng);
    printf("\n");
}

static int write_curve(const Options *opt, const Tensor *curve, int rows)
{
    Tensor *xs = tensor_zeros(SHAPE(rows)), *ys = tensor_zeros(SHAPE(2, rows));
    for (int r = 0; r < rows; r++) {
        xs->data[r] = AT2(curve, r, 0);
        AT2(ys, 0, r) = AT2(curve, r, 1);
        AT2(ys, 1, r) = AT2(curve, r, 2);
    }
    const char *titles[2] = {"training", "held out"};
    const int status = plot_curves(opt->plot_dir, "language_model_loss", xs, ys, "step",
                                   "cross-entropy loss (nats per character)", titles, false);
    TENSOR_FREE(xs, ys);
    return status == 0 ? 0 : 1;
}

/* AdamW on the fast path, llm.c's loop: a batch, a step, a look now and then. */
static int part2_training(LanguageModel *m, const Options *opt, const Corpus *c)
{
    printf("Part 2. Training: the loss on %d batches of each part, and a sample\n\n",
           opt->eval_batches);
    Adam *adam = adam_new(m->params, m->num_params, (float)opt->lr);
    adam->beta2 = 0.99f;
    adam->weight_decay = (float)opt->weight_decay;
    const int rows = opt->steps / opt->eval_every + 2;
    Tensor *curve = tensor_zeros(SHAPE(rows, 3));
    int *tokens = checked_malloc(PROG, (size_t)opt->batch * (opt->context + 1), sizeof *tokens);
    Rng batches = rng_use(opt->seed, RNG_BATCHES);
    int row = 0, status = 0;
    const double start = seconds_now();
    for (int step = 0; step <= opt->steps; step++) {
        if (step % opt->eval_every == 0 || step == opt->steps)
            evaluate(m, opt, c, step, curve, row++);
        if (step == opt->steps)
            break;
        draw_batch(c->ids, c->train_n, opt->batch, opt->context, &batches, tokens);
        adam->lr = (float)lm_learning_rate(step, opt->lr, opt->min_lr, opt->warmup, opt->steps);
        const double loss = language_model_train_step(m, adam, tokens, opt->batch, opt->clip);
        if (!isfinite(loss) || !parameters_finite(m->params, m->num_params)) {
            status = report_failure(NULL, "step %d: the loss stopped being a number (%g): try "
                                    "a smaller --lr", step + 1, loss);
            break;
        }
        progress(step + 1, opt->steps, loss, (double)opt->batch * opt->context, start);
    }
    if (status == 0 && opt->plot_dir != NULL)
        status = write_curve(opt, curve, row);
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
        return report_failure(NULL, "the model's held-out loss is not a number (%g): its "
                              "weights overflow", loss);
    printf("Part 3. The held-out loss and a sample\n\n"
           "The loss on all %zu held-out characters (each predicted from up to %d before\n"
           "it): %.4f nats.\n\n", held_n - 1, m->context, loss);
    if (opt->sample > 0) {
        printf("%d characters at temperature %g:\n\n", opt->sample, (double)opt->temperature);
        Rng rng = rng_use(opt->seed, RNG_ORDERS);
        print_sample(m, opt, opt->sample, &rng);
        printf("\n");
    }
    return 0;
}

/* ---- part 4: the heads ----------------------------------------------------------------
 * A probe is P random characters, then the same P again, and one more, so
 * that the window of C = 2P inputs has 2P targets: the prediction at t >=
 * P can copy what followed token t the first time. */

/* tokens (count, C + 1) of probes: random characters, or held-out text
 * (from text, when not NULL), repeated */
static int *probes_new(const LanguageModel *m, const int *text, size_t text_n, int count)
{
    const int C = m->context, P = C / 2;
    int *tokens = checked_malloc(PROG, (size_t)count * (C + 1), sizeof *tokens);
    Rng rng = rng_use(0, RNG_HELDOUT);
    for (int s = 0; s < count; s++) {
        int *row = tokens + (size_t)s * (C + 1);
        const size_t start = text != NULL ? (text_n - (size_t)P) * (size_t)s / (size_t)count : 0;
        for (int t = 0; t <= C; t++)
            row[t] = t >= P ? row[t - P]
                            : text != NULL ? text[start + (size_t)t]
                                           : (int)rng_below(&rng, (uint32_t)m->vocab);
    }
    return tokens;
}

/* The mean loss of the predictions at t in [from, to) over the probes. */
static double probe_loss(const LanguageModel *m, const int *probes, int count, int from, int to)
{
    const int C = m->context, V = m->vocab;
    double sum = 0.0;
    for (int s = 0; s < count; s++) {
        const int *row = probes + (size_t)s * (C + 1);
        Tensor *logits = language_model_forward(m, row, 1, C, NULL, NULL);   /* (1, C, V) */
        for (int t = from; t < to; t++)
            sum += logsumexp_row(logits->data + (size_t)t * V, V) -
                   logits->data[(size_t)t * V + row[t + 1]];
        tensor_free(logits);
    }
    return sum / ((double)count * (to - from));
}

/* Every head's scores on the probes: previous-token, the mean weight of
 * query t >= 1 on key t - 1; induction, the mean weight of query t >= P
 * on key t - P + 1, the token after the one earlier copy of token t. */
static void head_scores(const LanguageModel *m, const int *probes, int count, double *previous,
                        double *induction, Tensor **first_weights)
{
    const int C = m->context, P = C / 2, N = m->num_layers, H = m->num_heads;
    memset(previous, 0, (size_t)N * H * sizeof *previous);
    memset(induction, 0, (size_t)N * H * sizeof *induction);
    for (int s = 0; s < count; s++) {
        Tensor *weights[LM_MAX_LAYERS] = {NULL};
        Tensor *logits = language_model_forward(m, probes + (size_t)s * (C + 1), 1, C, weights,
                                                NULL);
        for (int l = 0; l < N; l++) {
            for (int h = 0; h < H; h++) {
                for (int t = 1; t < C; t++)
                    previous[l * H + h] += AT4(weights[l], 0, h, t, t - 1) / (C - 1.0) / count;
                for (int t = P; t < C; t++)
                    induction[l * H + h] += AT4(weights[l], 0, h, t, t - P + 1) /
                                            (double)(C - P) / count;
            }
            if (s == 0 && first_weights != NULL)
                first_weights[l] = weights[l];
            else
                tensor_free(weights[l]);
        }
        tensor_free(logits);
    }
}

static const double INDUCTION_LINE = 0.4;   /* a head above it is called an induction head */

/* heads (N*H) ordered by induction score, highest first */
static void order_heads(const double *induction, int count, int *order)
{
    for (int i = 0; i < count; i++)
        order[i] = i;
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && induction[order[j]] > induction[order[j - 1]]; j--) {
            const int swap = order[j];
            order[j] = order[j - 1];
            order[j - 1] = swap;
        }
}

typedef struct {
    const int *random, *text;      /* probes: random characters, held-out text; repeated */
    const Corpus *corpus;
    size_t held_n;                 /* held-out characters the loss row reads */
} Probes;

/* One row of the silencing table: the heads[0 .. k) silenced together. */
static void silencing_row(LanguageModel *m, const Probes *p, const int *heads, int k,
                          const char *label)
{
    const int H = m->num_heads, C = m->context, P = C / 2, d = m->num_hiddens / H;
    float *saved = checked_malloc(PROG, (size_t)k * (m->num_hiddens + 1) * d, sizeof *saved);
    for (int i = 0; i < k; i++)
        language_model_ablate_head(m, heads[i] / H, heads[i] % H,
                                   saved + (size_t)i * (m->num_hiddens + 1) * d);
    const double random = probe_loss(m, p->random, PROBES, P, C);
    const double text = probe_loss(m, p->text, PROBES, P, C);
    const double held = language_model_text_loss(m, p->corpus->ids + p->corpus->train_n,
                                                 p->held_n, 32);
    printf("  %-28s %14.3f %16.3f %12.3f\n", label, random, text, held);
    for (int i = k - 1; i >= 0; i--)
        language_model_restore_head(m, heads[i] / H, heads[i] % H,
                                    saved + (size_t)i * (m->num_hiddens + 1) * d);
    free(saved);
}

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

/* head's weights on the first probe where an induction stripe would be:
 * queries P .. P+15 against keys 1 .. 16 */
static void draw_stripe(const LanguageModel *m, Tensor *const *weights, int head)
{
    const int H = m->num_heads, P = m->context / 2, w = HEATMAP_TERMINAL_MAX;
    if (P < w)
        return;
    Tensor *crop = tensor_zeros(SHAPE(w, w));
    for (int i = 0; i < w; i++)
        for (int j = 0; j < w; j++)
            AT2(crop, i, j) = AT4(weights[head / H], 0, head % H, P + i, 1 + j);
    char title[160];
    snprintf(title, sizeof title, "block %d head %d on a probe: row i is query %d + i, column j "
             "is key 1 + j", head / H + 1, head % H + 1, P);
    heatmap_terminal(stdout, crop, title);
    printf("\nAn induction head would draw the diagonal: query %d + i on key 1 + i, the\n"
           "character after the first copy of its own.\n\n", P);
    tensor_free(crop);
}

/* --plot: every head on one line of held-out text, and on the first probe */
static int plot_heads(const LanguageModel *m, const Options *opt, const Corpus *c,
                      Tensor *const *probe_weights)
{
    const int C = m->context, N = m->num_layers, H = m->num_heads;
    /* the first line of the held-out text that starts a window of C + 1 */
    size_t start = c->train_n;
    while (start + (size_t)C + 1 < c->n && c->bytes[c->ids[start]] != '\n')
        start++;
    Tensor *weights[LM_MAX_LAYERS] = {NULL};
    Tensor *logits = language_model_forward(m, c->ids + start + 1, 1, C, weights, NULL);
    Tensor *grid = tensor_zeros(SHAPE(N, H, C, C)), *probe = tensor_zeros(SHAPE(N, H, C, C));
    for (int l = 0; l < N; l++) {
        memcpy(grid->data + (size_t)l * H * C * C, weights[l]->data,
               (size_t)H * C * C * sizeof(float));
        memcpy(probe->data + (size_t)l * H * C * C, probe_weights[l]->data,
               (size_t)H * C * C * sizeof(float));
    }
    int status = plot_heatmaps_titled(opt->plot_dir, "language_model_heads",
                                      "every head on a line of held-out text (rows: blocks)",
                                      grid, "key position", "query position", NULL);
    if (status == 0)
        status = plot_heatmaps_titled(opt->plot_dir, "language_model_probe",
                                      "every head on repeated random characters", probe,
                                      "key position", "query position", NULL);
    for (int l = 0; l < N; l++)
        tensor_free(weights[l]);
    TENSOR_FREE(logits, grid, probe);
    return status == 0 ? 0 : 1;
}

/* The silencing table: no head, each induction head, all of them, and
 * as many of the lowest-scoring heads; the best head alone when none
 * passes the line. */
static void silencing_table(LanguageModel *m, const Probes *p, const int *order, int count)
{
    const int H = m->num_heads, NH = m->num_layers * H;
    printf("Silenced (zero ablation: a head's values set to 0), the loss of the repeat\n"
           "on %d probes of random characters and %d of held-out text, and the loss on\n"
           "the first %zu held-out characters:\n\n"
           "  silenced                      random repeat   text repeat   held out\n",
           PROBES, PROBES, p->held_n);
    silencing_row(m, p, order, 0, "none");
    char label[64];
    const int rows = count > 0 ? count : 1;
    for (int i = 0; i < rows; i++) {
        snprintf(label, sizeof label, "block %d head %d%s", order[i] / H + 1, order[i] % H + 1,
                 count > 0 ? "" : " (the best)");
        silencing_row(m, p, order + i, 1, label);
    }
    if (count > 1) {
        snprintf(label, sizeof label, "all %d induction heads", count);
        silencing_row(m, p, order, count, label);
    }
    if (2 * rows <= NH) {
        snprintf(label, sizeof label, "the %d lowest-scoring %s", rows,
                 rows == 1 ? "head" : "heads");
        silencing_row(m, p, order + NH - rows, rows, label);
    }
    printf("\n");
}

static int part4_heads(LanguageModel *m, const Options *opt, const Corpus *c)
{
    const int C = m->context, P = C / 2, NH = m->num_layers * m->num_heads;
    const size_t held_n = c->n - c->train_n;
    Probes p = {.random = probes_new(m, NULL, 0, PROBES),
                .text = probes_new(m, c->ids + c->train_n, held_n, PROBES), .corpus = c,
                .held_n = held_n < 16384 ? held_n : 16384};
    printf("Part 4. What the heads learned\n\n"
           "A probe: %d characters, then the same %d again. On %d probes of random\n"
           "characters the first half costs %.3f nats a character and the repeat %.3f;\n"
           "on %d of held-out text, %.3f and %.3f.\n\n",
           P, P, PROBES, probe_loss(m, p.random, PROBES, 0, P - 1),
           probe_loss(m, p.random, PROBES, P, C), PROBES, probe_loss(m, p.text, PROBES, 0, P - 1),
           probe_loss(m, p.text, PROBES, P, C));
    double previous[LM_MAX_LAYERS * 64], induction[LM_MAX_LAYERS * 64];
    double text_previous[LM_MAX_LAYERS * 64], text_induction[LM_MAX_LAYERS * 64];
    Tensor *first[LM_MAX_LAYERS] = {NULL};
    head_scores(m, p.random, PROBES, previous, induction, first);
    head_scores(m, p.text, PROBES, text_previous, text_induction, NULL);
    printf("Scores on the random probes (on the text probes for the last column):\n\n");
    print_scores(m, previous, induction, text_induction);
    int order[LM_MAX_LAYERS * 64] = {0}, count = 0;
    order_heads(induction, NH, order);
    while (count < NH && induction[order[count]] > INDUCTION_LINE)
        count++;
    printf("\n%d of %d heads score above %.1f as induction heads.\n\n", count, NH,
           INDUCTION_LINE);
    draw_stripe(m, first, order[0]);
    silencing_table(m, &p, order, count);
    int status = opt->plot_dir != NULL ? plot_heads(m, opt, c, first) : 0;
    for (int l = 0; l < m->num_layers; l++)
        tensor_free(first[l]);
    free((int *)p.random);
    free((int *)p.text);
    return status;
}

/* ---- --bench ----------------------------------------------------------------------- */

static int run_bench(const Options *opt, const Corpus *c)
{
    const int steps = 30, warm = 3;
    int *tokens = checked_malloc(PROG, (size_t)opt->batch * (opt->context + 1), sizeof *tokens);
    for (int threads = 1; threads <= 2; threads++) {
        Rng rng = rng_use(opt->seed, RNG_PARAMETERS), batches = rng_use(opt->seed, RNG_BATCHES);
        LanguageModel *m = language_model_new(c->bytes, c->vocab, opt->context,
                                              opt->num_hiddens, opt->num_heads,
                                              opt->num_layers, &rng);
        m->kernels = (LanguageKernels){fast_attention_layer(threads), fast_gelu_forward,
                                       fast_gelu_backward};
        Adam *adam = adam_new(m->params, m->num_params, (float)opt->lr);
        adam->beta2 = 0.99f;
        adam->weight_decay = (float)opt->weight_decay;
        double start = 0.0;
        for (int s = 0; s < warm + steps; s++) {
            if (s == warm)
                start = seconds_now();
            draw_batch(c->ids, c->train_n, opt->batch, opt->context, &batches, tokens);
            language_model_train_step(m, adam, tokens, opt->batch, opt->clip);
        }
        printf("c threads %d: %.2f steps/s\n", threads, steps / (seconds_now() - start));
        adam_free(adam);
        language_model_free(m);
    }
    free(tokens);
    return 0;
}

/* ---- main ---------------------------------------------------------------------------- */

/* --from: the model, then the text in its vocabulary; the model refused
 * when its loss on the text is not a number. */
static LanguageModel *load_model(const Options *opt, Corpus *c, int *status)
{
    char err[MODEL_ERR_LEN];
    LanguageModel *m = language_model_load_new(opt->from_dir, MAX_CONTEXT, err, sizeof err);
    if (m == NULL) {
        *status = report_failure(NULL, "%s", err);
        return NULL;
    }
    Options sized = *opt;
    sized.context = m->context;
    *status = corpus_load(&sized, m->bytes, m->vocab, c);
    if (*status == 0) {
        const double loss = split_loss(m, c->ids + c->train_n, c->n - c->train_n, 1, 4, 2);
        if (!isfinite(loss))
            *status = report_failure(NULL, "%s: the model's loss on the text is not a number "
                                     "(%g): its weights overflow", opt->from_dir, loss);
    }
    return m;
}

static int save_model(const LanguageModel *m, const Options *opt)
{
    char err[MODEL_ERR_LEN];
    if (model_save(opt->to_dir, m->files, m->num_files, err, sizeof err) != 0)
        return report_failure(NULL, "%s", err);
    printf("Saved to %s: %d files, as PyTorch names the parameters.\n\n", opt->to_dir,
           m->num_files);
    return 0;
}

int main(int argc, char **argv)
{
    const Options opt = parse_options(argc, argv);
    Corpus corpus = {0};
    LanguageModel *m = NULL;
    int status = 0;
    if (opt.from_dir != NULL) {
        m = load_model(&opt, &corpus, &status);
    } else if ((status = corpus_load(&opt, NULL, 0, &corpus)) == 0 && !opt.bench) {
        Rng rng = rng_use(opt.seed, RNG_PARAMETERS);
        m = language_model_new(corpus.bytes, corpus.vocab, opt.context, opt.num_hiddens,
                               opt.num_heads, opt.num_layers, &rng);
    }
    if (status == 0 && opt.bench)
        status = run_bench(&opt, &corpus);
    if (status == 0 && m != NULL) {
        check_prompt(m, opt.prompt);
        m->kernels = (LanguageKernels){fast_attention_layer(opt.num_threads), fast_gelu_forward,
                                       fast_gelu_backward};
        part1_text(&opt, &corpus, m);
        if (opt.from_dir == NULL)
            status = part2_training(m, &opt, &corpus);
        if (status == 0 && opt.to_dir != NULL)
            status = save_model(m, &opt);
        if (status == 0)
            status = part3_sample(m, &opt, &corpus);
        if (status == 0)
            status = part4_heads(m, &opt, &corpus);
    }
    language_model_free(m);
    free(corpus.ids);
    return status;
}
