/*
 * decode - attention one token at a time, with a key-value cache, and the
 * cache made smaller by sharing key-value heads (05_multihead/decoding.md).
 *
 * Legend: B = batch_size, T = tokens, H = num_heads, G = num_kv_heads,
 * D = num_hiddens, d = D / H.
 *
 *   1. the cache changes nothing: decoding equals the causal layer
 *   2. what the cache costs in memory, measured, per token
 *   3. what a token costs in time, with the cache and without
 *   4. the step against the machine's memory bandwidth
 *   --sharing: what sharing key-value heads costs a trained model
 * (--from DIR --to DIR, a layer given as .npy files: a mode that is also a
 * tool of its own, decode_files.c, linked in)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_layer.h"
#include "decode_timing.h"
#include "fast/fast_decode.h"
#include "io/cli.h"
#include "kv_cache.h"
#include "learn/lookup_model.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "learn/tasks.h"
#include "learn/training.h"
#include "multihead.h"
#include "random.h"
#include "tensor.h"

static const char PROG[] = "decode";

/* The file mode, --from: decode_files.c, linked into this program */
int decode_files_main(int argc, char **argv);

/* The sizes of parts 2 to 4: llama-like heads of 64 over D = 512. */
enum { BENCH_D = 512, BENCH_H = 8, BENCH_T_MIN = 64, BENCH_T_MAX = 4096, NUM_BENCH_G = 3 };
/* part 4's streaming read, 1 GB: larger than the caches of any machine this
 * runs on (some servers have 256 MB of L3), so each pass comes from memory */
#define STREAM_BYTES (1024.0 * 1024 * 1024)
static const int BENCH_G[NUM_BENCH_G] = {8, 2, 1};

typedef struct {
    uint64_t seed;
    bool no_timings, sharing;
    int seeds, steps;
} Options;

/* ---- part 1: the cache changes nothing ------------------------------------------ */

/* The largest difference of the fast step, token by token, from the full
 * layer's outputs (B, T, D) on tokens (B, T, D), relative to the largest
 * output. */
static double fast_step_gap(const MultiHeadAttention *layer, const Tensor *tokens,
                            const Tensor *full)
{
    const int B = tokens->shape[0], T = tokens->shape[1];
    const int G = layer->num_kv_heads, d = layer->num_hiddens / layer->num_heads;
    KVCache *cache = kv_cache_new(B, G, T, d);
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        Tensor *token = tensor_select(tokens, 1, t), *expected = tensor_select(full, 1, t);
        Tensor *out = fast_decode_step(layer, cache, token);   /* (B, D) */
        worst = fmax(worst, tensor_max_abs_diff(out, expected) / tensor_max_abs(full));
        TENSOR_FREE(token, expected, out);
    }
    kv_cache_free(cache);
    return worst;
}

/* tokens (B, T, D) through a seeded layer of G key-value heads: decoded
 * with the clear step and with the fast one, against the causal layer */
static void part1_equality(const Options *opt)
{
    const int B = 2, T = 32, D = 64, H = 8;
    printf("1. The cache changes nothing. A seeded layer (B = %d, T = %d, D = %d, H = %d)\n"
           "   decodes its tokens one at a time with the cache, and the whole sequence\n"
           "   goes through chapter 05's layer with the causal mask (valid_len = i + 1):\n\n",
           B, T, D, H);
    int failures = 0;
    double fast_worst = 0.0;
    for (int i = 0; i < NUM_BENCH_G; i++) {
        const int G = BENCH_G[i];
        Rng rng = rng_new(opt->seed);
        MultiHeadAttention *layer = multihead_new_grouped(D, D, D, D, H, G, 0.0f, true, &rng);
        Tensor *tokens = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(B, T, D));
        Tensor *full = causal_forward(layer, tokens);
        Tensor *decoded = decode_sequence(layer, tokens);
        const double diff = tensor_max_abs_diff(decoded, full);
        const double relative = diff / tensor_max_abs(full);
        printf("   G = %d: cached against full, largest difference %.3g (relative %.3g)\n", G,
               diff, relative);
        failures += !(relative <= 1e-6);
        fast_worst = fmax(fast_worst, fast_step_gap(layer, tokens, full));
        TENSOR_FREE(tokens, full, decoded);
        multihead_free(layer);
    }
    cli_check(failures == 0, "cached and full differ by more than 1e-6 relative");
    printf(failures == 0 ? "\n   check passed: the cache changes nothing (within 1e-6 relative; "
                           "the clear\n   step computes each product of the layer, in the same "
                           "order)\n\n" : "\n");
    /* the fast step sums in another order: its difference is this machine's
     * (its vector width), so it is printed as a bound */
    const bool fast_close = fast_worst <= 1e-5;
    char fast_text[32];
    residue_text(fast_text, sizeof fast_text, fast_worst, 1e-6);
    printf("   The fast step (vector lanes, fused multiply-add) against the full layer:\n"
           "   largest relative difference %s, from the order of the sums: %s\n\n",
           fast_text, fast_close ? "check passed (1e-5)" : "over 1e-5");
    cli_check(fast_close, "the fast step and the full layer differ by more than 1e-5 "
              "relative");
}

/* ---- part 2: bytes per token ------------------------------------------------------ */

static int table_sizes(int *table_T)
{
    int rows = 0;
    for (int T = BENCH_T_MIN; T <= BENCH_T_MAX; T *= 2)
        table_T[rows++] = T;
    return rows;
}

static void part2_memory(void)
{
    int table_T[16];
    const int rows = table_sizes(table_T), d = BENCH_D / BENCH_H;
    double measured[NUM_BENCH_G][16];
    bool known = true;
    for (int i = 0; i < NUM_BENCH_G; i++)
        known = kv_cache_growth(BENCH_G[i], d, table_T, rows, measured[i]) && known;
    printf("2. What the cache costs in memory (B = 1, D = %d, H = %d, d = %d): bytes per\n"
           "   token, measured as the resident pages of the cache's own memory once T\n"
           "   tokens are appended, and the formula 2 * G * d * 4 (keys and values, float32):\n\n",
           BENCH_D, BENCH_H, d);
    printf("      T    G = 8: measured  formula    G = 2: measured  formula"
           "    G = 1: measured  formula\n");
    int off = 0;
    for (int r = 0; r < rows; r++) {
        printf("   %5d", table_T[r]);
        for (int i = 0; i < NUM_BENCH_G; i++) {
            const double formula = 2.0 * BENCH_G[i] * d * 4;
            off += !(fabs(measured[i][r] - formula) <= 0.1 * formula);
            if (known)
                printf("   %15.0f %8.0f", measured[i][r], formula);
            else
                printf("   %15s %8.0f", "unknown", formula);
        }
        printf("\n");
    }
    if (!known)
        printf("\n   This system does not report its resident memory: nothing measured.\n\n");
    else if (off == 0)
        printf("\n   check passed: every measured size within 10%% of the formula\n\n");
    if (known && off > 0) {
        char what[96];
        snprintf(what, sizeof what, "%d measured cache sizes more than 10%% from the formula",
                 off);
        cli_check(false, what);
    }
}

/* ---- part 3: time per token ------------------------------------------------------------ */

/* What one timed call works on: the layer, its cache of T - 1 tokens, the
 * new token (1, D) and the T tokens (1, T, D) a step without a cache
 * projects again; q and concat (D,) for the attention alone. */
typedef struct {
    const MultiHeadAttention *layer;
    KVCache *cache;
    const Tensor *token, *prefix;
    const float *q;
    float *concat;
} StepWork;

static void cached_step(const void *work)
{
    const StepWork *w = work;
    const int T = w->cache->length;
    Tensor *out = fast_decode_step(w->layer, w->cache, w->token);
    w->cache->length = T;   /* the same step again next time */
    tensor_free(out);
}

static void recompute_step(const void *work)
{
    const StepWork *w = work;
    tensor_free(fast_decode_recompute(w->layer, w->prefix, w->token));
}

/* the attention alone: the read of the cache */
static void attend_step(const void *work)
{
    const StepWork *w = work;
    fast_decode_attend(w->cache, w->layer->num_heads, w->q, w->concat);
}

/* Prints the table; attend_seconds: the attention alone at T = BENCH_T_MAX */
static void part3_time(const Options *opt, double attend_seconds[NUM_BENCH_G])
{
    int table_T[16];
    const int rows = table_sizes(table_T), D = BENCH_D, H = BENCH_H, d = D / H;
    double cached[NUM_BENCH_G][16], recomputed[NUM_BENCH_G][16];
    Rng rng = rng_new(opt->seed);
    Tensor *prefix = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, BENCH_T_MAX, D));
    for (int i = 0; i < NUM_BENCH_G; i++) {
        const int G = BENCH_G[i];
        MultiHeadAttention *layer = multihead_new_grouped(D, D, D, D, H, G, 0.0f, true, &rng);
        KVCache *cache = kv_cache_new(1, G, BENCH_T_MAX, d);
        Tensor *kv = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, G * d));
        Tensor *token = tensor_normal(&rng, 0.0f, 1.0f, SHAPE(1, D));
        for (int r = 0; r < rows; r++) {
            /* T - 1 tokens cached: the step appends the T-th */
            while (cache->length < table_T[r] - 1)
                kv_cache_append(cache, kv, kv);
            Tensor *head = tensor_from(prefix->data, SHAPE(1, table_T[r], D));   /* T tokens */
            StepWork w = {layer, cache, token, head, NULL, NULL};
            cached[i][r] = best_seconds(cached_step, &w, 5);
            recomputed[i][r] = best_seconds(recompute_step, &w, table_T[r] >= 1024 ? 2 : 3);
            tensor_free(head);
        }
        /* the attention alone, over a full cache */
        while (cache->length < BENCH_T_MAX)
            kv_cache_append(cache, kv, kv);
        Tensor *q = tensor_zeros(SHAPE(D)), *concat = tensor_zeros(SHAPE(D));
        for (int j = 0; j < D; j++)
            q->data[j] = 0.01f * (float)(j % 7);
        const StepWork w = {layer, cache, token, prefix, q->data, concat->data};
        attend_seconds[i] = best_seconds(attend_step, &w, 5);
        TENSOR_FREE(kv, token, q, concat);
        kv_cache_free(cache);
        multihead_free(layer);
    }
    tensor_free(prefix);

    printf("3. What a token costs in time (B = 1, D = %d, H = %d; the fast step, 1 thread;\n"
           "   microseconds, the best of a few runs on this machine, now):\n\n", D, H);
    printf("      T    G = 8: cached  recompute    G = 2: cached  recompute"
           "    G = 1: cached  recompute\n");
    for (int r = 0; r < rows; r++) {
        printf("   %5d", table_T[r]);
        for (int i = 0; i < NUM_BENCH_G; i++)
            printf("   %13.0f %10.0f", 1e6 * cached[i][r], 1e6 * recomputed[i][r]);
        printf("\n");
    }
    printf("\n   recompute: without a cache, the step projects the keys and values of all T\n"
           "   tokens again before it attends.\n\n");
}

/* ---- part 4: against the memory's bandwidth ----------------------------------------- */

static void part4_bandwidth(const double attend_seconds[NUM_BENCH_G])
{
    const double memory = stream_read_rate(STREAM_BYTES);
    printf("4. The step against the memory (one thread, measured now). A streaming read\n"
           "   of 1 GB, far more than the caches hold, runs at %.1f GB/s. The attention\n"
           "   pass of the fast step reads a full cache (T = %d) at:\n\n", memory, BENCH_T_MAX);
    const int d = BENCH_D / BENCH_H;
    printf("             cache    read at   of memory   a streaming read of the same size\n");
    for (int i = 0; i < NUM_BENCH_G; i++) {
        const double bytes = kv_cache_bytes(1, BENCH_G[i], BENCH_T_MAX, d);
        const double rate = bytes / attend_seconds[i] / 1e9;
        const double same_size = stream_read_rate(bytes);
        printf("   G = %d  %6.1f MB  %5.1f GB/s   %6.0f%%      %5.1f GB/s (the step at %.0f%% of it)\n",
               BENCH_G[i], bytes / 1e6, rate, 100.0 * rate / memory, same_size,
               100.0 * rate / same_size);
    }
    printf("\n   A cache that fits in a cache of the processor is read faster than memory:\n"
           "   the same-size read is the ceiling the step can reach.\n\n");
}

/* ---- --sharing: what sharing key-value heads costs a trained model ------------------- */

/* train's dictionary model and task (05_multihead/train's defaults,
 * learn/training.h), with G key-value heads; the streams as train draws
 * them */
enum { SHARE_HELDOUT = 1000, MAX_SEEDS = 64 };
static const int SHARE_G[] = {4, 2, 1};
#define SOLVED 0.9   /* held-out accuracy that counts as the task solved */

/* held-out accuracy of one model of G key-value heads, after steps / 2
 * training steps (into accuracy[0]) and after steps (accuracy[1]) */
static void trained_accuracy(int G, uint64_t seed, int steps, double accuracy[2])
{
    const DictionaryTraining d = DICTIONARY_TRAINING;
    const Task task = task_dictionary(d.pairs, d.countries, d.countries);
    Rng rng = rng_use(seed, RNG_PARAMETERS);
    LookupModel *model = lookup_new_grouped(d.countries, d.countries, d.num_hiddens,
                                            d.num_heads, G, &rng);
    Adam *adam = adam_new(model->params, model->num_params, d.lr);
    const Trainee trainee = lookup_trainee(model, adam);
    TaskBatch *heldout = task_batch_new(&task, SHARE_HELDOUT);
    Rng heldout_rng = rng_use(seed, RNG_HELDOUT);
    task_draw(&task, heldout, SPLIT_HELDOUT, &heldout_rng);
    const int checkpoints[3] = {0, steps / 2, steps};
    for (int c = 0; c < 2; c++) {
        const TrainingPlan plan = {.task = &task, .seed = seed,
                                   .first_step = checkpoints[c] + 1,
                                   .last_step = checkpoints[c + 1], .batch_size = d.batch_size,
                                   .batches = BATCH_OF_STEP};
        training_loop(&trainee, &plan, NULL);
        int correct = 0;
        const double loss = lookup_evaluate(model, heldout, &correct);
        accuracy[c] = isfinite(loss) ? (double)correct / SHARE_HELDOUT : 0.0;
    }
    task_batch_free(heldout);
    adam_free(adam);
    lookup_free(model);
}

/* "solved, median, lowest, highest" of n accuracies */
static void print_outcomes(const double *accuracy, int n)
{
    const SeedSummary s = seeds_summary(accuracy, n, SOLVED);
    printf("   %2d of %-2d %6.1f%% %6.1f%% %6.1f%%", s.succeeded, n, 100 * s.median,
           100 * s.lowest, 100 * s.highest);
}

static int part_sharing(const Options *opt)
{
    const DictionaryTraining d = DICTIONARY_TRAINING;
    printf("What sharing key-value heads costs: train's dictionary model (%d countries,\n"
           "%d pairs an example, D = %d, H = %d query heads) with G = 4, 2, 1 key-value\n"
           "heads, trained from seeds %llu .. %llu; accuracy on %d held-out examples.\n"
           "Solved: at least %.0f%% right. Chance: 1 of %d entries, %.1f%%.\n\n",
           d.countries, d.pairs, d.num_hiddens, d.num_heads, (unsigned long long)opt->seed,
           (unsigned long long)(opt->seed + opt->seeds - 1), SHARE_HELDOUT, 100 * SOLVED,
           d.pairs, 100.0 / d.pairs);
    printf("          cache    after %d steps:                      after %d steps:\n"
           "   G  per token     solved  median  lowest highest       solved  median  lowest highest\n",
           opt->steps / 2, opt->steps);
    for (int i = 0; i < 3; i++) {
        const int G = SHARE_G[i];
        double half[MAX_SEEDS], full[MAX_SEEDS];
        for (int s = 0; s < opt->seeds; s++) {
            double accuracy[2];
            trained_accuracy(G, opt->seed + (uint64_t)s, opt->steps, accuracy);
            half[s] = accuracy[0];
            full[s] = accuracy[1];
        }
        printf("   %d  %2d floats", G, 2 * G * (d.num_hiddens / d.num_heads));
        print_outcomes(half, opt->seeds);
        printf("  ");
        print_outcomes(full, opt->seeds);
        printf("\n");
    }
    printf("\n");
    return 0;
}

/* ---- options and main ------------------------------------------------------------------------ */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .seeds = 16, .steps = 200};
    static const char files_help[] = "decode a layer given as .npy files";
    const CliOption options[] = {
        {"--seed", CLI_U64, &opt.seed, .metavar = "N", .help = "seed for layers and tokens"},
        {"--sharing", CLI_FLAG, &opt.sharing,
         .help = "train the dictionary model with G = 4, 2, 1 key-value heads instead"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "with --sharing: models per G, seeds --seed ... --seed + N - 1"},
        {"--steps", CLI_INT, &opt.steps, .min = 2, .max = 100000, .metavar = "N",
         .help = "with --sharing: training steps of each model (scored at N / 2 and N)"},
        {"--no-timings", CLI_FLAG, &opt.no_timings,
         .help = "parts 1 and 2 only: leave out the times and the bandwidth"},
        {"--from", CLI_MODE, .tool = "decode_files", .mode = decode_files_main, .help = files_help},
        {"--to", CLI_MODE, .tool = "decode_files", .mode = decode_files_main},
        {"--heads", CLI_MODE, .tool = "decode_files", .mode = decode_files_main},
        {"--kv-heads", CLI_MODE, .tool = "decode_files", .mode = decode_files_main},
        {"--capacity", CLI_MODE, .tool = "decode_files", .mode = decode_files_main},
    };
    static const char summary[] =
        "Attention one token at a time with a key-value cache: the cache against the\n"
        "causal layer, its memory per token, the time per token with and without it,\n"
        "and its read speed against the memory's.";
    *done = cli_parse(&(CliTable){PROG, summary, CLI_COUNT(options), options}, argc, argv);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    if (opt.sharing)
        return part_sharing(&opt);
    const int status = opt.no_timings ? 0 : memory_require(STREAM_BYTES, "the buffer of the "
                                                           "streaming read in part 4", NULL);
    if (status != 0)
        return status;
    part1_equality(&opt);
    part2_memory();
    if (!opt.no_timings) {
        double attend_seconds[NUM_BENCH_G];
        part3_time(&opt, attend_seconds);
        part4_bandwidth(attend_seconds);
    }
    return cli_checks_status();
}
