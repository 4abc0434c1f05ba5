/*
 * language_run.c - a text as tokens, the language model's bench and
 * pictures
 * (introduced in chapter 06's page "A language model"). See
 * language_run.h.
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include "language_run.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>

#include "error.h"
#include "fast/fast_attention_layer.h"
#include "fast/fast_exp.h"
#include "language_step.h"
#include "fast/fast_matmul.h"
#include "fast/fast_threads.h"
#include "io/plot.h"
#include "io/text_file.h"
#include "memory.h"

enum { MAX_TICKS = 128 };   /* a heatmap labels every character of a window this long */

int corpus_load(const char *path, const int *bytes, int vocab, int context, Corpus *corpus,
                char *err, size_t err_len)
{
    unsigned char *text;
    size_t n;
    if (text_file_read(path, &text, &n, err, err_len) != 0)
        return -1;
    Corpus c = {.n = n, .train_n = n - n / 10};
    c.vocab = bytes != NULL ? vocab : text_vocabulary(text, n, c.bytes);
    if (bytes != NULL)
        memcpy(c.bytes, bytes, (size_t)vocab * sizeof *bytes);
    c.ids = checked_malloc(n, sizeof *c.ids);
    const size_t bad = text_encode(text, n, c.bytes, c.vocab, c.ids);
    const unsigned bad_byte = bad < n ? text[bad] : 0;
    free(text);
    /* the held-out tenth needs a whole window of C + 1, and the rest too */
    const size_t need = 10 * ((size_t)context + 2);
    int status = 0;
    if (bad < n)
        status = error_format(err, err_len, path, "byte %zu (0x%02x) is not in the model's "
                              "vocabulary of %d characters", bad, bad_byte, c.vocab);
    else if (c.vocab < 2)
        status = error_format(err, err_len, path, "a text of one repeated character teaches "
                              "nothing");
    else if (n < need)
        status = error_format(err, err_len, path, "%zu bytes is too short for a context of %d: "
                              "the held-out tenth needs %d, so at least %zu bytes", n, context,
                              context + 2, need);
    if (status != 0)
        free(c.ids);
    else
        *corpus = c;
    return status;
}

static const char DEFAULT_TEXT[] = "06_permutation_invariance/tinyshakespeare.txt";

int text_load(const char *path, const LanguageModel *model, int context, Corpus *corpus)
{
    char err[512];
    if (corpus_load(path != NULL ? path : DEFAULT_TEXT, model != NULL ? model->bytes : NULL,
                    model != NULL ? model->vocab : 0, context, corpus, err, sizeof err) == 0)
        return 0;
    return fail("%s%s", err, path != NULL ? "" : " (run from the repository's root, or give "
                "--text FILE)");
}

void corpus_free(Corpus *corpus)
{
    free(corpus->ids);
    corpus->ids = NULL;
}

double language_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* NULL here; a build with a learner's pieces (tests/grader/inside_run)
 * links its own, which names them and takes this one's place */
__attribute__((weak)) const char *inside_pieces(void)
{
    return NULL;
}

bool language_kernels(const char *name, int num_threads, LanguageKernels *kernels)
{
    if (strcmp(name, "clear") == 0) {
        *kernels = CLEAR_LANGUAGE_KERNELS;
        return true;
    }
    if (strcmp(name, "fast") != 0)
        return false;
    const AttentionLayer fast = fast_attention_layer(num_threads);
    *kernels = (LanguageKernels){"fast", fast.forward, fast.backward, fast.linear,
                                 fast.linear_backward, fast_gelu_forward, fast_gelu_backward,
                                 num_threads, fast_parallel, language_share_step,
                                 language_update, language_prepare};
    // a build with a learner's pieces (make 06_permutation_invariance
    // EXERCISE=..., tests/grader/inside_run) defines inside_pieces: there
    // the pieces run one by one, each reaching the learner's code
    if (inside_pieces() != NULL) {
        kernels->share_step = NULL;
        kernels->update = NULL;
        kernels->prepare = NULL;
    }
    return true;
}

double language_steps_per_second(const Corpus *corpus, const LanguageTraining *t,
                                 int num_threads, int steps)
{
    Rng rng = rng_use(0, RNG_PARAMETERS), batches = rng_use(0, RNG_BATCHES);
    LanguageModel *m = language_model_new(corpus->bytes, corpus->vocab, t->context,
                                          t->num_hiddens, t->num_heads, t->num_layers, &rng);
    language_kernels("fast", num_threads, &m->kernels);
    Adam *adam = language_adamw_new(m, t);
    int *tokens = checked_malloc((size_t)t->batch_size * (t->context + 1), sizeof *tokens);
    double rate = 0.0, start = language_seconds();
    for (int s = 0; s < BENCH_UNTIMED + BENCH_ROUNDS * steps; s++) {
        const int timed = s - BENCH_UNTIMED;   /* steps into the rounds */
        if (timed >= 0 && timed % steps == 0)
            start = language_seconds();
        text_batch_draw(corpus->ids, corpus->train_n, t->batch_size, t->context, &batches,
                        tokens);
        adam->lr = (float)lm_learning_rate(s, t->lr, t->min_lr, t->warmup, t->steps);
        language_model_train_step(m, adam, tokens, t->batch_size, t->clip);
        if (timed >= 0 && timed % steps == steps - 1)   /* a round's end: the best kept */
            rate = fmax(rate, steps / (language_seconds() - start));
    }
    free(tokens);
    adam_free(adam);
    language_model_free(m);
    return rate;
}

void language_print_estimate(const LanguageModel *model, const Corpus *corpus, int batch_size,
                             int batches, uint64_t seed)
{
    const int C = model->context;
    const int *held = corpus->ids + corpus->train_n;
    const size_t held_n = corpus->n - corpus->train_n;
    int *tokens = checked_malloc((size_t)batch_size * (C + 1), sizeof *tokens);
    Rng windows = rng_use(seed, RNG_HELDOUT);   /* part 2's looks draw these windows */
    double sum = 0.0, sum_squares = 0.0;
    for (int i = 0; i < batches; i++) {
        text_batch_draw(held, held_n, batch_size, C, &windows, tokens);
        const double loss = language_model_loss(model, tokens, batch_size, C);
        sum += loss;
        sum_squares += loss * loss;
    }
    free(tokens);
    const double mean = sum / batches;
    const double variance = batches > 1 ? (sum_squares - batches * mean * mean) / (batches - 1)
                                        : 0.0;
    printf("nanoGPT's estimate_loss takes the mean of %d random batches instead: on part\n"
           "2's, %.4f. Such a mean varies from draw to draw: its standard deviation,\n"
           "the batches' spread over sqrt %d, is %.4f.\n\n", batches, mean, batches,
           sqrt(fmax(variance, 0.0) / batches));
}

bool language_size(const char *name, LanguageTraining *t)
{
    if (strcmp(name, "small") == 0)
        *t = LANGUAGE_TRAINING;
    else if (strcmp(name, "large") == 0)
        *t = LANGUAGE_LARGE;
    else
        return false;
    return true;
}

double language_step_flops(const LanguageTraining *t, int vocab)
{
    const double B = t->batch_size, T = t->context, D = t->num_hiddens, N = t->num_layers;
    const double products = 12.0 * N * D * D + (double)vocab * D;   /* per token */
    const double attention = 2.0 * T * D * N;                        /* per token */
    return 3.0 * 2.0 * B * T * (products + attention);
}

int language_bench(const Corpus *corpus, const LanguageTraining *t, int steps)
{
    // the machine's fp32 peak before the steps and after them, the larger kept
    double peak[3] = {0.0, fast_peak_gflops(1, 0.5), fast_peak_gflops(2, 0.5)};
    printf("c gflop per step: %.3f\n", language_step_flops(t, corpus->vocab) / 1e9);
    for (int threads = 1; threads <= 2; threads++)
        printf("c threads %d: %.2f steps/s\n", threads,
               language_steps_per_second(corpus, t, threads, steps));
    for (int threads = 1; threads <= 2; threads++)
        printf("peak threads %d: %.1f GFLOP/s\n", threads,
               fmax(peak[threads], fast_peak_gflops(threads, 0.5)));
    return 0;
}

int language_plot_curve(const char *dir, const Tensor *curve, int rows)
{
    Tensor *xs = tensor_zeros(SHAPE(rows)), *ys = tensor_zeros(SHAPE(2, rows));
    for (int r = 0; r < rows; r++) {
        xs->data[r] = AT2(curve, r, 0);
        AT2(ys, 0, r) = AT2(curve, r, 1);
        AT2(ys, 1, r) = AT2(curve, r, 2);
    }
    const char *titles[2] = {"training", "held out"};
    const int status = plot_curves(dir, "language_model_loss", xs, ys, "step",
                                   "cross-entropy loss (nats per character)", titles, false);
    TENSOR_FREE(xs, ys);
    return status;
}

/* token -> a label of one character for a heatmap's axis: the byte, or a
 * sign for a space or a newline, or its code when it is not printable */
static void char_label(int byte, char *label, size_t size)
{
    if (byte == ' ')
        snprintf(label, size, "\u2423");   /* open box */
    else if (byte == '\n')
        snprintf(label, size, "\u23ce");   /* return symbol */
    else if (byte > ' ' && byte < 0x7f)
        snprintf(label, size, "%c", byte);
    else
        snprintf(label, size, "\\x%02x", (unsigned)byte);
}

/* --plot: every head on one line of held-out text, and on the first probe */
int language_plot_heads(const char *dir, const LanguageModel *m, const Corpus *c,
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
    /* the window's characters label both axes: query t reads keys 0 .. t */
    char labels[MAX_TICKS][8];
    const char *ticks[MAX_TICKS];
    for (int t = 0; t < C && t < MAX_TICKS; t++) {
        char_label(c->bytes[c->ids[start + 1 + (size_t)t]], labels[t], sizeof labels[t]);
        ticks[t] = labels[t];
    }
    int status = plot_heatmaps_ticked(dir, "language_model_heads",
                                      "every head on a line of held-out text (rows: blocks)",
                                      grid, "key: the character read",
                                      "query: the character reading", NULL,
                                      C <= MAX_TICKS ? ticks : NULL);
    if (status == 0)
        status = plot_heatmaps_titled(dir, "language_model_probe",
                                      "every head on repeated random characters", probe,
                                      "key position", "query position", NULL);
    for (int l = 0; l < N; l++)
        tensor_free(weights[l]);
    TENSOR_FREE(logits, grid, probe);
    return status;
}

void language_progress(int step, int steps, double loss, double tokens_per_step, double start)
{
    if (!isatty(fileno(stderr)))
        return;
    const double rate = step / (language_seconds() - start);
    fprintf(stderr, "\r  step %d/%d  loss %.3f  %.0f characters/s  %.0f s left   %s", step,
            steps, loss, rate * tokens_per_step, (steps - step) / rate,
            step == steps ? "\n" : "");
}

/* ---- samples ----------------------------------------------------------------------- */

/* the offset of text's first character outside the model's vocabulary, -1
 * when there is none */
static long text_unknown(const LanguageModel *model, const char *text)
{
    int ids[1];
    for (size_t i = 0; text[i] != '\0'; i++)
        if (text_encode((const unsigned char *)text + i, 1, model->bytes, model->vocab, ids) == 0)
            return (long)i;
    return -1;
}

void check_prompt(const LanguageModel *model, const char *prompt)
{
    const long bad = prompt != NULL ? text_unknown(model, prompt) : -1;
    if (bad >= 0)
        cli_fail(NULL, "--prompt: character %ld (0x%02x) is not in the vocabulary", bad,
                 (unsigned)(unsigned char)prompt[bad]);
}

const char *sample_prompt(const LanguageModel *model, const char *prompt, char *start)
{
    start[0] = text_unknown(model, "\n") < 0 ? '\n' : (char)model->bytes[0];
    start[1] = '\0';
    return prompt != NULL ? prompt : start;
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

void print_sample(const LanguageModel *model, const char *prompt, float temperature, int n,
                  Rng *rng)
{
    const int length = (int)strlen(prompt);
    int *tokens = checked_malloc((size_t)length + n, sizeof *tokens);
    if (text_encode((const unsigned char *)prompt, (size_t)length, model->bytes, model->vocab,
                    tokens) < (size_t)length)
        die("the prompt holds a character outside the vocabulary");
    language_model_sample(model, tokens, length, tokens + length, n, temperature, rng);
    print_text(model, tokens + length, n);
    free(tokens);
}
