/*
 * relative_positions - which symmetry each way of adding positions keeps,
 * checked exactly, and what a model trained with each one does on
 * sequences longer than it saw (chapter 06's page relative_positions.md).
 *
 * Part 1: one untrained model per scheme: how much its logits change when
 *         the tokens are permuted, and when every position moves by S.
 * Part 2: RoPE's score q_m . k_n depends on m - n only, over all pairs.
 * Part 3: ALiBi's bias, one heatmap per head.
 * Part 4: (--train) two tasks trained at length L, measured at L, 2L, 4L.
 * Part 5: (--train) where one trained model per scheme looks.
 * --from DIR --to DIR: RoPE or ALiBi attention on heads from .npy files,
 * a mode that is also a tool of its own: relative_files.c, linked in.
 *
 * Legend: B = batch_size, H = num_heads, T = tokens, D = num_hiddens,
 * d = D / H, V = vocabulary, L = training length.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alibi.h"
#include "io/cli.h"
#include "io/plot.h"
#include "learn/seeds.h"
#include "length_experiment.h"
#include "permute_tokens.h"
#include "rope.h"
#include "tensor.h"

static const char PROG[] = "relative_positions";

/* The file mode, --from: relative_files.c, linked into this program */
int relative_files_main(int argc, char **argv);

enum { MAX_HEADS = 16, MAX_HIDDENS = 128, MAX_TOKENS = HEATMAP_TERMINAL_MAX, MAX_SEEDS = 32,
       MAX_THREADS = 16, MAX_OFFSET = 100000 };

/* Each use of randomness draws from its own stream of the seed (the
 * training's are length_experiment.c's, the same numbers). */
enum { STREAM_INIT = 1, STREAM_INPUTS = 4 };

/* A held-out token accuracy at or above this counts as solved. */
#define SOLVED 0.9

typedef struct {
    LengthSetup setup;   /* every part's seed, num_hiddens, num_heads; parts 4 and 5's rest */
    int tokens, offset, pairs;
    bool train;
    const char *plot_dir;
} Options;

/* ---- Part 1: the symmetry table ---------------------------------------------- */

/* The largest |a - b| over the largest |b|: how much b changed, relative. */
static double relative_change(const Tensor *a, const Tensor *b)
{
    return (double)tensor_max_abs_diff(a, b) / fmax((double)tensor_max_abs(b), 1e-30);
}

static void part1_symmetry(const Options *opt)
{
    const int T = opt->tokens, S = opt->offset, V = 2 * T;
    const int D = opt->setup.num_hiddens, H = opt->setup.num_heads;
    printf("Relative positions: which symmetry survives\n\n"
           "Part 1. One untrained model per way of adding positions (num_hiddens %d,\n"
           "%d heads, no mask), %d tokens. The largest change of the logits, over\n"
           "their largest value, when\n"
           "  - the tokens are permuted, and the rows of the result put back;\n"
           "  - every position moves by S = %d: positions %d ... %d instead of 0 ... %d.\n\n",
           D, H, T, S, S, S + T - 1, T - 1);
    Rng inputs = rng_new_stream(opt->setup.seed, STREAM_INPUTS);
    int tokens[2 * MAX_TOKENS], perm[MAX_TOKENS], inverse[MAX_TOKENS], permuted[MAX_TOKENS];
    /* T different tokens of 2T (the first T of a shuffle), and a cycle,
     * the permutation that moves every token */
    rng_permutation(&inputs, tokens, V);
    for (int t = 0; t < T; t++) {
        perm[t] = (t + 1) % T;
        permuted[t] = tokens[perm[t]];
    }
    permutation_inverse(perm, inverse, T);

    printf("  %-12s %18s %18s\n", "positions", "permuted tokens", "offset S");
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        Rng init = rng_new_stream(opt->setup.seed, STREAM_INIT);
        PositionModel *model = position_model_new(V, D, H, scheme, S + T, false, &init);
        Tensor *logits = position_model_forward(model, tokens, 1, T, 0, NULL, NULL);
        Tensor *of_permuted = position_model_forward(model, permuted, 1, T, 0, NULL, NULL);
        Tensor *shifted = position_model_forward(model, tokens, 1, T, S, NULL, NULL);
        /* row t of of_permuted belongs to token perm[t]: put it back */
        Tensor *put_back = permute_tokens(of_permuted, inverse);
        printf("  %-12s %18.1e %18.1e\n", position_scheme_names[scheme],
               relative_change(put_back, logits), relative_change(shifted, logits));
        TENSOR_FREE(logits, of_permuted, shifted, put_back);
        position_model_free(model);
    }
    printf("\nNo positions: equivariant under both. Sinusoidal and learned positions are\n"
           "vectors of the absolute position, so both change the logits. RoPE and ALiBi\n"
           "see only i - j: a permutation still changes the logits, the offset does not,\n"
           "up to float32 rounding.\n\n");
}

/* ---- Part 2: RoPE depends on m - n only --------------------------------------- */

static void part2_rope_relative(const Options *opt)
{
    const int d = opt->setup.num_hiddens / opt->setup.num_heads, P = opt->pairs, S = opt->offset;
    Rng inputs = rng_new_stream(opt->setup.seed + 1, STREAM_INPUTS);
    Tensor *q = tensor_normal(&inputs, 0, 1, SHAPE(1, 1, d));
    Tensor *k = tensor_normal(&inputs, 0, 1, SHAPE(1, 1, d));
    const RopeRelativeCheck c = rope_check_relative(q, k, P, S);
    const double spacing = nextafterf((float)c.largest, INFINITY) - (float)c.largest;
    printf("Part 2. RoPE's score depends on m - n only. One query q and one key k\n"
           "(d = %d) are turned for positions m and n, over all %d pairs with m, n in\n"
           "0 ... %d and again in %d ... %d; each score q_m . k_n is compared with\n"
           "the one at the same distance that starts at 0 (q_{m-n} . k_0 or\n"
           "q_0 . k_{n-m}).\n\n"
           "  the scores range from %.4f to %.4f as m - n changes;\n"
           "  the largest deviation is %.1e, %.1f times the float32 spacing at the\n"
           "  largest score, %.2f (%.1e): rounding, and nothing else.\n\n",
           d, 2 * P * P, P - 1, S, S + P - 1, c.lowest, c.highest, c.worst, c.worst / spacing,
           c.largest, spacing);
    /* a dot product of d rounded terms is off by a few spacings at most */
    cli_check(c.worst <= d * spacing, "RoPE's scores depend on m - n only");
    TENSOR_FREE(q, k);
}

/* ---- Part 3: ALiBi's bias per head ---------------------------------------------- */

static int part3_alibi(const Options *opt)
{
    const int H = opt->setup.num_heads, T = opt->tokens;
    double slopes[MAX_HEADS];
    alibi_slopes(H, slopes);
    printf("Part 3. ALiBi's bias. Head h adds -m_h |i - j| to the scaled score of query i\n"
           "and key j; with %d heads the slopes m_h are", H);
    char slope[MAX_HEADS][32];
    for (int h = 0; h < H; h++) {
        alibi_slope_text(slope[h], sizeof slope[h], slopes[h]);
        printf("%s %s", h == 0 ? "" : ",", slope[h]);
    }
    printf(".\nDrawn is exp(-m_h |i - j|), the factor by which the bias multiplies a\n"
           "weight before the softmax normalises the row: a steep head looks near, a\n"
           "shallow one almost everywhere.\n");
    Tensor *bias = alibi_bias(H, T, T);   /* (H, T, T) */
    for (size_t i = 0; i < bias->size; i++)
        bias->data[i] = expf(bias->data[i]);
    char title_text[MAX_HEADS][64];
    const char *titles[MAX_HEADS];
    for (int h = 0; h < H; h++) {
        snprintf(title_text[h], sizeof title_text[h], "head %d, m = %.31s", h + 1, slope[h]);
        titles[h] = title_text[h];
        Tensor *matrix = tensor_select(bias, 0, h);
        printf("\n");
        heatmap_terminal(stdout, matrix, title_text[h]);
        tensor_free(matrix);
    }
    printf("\n");
    int status = 0;
    if (opt->plot_dir != NULL) {
        status = plot_heatmaps(opt->plot_dir, "relative_positions_alibi", bias, "key j",
                               "query i", titles);
        if (status == 0)
            printf("wrote %s/relative_positions_alibi.dat and .gp\n\n", opt->plot_dir);
    }
    tensor_free(bias);
    return status;
}

/* ---- Part 4: trained at L, measured at L, 2L, 4L --------------------------------- */

static const char *const TASK_TITLES[LENGTH_TASKS] = {
    "Task 1: the token %d place%s back (causal mask)",
    "Task 2: reversal, the token at T-1-t (no mask)"};

/* One cell of a table row, padded but the last: no line ends in spaces. */
static void print_cell(int i, const char *text)
{
    printf(i + 1 < LENGTH_SIZES ? "  %-22s" : "  %s", text);
}

static void print_table(const Options *opt, const LengthExperiment *e, LengthTask task)
{
    const int L = opt->setup.length, N = opt->setup.seeds;
    const int k = opt->setup.back;
    printf(TASK_TITLES[task], k, plural(k, "", "s"));
    printf("\n\n  %-11s", "");
    for (int i = 0; i < LENGTH_SIZES; i++) {
        char head[32];
        snprintf(head, sizeof head, "T = %d%s", L << i, i == 0 ? " (trained)" : "");
        print_cell(i, head);
    }
    printf("\n  %-11s", "positions");
    for (int i = 0; i < LENGTH_SIZES; i++)
        print_cell(i, "solved median  range");
    printf("\n");
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        printf("  %-11s", position_scheme_names[scheme]);
        for (int i = 0; i < LENGTH_SIZES; i++) {
            const SeedSummary sum = length_summary(e, task, scheme, i, SOLVED);
            char cell[64];
            snprintf(cell, sizeof cell, "%2d/%-2d %5.1f%% %3.0f-%.0f%%", sum.succeeded, N,
                     100 * sum.median, 100 * sum.lowest, 100 * sum.highest);
            print_cell(i, cell);
        }
        printf("\n");
    }
    printf("  %-11s", "chance");
    for (int i = 0; i < LENGTH_SIZES; i++) {
        char cell[64];
        snprintf(cell, sizeof cell, "      %5.1f%%",
                 100.0 * length_chance(task, k, L << i));
        print_cell(i, cell);
    }
    printf("\n\n");
}

/* Per scheme: the weight on the right key at L, 2L, 4L (median over the
 * seeds), and the steps the models took. */
static void print_right_key(const Options *opt, const LengthExperiment *e, LengthTask task)
{
    const int L = opt->setup.length, N = opt->setup.seeds;
    printf("  %-11s  weight on the right key (median)  Adam steps taken\n  %-11s", "",
           "positions");
    for (int i = 0; i < LENGTH_SIZES; i++)
        printf("  T = %-5d", L << i);
    printf("  median      range  at the cap\n");
    for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
        printf("  %-11s", position_scheme_names[scheme]);
        for (int i = 0; i < LENGTH_SIZES; i++)
            printf("  %-9.3f", length_right_key_summary(e, task, scheme, i).median);
        const SeedSummary steps = length_steps_summary(e, task, scheme);
        char range[32];
        snprintf(range, sizeof range, "%.0f-%.0f", steps.lowest, steps.highest);
        printf("  %6.0f  %9s  %d/%d\n", steps.median, range, steps.succeeded, N);
    }
    printf("\n");
}

/* Trains every model: *experiment, with the first seed's models kept for
 * part 5, and 0; or *experiment NULL and the exit status when a loss
 * stopped being a number. */
static int part4_lengths(const Options *opt, LengthExperiment **experiment)
{
    const LengthSetup *t = &opt->setup;
    const int L = t->length, N = t->seeds;
    printf("Part 4. Trained at length L = %d, measured at L, 2L and 4L. Each model: %d\n"
           "letters, num_hiddens %d, %d heads, Adam steps of %d sequences (lr %g) until\n"
           "its accuracy on %d training sequences, checked every %d steps, has not\n"
           "risen for %d checks, or %d steps at most; seeds %llu ... %llu; held out:\n"
           "%d sequences per length, never trained on. A cell: how many seeds reach\n"
           "%.0f%% held-out token accuracy, the median accuracy and its range over the\n"
           "seeds. Below each table: the attention weight on the key that holds the\n"
           "answer, averaged over heads, queries and sequences, and the steps taken.\n\n",
           L, t->letters, t->num_hiddens, t->num_heads, t->batch_size, (double)t->lr,
           t->examples, LENGTH_CHECK_EVERY, t->patience, t->steps,
           (unsigned long long)t->seed, (unsigned long long)(t->seed + N - 1), t->examples,
           100 * SOLVED);
    fflush(stdout);
    LengthExperiment *e = length_experiment_run(&opt->setup);
    int status = 0;
    for (const LengthRun *run = e->runs; run < e->runs + e->count; run++)
        if (run->diverged)
            status = fail("%s, %s positions, seed %llu: the loss stopped being a number; try "
                          "a smaller --lr", length_task_names[run->task],
                          position_scheme_names[run->scheme], (unsigned long long)run->seed);
    *experiment = status == 0 ? e : NULL;
    if (status != 0) {
        length_experiment_free(e);
        return status;
    }
    int at_cap = 0;
    for (int task = 0; task < LENGTH_TASKS; task++) {
        print_table(opt, e, (LengthTask)task);
        print_right_key(opt, e, (LengthTask)task);
        for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++)
            at_cap += length_steps_summary(e, (LengthTask)task, scheme).succeeded;
    }
    printf("Stopped by the cap of %d steps rather than by the rule: %d of %d models.\n\n",
           opt->setup.steps, at_cap, e->count);
    printf("Past L, the learned table's rows %d ... %d were never in a training\n"
           "sequence: their gradient was always 0, and they hold their first draw from\n"
           "N(0, 1), as nn.Embedding's initialisation left them. The sinusoidal\n"
           "encoding has a row for every position, but the model was never trained on\n"
           "the rows past L.\n\n", L, 4 * L - 1);
    return 0;
}

/* ---- Part 5: where the trained models look -------------------------------------- */

static int part5_heatmaps(const Options *opt, const LengthExperiment *e)
{
    const int N = opt->setup.seeds, L = opt->setup.length;
    printf("Part 5. Where the first seed's task-1 models look at T = %d, past the\n"
           "training length: queries %d ... %d (rows 0 ... %d), every key (columns),\n"
           "the weights averaged over the held-out sequences and the heads.\n",
           2 * L, L, 2 * L - 1, L - 1);
    int status = 0;
    for (int task = 0; task < LENGTH_TASKS; task++) {
        /* task 1 at 2L, past what it was trained on; task 2 at L (--plot only) */
        const int length_index = task == LENGTH_TASK_BACK ? 1 : 0;
        const TaskBatch *set = e->held_out[task][length_index];
        const int T = set->num_pairs;
        Tensor *panels = tensor_zeros(SHAPE(POSITION_SCHEMES, T, T));
        char title_text[POSITION_SCHEMES][80];
        const char *titles[POSITION_SCHEMES];
        for (int scheme = 0; scheme < POSITION_SCHEMES; scheme++) {
            const PositionModel *model = e->runs[(task * POSITION_SCHEMES + scheme) * N].model;
            Tensor *mean = position_model_mean_weights(model, set);
            memcpy(panels->data + (size_t)scheme * T * T, mean->data, mean->size * sizeof(float));
            snprintf(title_text[scheme], sizeof title_text[scheme], "%s, %s, T = %d",
                     length_task_names[task], position_scheme_names[scheme], T);
            titles[scheme] = title_text[scheme];
            if (task == LENGTH_TASK_BACK) {
                Tensor *past = tensor_slice(mean, 0, L, T - L);   /* (T - L, T) */
                printf("\n");
                heatmap_terminal(stdout, past, position_scheme_names[scheme]);
                tensor_free(past);
            }
            tensor_free(mean);
        }
        if (opt->plot_dir != NULL && status == 0) {
            const char *name = task == LENGTH_TASK_BACK ? "relative_positions_back"
                                                 : "relative_positions_reversal";
            status = plot_heatmaps(opt->plot_dir, name, panels, "key", "query", titles);
            if (status == 0)
                printf("\nwrote %s/%s.dat and .gp (every query)\n", opt->plot_dir, name);
        }
        tensor_free(panels);
    }
    printf("\n");
    return status;
}

/* ---- the command line ------------------------------------------------------------- */

/* The checks that take two options, after the table's own. */
static void check_options(const Options *opt)
{
    const LengthSetup *t = &opt->setup;
    if (opt->offset > MAX_OFFSET)
        cli_fail(PROG, "--offset %d: parts 1 and 2 build tables of every position, up to %d",
                 opt->offset, MAX_OFFSET);
    if ((t->num_hiddens / t->num_heads) % 2 != 0)
        cli_fail(PROG, "--hiddens %d / --heads %d is an odd head size: RoPE turns a head's "
                 "numbers in pairs", t->num_hiddens, t->num_heads);
    if (t->letters < 4 * t->length)
        cli_fail(PROG, "--letters %d is fewer than 4 x --length %d: a sequence of 4L "
                 "holds different letters", t->letters, t->length);
    if (t->back >= t->length)
        cli_fail(PROG, "--back %d must be below --length %d", t->back, t->length);
}

static const char SUMMARY[] = "Which symmetry each way of adding positions keeps, and what a model "
                               "learns with it.";

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.tokens = 8, .offset = 1000, .pairs = 64, .setup = LENGTH_DEFAULTS};
    LengthSetup *t = &opt.setup;
    const CliOption options[] = {
        {"--tokens", CLI_INT, &opt.tokens, .min = 2, .max = MAX_TOKENS, .metavar = "T",
         .help = "tokens of parts 1 and 3"},
        {"--hiddens", CLI_INT, &t->num_hiddens, .min = 2, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens"},
        {"--heads", CLI_INT, &t->num_heads, .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads; D / H must be even for RoPE", .splits = &t->num_hiddens},
        {"--offset", CLI_INT, &opt.offset, .min = 0, .max = ROPE_MAX_POSITION, .metavar = "S",
         .help = "first position of the moved sequence (parts 1, 2)"},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = 512, .metavar = "P",
         .help = "positions of part 2's check"},
        {"--train", CLI_FLAG, &opt.train, .help = "parts 4 and 5: train and measure"},
        {"--length", CLI_INT, &t->length, .min = 2, .max = MAX_TOKENS / 2, .metavar = "L",
         .help = "training length; measured at L, 2L, 4L"},
        {"--letters", CLI_INT, &t->letters, .min = 4, .max = TASK_MAX_LETTERS, .metavar = "V",
         .help = "vocabulary, at least 4L"},
        {"--back", CLI_INT, &t->back, .min = 1, .max = MAX_TOKENS, .metavar = "k",
         .help = "task 1: the token k places back"},
        {"--steps", CLI_INT, &t->steps, .min = 1, .max = 100000, .metavar = "N",
         .help = "at most N Adam steps per model"},
        {"--patience", CLI_INT, &t->patience, .min = 1, .max = 1000, .metavar = "N",
         .help = "stop a model after N checks (100 steps apart) without a rise"},
        {"--batch", CLI_INT, &t->batch_size, .min = 1, .max = 1024, .metavar = "B",
         .help = "sequences per step"},
        {"--lr", CLI_FLOAT, &t->lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate"},
        {"--seeds", CLI_INT, &t->seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "seeds per scheme and task"},
        {"--examples", CLI_INT, &t->examples, .min = 1, .max = 5000, .metavar = "N",
         .help = "held-out sequences per length"},
        {"--threads", CLI_INT, &t->num_threads, .min = 1, .max = MAX_THREADS, .metavar = "N",
         .help = "threads over seeds (the results do not depend on it)"},
        {"--seed", CLI_U64, &t->seed, .metavar = "S", .help = "the first seed"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR", .help = "write the heatmaps into DIR"},
        {"--from", CLI_MODE, .tool = "relative_files", .mode = relative_files_main,
         .help = "RoPE or ALiBi attention on heads from .npy files"},
        {"--to", CLI_MODE, .tool = "relative_files", .mode = relative_files_main},
        {"--positions", CLI_MODE, .tool = "relative_files", .mode = relative_files_main},
        {"--causal", CLI_MODE, .tool = "relative_files", .mode = relative_files_main},
    };
    *done = cli_parse(&(CliTable){PROG, SUMMARY, CLI_COUNT(options), options}, argc, argv);
    if (*done == CLI_RUN)
        check_options(&opt);
    return opt;
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    part1_symmetry(&opt);
    part2_rope_relative(&opt);
    int status = part3_alibi(&opt);
    if (status == 0 && opt.train) {
        LengthExperiment *e;
        status = part4_lengths(&opt, &e);
        if (status == 0)
            status = part5_heatmaps(&opt, e);
        length_experiment_free(e);
    }
    return status != 0 ? status : cli_checks_status();
}
