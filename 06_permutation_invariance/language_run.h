/*
 * language_run.h - what a language model's run needs besides the model:
 * the text it learns, as tokens, the bench of its training steps, and its
 * pictures (introduced in chapter 06's page "A language
 * model").
 *
 * A text file (io/text_file.h: UTF-8, read as bytes) becomes the tokens of
 * a vocabulary of bytes (learn/language_model.h): the text's own, for a
 * model about to be trained, or a loaded model's, which must hold every
 * byte of the text. The first 90% of the tokens train, the last 10% are
 * held out, as nanoGPT splits its Shakespeare.
 *
 * Beside language_model.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef LANGUAGE_RUN_H
#define LANGUAGE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "learn/language_model.h"
#include "tensor.h"

typedef struct {
    int *ids;                   /* (n,) every byte's token */
    size_t n, train_n;          /* ids[0 .. train_n) train, the rest is held out */
    int vocab, bytes[LM_MAX_VOCAB];
} Corpus;

/* path -> corpus, in the vocabulary bytes (V,) or, when bytes is NULL, the
 * text's own. Refused with one line in err (returns -1, nothing left to
 * free): what text_file_read refuses, a byte outside the vocabulary, a
 * text of one repeated character, or one too short for two windows of
 * context + 1 (one in each part). */
int corpus_load(const char *path, const int *bytes, int vocab, int context, Corpus *corpus,
                char *err, size_t err_len);
void corpus_free(Corpus *corpus);
/* The text at path, or the chapter's tinyshakespeare.txt when path is
 * NULL, in model's vocabulary, or its own when model is NULL: corpus_load
 * for windows of context. 0, or 1 after its line on stderr (fail). */
int text_load(const char *path, const LanguageModel *model, int context, Corpus *corpus);

/* --size's presets: "small", nanoGPT's CPU run (LANGUAGE_TRAINING), and
 * "large", what 15 minutes on two cores buy (chapter 06's page "A
 * language model", section "A larger model"), each a whole
 * LanguageTraining. Returns false, t untouched, for any other name. */
#define LANGUAGE_LARGE                                                                    \
    ((LanguageTraining){.num_layers = 4, .num_heads = 8, .num_hiddens = 256, .context = 128, \
                        .batch_size = 16, .steps = 2500, .warmup = 100, .lr = 1e-3,       \
                        .min_lr = 1e-4, .weight_decay = 0.1, .clip = 1.0})
bool language_size(const char *name, LanguageTraining *t);

/* The model's kernels table (learn/language_model.h) by name: "clear",
 * the chapters' code on one thread, or "fast", the fast path of
 * fast/fast_attention_layer.h and fast/fast_exp.h on num_threads threads.
 * Returns false, table untouched, for any other name. */
bool language_kernels(const char *name, int num_threads, LanguageKernels *kernels);

/* Training steps per second of a new model of t's sizes on the fast path
 * with num_threads threads, on batches of the corpus's training part:
 * after BENCH_UNTIMED untimed steps, BENCH_ROUNDS rounds of steps steps
 * each timed, the fastest round's rate. A round that another program on
 * the machine slowed down does not count; make_language_model_fixtures.py
 * --bench times PyTorch the same way. */
enum { BENCH_UNTIMED = 3, BENCH_ROUNDS = 3 };
double language_steps_per_second(const Corpus *corpus, const LanguageTraining *t,
                                 int num_threads, int steps);

/* Part 3's comparison with nanoGPT: the mean of batches losses of
 * batch_size held-out windows, the windows part 2's looks draw (seed's
 * RNG_HELDOUT stream), as nanoGPT's estimate_loss measures, and the
 * standard deviation of such a mean, estimated from the batches' spread
 * (their sample standard deviation / sqrt(batches)); printed. */
void language_print_estimate(const LanguageModel *model, const Corpus *corpus, int batch_size,
                             int batches, uint64_t seed);

/* The floating-point operations of one training step at t's sizes, as
 * llm.c and nanoGPT count them: 2 per multiply-add of the forward's
 * products (each block's Q, K, V, out, fc and proj, 12 D^2 a token, and
 * the unembedding, V D), the attention's scores and weighted sum over the
 * whole window (2 T D a token and block, the masked half counted too),
 * the backward twice the forward. */
double language_step_flops(const LanguageTraining *t, int vocab);

/* language_model --bench: language_steps_per_second of t's sizes on 1 and
 * 2 threads, a line each ("c threads 1: 31.78 steps/s", as
 * make_language_model_fixtures.py --bench prints PyTorch's), the GFLOP of
 * a step ("c gflop per step: 3.968") and the machine's fp32 peak on 1 and
 * 2 threads (fast_peak_gflops, measured before the steps and after, the
 * larger kept: "peak threads 2: 234.0 GFLOP/s"); returns 0. */
int language_bench(const Corpus *corpus, const LanguageTraining *t, int steps);

/* DIR/language_model_loss.{dat,gp}: curve (rows, 3) holds a step, the
 * training and the held-out loss per row. DIR/language_model_heads and
 * DIR/language_model_probe: every head's weights (N rows of H panels) on
 * the first line of held-out text that fills a window, and probe_weights
 * (N tensors (1, H, C, C)) on a probe. 0, or the exit status (fail) after
 * one line on stderr. */
int language_plot_curve(const char *dir, const Tensor *curve, int rows);
int language_plot_heads(const char *dir, const LanguageModel *model, const Corpus *corpus,
                        Tensor *const *probe_weights);

/* Samples as text. check_prompt: a usage error (cli_fail, once cli_parse
 * has named the program), before any output, when a character of prompt
 * (NULL: none) is not one the model knows. sample_prompt: what a sample
 * continues, prompt, or when it is NULL a newline, or the vocabulary's
 * first character when the text had none (written into start, two
 * characters). print_sample: n characters drawn after prompt (every
 * character known), printed, each line indented. */
void check_prompt(const LanguageModel *model, const char *prompt);
const char *sample_prompt(const LanguageModel *model, const char *prompt, char *start);
void print_sample(const LanguageModel *model, const char *prompt, float temperature, int n,
                  Rng *rng);

/* Seconds on a monotonic clock, and the training's progress line: in
 * place on a terminal (step, loss, characters per second, time left),
 * nothing otherwise, so that a log or a quoted output holds no timing. */
double language_seconds(void);
void language_progress(int step, int steps, double loss, double chars_per_step, double start);

#endif
