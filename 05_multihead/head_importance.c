/*
 * head_importance - d2l's exercise 2 on a trained model: how important is
 * each head, and which heads can be pruned?
 *
 * Part 1: a multi-head model trained on the two-key task of
 *         heads_experiment (or loaded with --from), and its held-out
 *         accuracy with every head.
 * Part 2: each head's importance, Michel, Levy and Neubig's
 *         I_h = E|dL/dxi_h| for a gate xi_h = 1 on its output (one backward
 *         pass for all heads, head_gates.h), measured on training examples,
 *         beside the held-out accuracy lost when that head alone is masked;
 *         a finite difference checks one slope.
 * Part 3: prune heads one at a time, least important first, most important
 *         first and in random orders, and measure held-out accuracy against
 *         heads kept, beside the best subset of each size (every subset
 *         tried): the bound no ranking can pass.
 * Part 4 (--seeds N): the same for N models, one per seed: how often the
 *         ranking beats the random orders, the median curves, and the worst
 *         seed with its ranking and curve.
 *
 * Legend: N = held-out examples, P = entries of a dictionary, H = num_heads,
 * D = num_hiddens, d = D / H.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/cli.h"
#include "io/plot.h"
#include "io/saved_models.h"
#include "learn/optim.h"
#include "learn/seeds.h"
#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "tensor.h"

static const char PROG[] = "head_importance";

/* The held-out set is evaluated in one batch: at the largest sizes it
 * still takes a few hundred MB. */
enum { MAX_HEADS = 16, MAX_HIDDENS = 128, MAX_PAIRS = 16, MAX_ORDERS = 1000,
       MAX_EXAMPLES = 5000, MAX_SEEDS = 64, MAX_THREADS = 16 };

/* A model is pruned only when it has learned the task: both capitals right
 * on this share of the held-out examples. */
static const double TRAINED = 0.99;


typedef struct {
    uint64_t seed;
    int heads, hiddens, pairs, countries, steps, batch, examples, orders, seeds, threads;
    float lr;
    bool sizes_given;           /* an option that shapes or trains a new model */
    const char *from_dir, *to_dir, *plot_dir;
} Options;

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .heads = 8, .hiddens = 32, .pairs = 6, .countries = 16,
                   .steps = 1500, .batch = 32, .examples = 1000, .orders = 20, .seeds = 1,
                   .threads = 2, .lr = 0.01f};
    bool *trains = &opt.sizes_given;
    const CliOption options[] = {
        {"--from", CLI_STRING, &opt.from_dir, .metavar = "DIR",
         .help = "load a model saved with --to, not train one"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the trained model as DIR/<parameter>.npy"},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads, dividing D", .given = trains},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens", .given = trains},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "C",
         .help = "words per vocabulary, at least P", .given = trains},
        {"--steps", CLI_INT, &opt.steps, .min = 1, .max = 100000, .metavar = "N",
         .help = "Adam steps", .given = trains},
        {"--batch", CLI_INT, &opt.batch, .min = 1, .max = 4096, .metavar = "B",
         .help = "examples per step", .given = trains},
        {"--lr", CLI_FLOAT, &opt.lr, .min = 1e-6, .max = 1.0, .metavar = "LR",
         .help = "Adam's learning rate", .given = trains},
        {"--pairs", CLI_INT, &opt.pairs, .min = 2, .max = MAX_PAIRS, .metavar = "P",
         .help = "entries of each dictionary"},
        {"--examples", CLI_INT, &opt.examples, .min = 1, .max = MAX_EXAMPLES, .metavar = "N",
         .help = "held-out examples"},
        {"--orders", CLI_INT, &opt.orders, .min = 1, .max = MAX_ORDERS, .metavar = "N",
         .help = "random pruning orders, averaged"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "S",
         .help = "seed of the model, batches, held-out set"},
        {"--seeds", CLI_INT, &opt.seeds, .min = 1, .max = MAX_SEEDS, .metavar = "N",
         .help = "models from seeds S to S+N-1, summarised in part 4", .given = trains},
        {"--threads", CLI_INT, &opt.threads, .min = 1, .max = MAX_THREADS, .metavar = "T",
         .help = "models trained at once (the same numbers for any T)"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the pruning curves as DIR/head_pruning.{dat,gp}"},
    };
    cli_parse(&(CliTable){PROG, "d2l's exercise 2 on a trained model: each head's importance, "
                          "and held-out\naccuracy as heads are pruned.",
                          CLI_COUNT(options), options},
              argc, argv);
    if (opt.from_dir != NULL) {
        cli_check_input_dir(PROG, "--from", opt.from_dir);
        if (opt.to_dir != NULL)
            cli_fail(PROG, "--from and --to together would only copy the model");
        if (opt.sizes_given)
            cli_fail(PROG, "--from takes the model's sizes from its files; --heads, "
                     "--hiddens, --countries, --steps, --batch, --lr and --seeds train new "
                     "ones");
    } else {
        if (opt.hiddens % opt.heads != 0)
            cli_fail(PROG, "--hiddens %d does not divide by --heads %d", opt.hiddens,
                     opt.heads);
        if (opt.countries < opt.pairs)
            cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                     "different countries", opt.countries, opt.pairs, opt.pairs);
        if (opt.to_dir != NULL && opt.seeds > 1)
            cli_fail(PROG, "--to saves one model: --seeds %d trains %d", opt.seeds, opt.seeds);
    }
    return opt;
}

/* ---- Part 1 -------------------------------------------------------------------- */

/* The model of seed, trained on seed's batches; NULL, with *bad_step the
 * step, when the loss stops being a number. */
static TwoKeyModel *train(const Options *opt, const Task *task, uint64_t seed, int *bad_step)
{
    Rng init = rng_use(seed, RNG_PARAMETERS);
    Rng data = rng_use(seed, RNG_BATCHES);
    TwoKeyModel *model = two_key_new(opt->countries, opt->countries, opt->hiddens, opt->heads,
                                     &init);
    Adam *adam = adam_new(model->params, model->num_params, opt->lr);
    TaskBatch *batch = task_batch_new(task, opt->batch);
    for (int step = 1; step <= opt->steps; step++) {
        task_draw(task, batch, SPLIT_TRAIN, &data);
        const double loss = two_key_train_step(model, adam, batch);
        if (!isfinite(loss)) {
            *bad_step = step;
            two_key_free(model);
            model = NULL;
            break;
        }
    }
    task_batch_free(batch);
    adam_free(adam);
    return model;
}

/* The models of seeds S to S+N-1, trained on T threads: model s from seed
 * S + s's streams alone, so the numbers do not depend on T. */
typedef struct {
    const Options *opt;
    const Task *task;
    TwoKeyModel *models[MAX_SEEDS];
    int bad_step[MAX_SEEDS];
} Training;

static void train_one(void *arg, int s)
{
    Training *t = arg;
    t->models[s] = train(t->opt, t->task, t->opt->seed + (uint64_t)s, &t->bad_step[s]);
}

/* models[0..seeds) trained; false after one line on stderr (and every
 * model freed) when a loss was not a number. */
static bool train_all(const Options *opt, const Task *task, TwoKeyModel **models)
{
    Training *t = checked_calloc(PROG, 1, sizeof *t);
    *t = (Training){.opt = opt, .task = task};
    seeds_run(opt->seeds, opt->threads, train_one, t);
    bool ok = true;
    for (int s = 0; s < opt->seeds; s++) {
        models[s] = t->models[s];
        if (ok && t->bad_step[s] != 0) {
            fflush(stdout);
            fprintf(stderr, "%s: seed %llu: the loss stopped being a number at step %d; try a "
                    "smaller --lr\n", PROG, (unsigned long long)(opt->seed + (uint64_t)s),
                    t->bad_step[s]);
            ok = false;
        }
    }
    if (!ok)
        for (int s = 0; s < opt->seeds; s++) {
            two_key_free(models[s]);
            models[s] = NULL;
        }
    free(t);
    return ok;
}

/* The model --from names, with checks that it fits the task; NULL after
 * one line on stderr. */
static TwoKeyModel *load(const Options *opt)
{
    char err[MODEL_ERR_LEN];
    TwoKeyModel *model = two_key_from_dir(opt->from_dir, err, sizeof err);
    if (model == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return NULL;
    }
    const int smaller = model->key_vocab < model->value_vocab ? model->key_vocab
                                                              : model->value_vocab;
    const int larger = model->key_vocab + model->value_vocab - smaller;
    const char *problem = NULL;
    if (model->num_heads > MAX_HEADS)
        problem = "more heads than this program prunes";
    else if (larger > TASK_MAX_COUNTRIES)
        problem = "a vocabulary larger than the task's word lists";
    else if (smaller < opt->pairs)
        problem = "a vocabulary smaller than --pairs";
    if (problem == NULL)
        return model;
    fprintf(stderr, "%s: %s: a model of %d heads and vocabularies of %d and %d words: %s "
            "(%d heads, %d words, --pairs %d)\n", PROG, opt->from_dir, model->num_heads,
            model->key_vocab, model->value_vocab, problem, MAX_HEADS, TASK_MAX_COUNTRIES,
            opt->pairs);
    two_key_free(model);
    return NULL;
}

/* The held-out examples, and the model's heads on them: masking a head
 * changes only what comes after the heads (W_o and the readout), so every
 * accuracy below starts from these (two_key_evaluate_heads). */
typedef struct {
    TaskBatch *examples;   /* N examples, never trained on */
    Tensor *heads;         /* (N, 1, D): the heads side by side, before W_o */
} HeldOut;

/* The examples the heads are ranked on: N training examples, the first
 * ones the training drew (its batch stream from the start). A ranking made
 * on the examples it is then scored on would be tuned to them. */
static TaskBatch *ranking_examples(const Task *task, int n, uint64_t seed)
{
    TaskBatch *examples = task_batch_new(task, n);
    Rng data = rng_use(seed, RNG_BATCHES);
    task_draw(task, examples, SPLIT_TRAIN, &data);
    return examples;
}

static double accuracy(const TwoKeyModel *model, const HeldOut *held, const float *gates)
{
    TwoKeyCorrect correct;
    two_key_evaluate_heads(model, held->examples, held->heads, gates, &correct);
    return (double)correct.pairs / held->examples->batch_size;
}

/* 0, or 1 after one line when the held-out loss with every head is not a
 * number: a loaded model whose parameters are finite but overflow float32
 * in the forward (training stops on such a loss itself); every number of
 * the parts would be NaN. */
static int check_finite(const TwoKeyModel *model, const HeldOut *held)
{
    TwoKeyCorrect correct;
    const double loss = two_key_evaluate_heads(model, held->examples, held->heads, NULL,
                                               &correct);
    if (isfinite(loss))
        return 0;
    fflush(stdout);
    fprintf(stderr, "%s: the held-out loss is %s: the model's forward overflows float32 on "
            "these examples\n", PROG, non_finite_name(loss));
    return 1;
}

static void part1_model(const Options *opt, const TwoKeyModel *model, const HeldOut *held)
{
    const int H = model->num_heads, D = model->num_hiddens;
    printf("Head importance on a trained model (d2l's exercise 2)\n\n"
           "Part 1. The model\n\n");
    if (opt->from_dir != NULL)
        printf("Loaded from %s: ", opt->from_dir);
    else
        printf("Trained here on the two-key task of heads_experiment (%d Adam steps of %d\n"
               "examples, lr %g): ", opt->steps, opt->batch, (double)opt->lr);
    printf("%d heads of size %d (num_hiddens %d),\n"
           "dictionaries of %d entries out of %d countries and %d capitals.\n"
           "Held-out accuracy with every head, both capitals right: %.1f%% of %d examples.\n"
           "The heads are ranked on %d training examples and pruned on the held-out ones.\n\n",
           H, D / H, D, opt->pairs, model->key_vocab, model->value_vocab,
           100.0 * accuracy(model, held, NULL), held->examples->batch_size,
           held->examples->batch_size);
}

/* ---- Part 2 -------------------------------------------------------------------- */

/* order[0..n) = indices of values sorted ascending (stable insertion sort). */
static void argsort(const double *values, int *order, int n)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && values[order[j]] < values[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
}

static void print_order(const char *label, const int *order, int n)
{
    printf("%s", label);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", order[i]);
    printf("\n");
}

/* dL/dxi_h on ranking example 0 two ways: the dot product of
 * two_key_head_importance, and a central difference of the loss. */
static void check_one_slope(TwoKeyModel *model, const TaskBatch *ranking, int head)
{
    const int H = model->num_heads;
    TaskBatch *one = task_batch_example(ranking, 0);
    double slope[MAX_HEADS] = {0};   /* one example: |dL/dxi_h| itself */
    two_key_head_importance(model, one, slope);
    float gates[MAX_HEADS] = {0};
    for (int h = 0; h < H; h++)
        gates[h] = 1.0f;
    const float eps = 1e-2f, above = 1.0f + eps, below = 1.0f - eps;
    gates[head] = above;
    const double up = two_key_evaluate(model, one, gates, NULL);
    gates[head] = below;
    const double down = two_key_evaluate(model, one, gates, NULL);
    /* the gates as floats are not exactly 1 -+ eps: divide by their distance */
    const double numeric = (up - down) / ((double)above - (double)below);
    printf("   check on training example 0, head %d: |dL/dxi| = %.4e by the dot product,\n"
           "   %.4e by a central difference of the loss (xi = 1 -+ %g)\n\n", head, slope[head],
           fabs(numeric), (double)eps);
    task_batch_free(one);
}

/* importance (H,) and lost (H,): each head's I_h and the accuracy lost by
 * masking it alone. */
static void part2_importance(TwoKeyModel *model, const TaskBatch *ranking, const HeldOut *held,
                             double *importance, double *lost)
{
    const int H = model->num_heads;
    printf("Part 2. How much each head matters\n\n"
           "   importance I_h = mean over the training examples of |dL/dxi_h| at xi = 1,\n"
           "   from one backward pass; masked: held-out accuracy with head h alone off\n\n"
           "   head   importance   share   rank   masked   accuracy lost   rank\n");
    two_key_head_importance(model, ranking, importance);
    const double full = accuracy(model, held, NULL);
    float gates[MAX_HEADS] = {0};
    double masked[MAX_HEADS] = {0};
    for (int h = 0; h < H; h++)
        gates[h] = 1.0f;
    for (int h = 0; h < H; h++) {
        gates[h] = 0.0f;
        masked[h] = accuracy(model, held, gates);
        lost[h] = full - masked[h];
        gates[h] = 1.0f;
    }
    int by_importance[MAX_HEADS] = {0}, by_loss[MAX_HEADS] = {0};
    int rank_i[MAX_HEADS] = {0}, rank_l[MAX_HEADS] = {0};
    argsort(importance, by_importance, H);
    argsort(lost, by_loss, H);
    for (int i = 0; i < H; i++) {
        rank_i[by_importance[i]] = i + 1;
        rank_l[by_loss[i]] = i + 1;
    }
    /* a well-trained model's loss is near 0, and so are its slopes: the
     * share of the total compares them. Michel et al. divide a layer's
     * importances by their l2 norm instead; with one layer both divide
     * every head by the same number, so the ranking is the same */
    double total = 0.0;
    for (int h = 0; h < H; h++)
        total += importance[h];
    for (int h = 0; h < H; h++)
        printf("   %4d   %10.2e   %4.1f%%   %4d   %5.1f%%   %12.1f%%   %4d\n", h, importance[h],
               total > 0.0 ? 100.0 * importance[h] / total : 0.0, rank_i[h], 100.0 * masked[h],
               100.0 * lost[h], rank_l[h]);
    printf("   (share: of the heads' total importance, where Michel et al. divide by the\n"
           "   l2 norm of the layer's importances: one layer here, so the same ranking;\n"
           "   rank 1 = least important, or least missed)\n\n");
    print_order("   least important first:     ", by_importance, H);
    print_order("   least missed when masked:  ", by_loss, H);
    printf("\n");
    check_one_slope(model, ranking, by_importance[H - 1]);
}

/* ---- Part 3 -------------------------------------------------------------------- */

/* curve[k] = held-out accuracy with the first k heads of order masked,
 * k = 0..H: heads kept H - k. */
static void pruning_curve(const TwoKeyModel *model, const HeldOut *held, const int *order,
                          double *curve)
{
    const int H = model->num_heads;
    float gates[MAX_HEADS] = {0};
    for (int h = 0; h < H; h++)
        gates[h] = 1.0f;
    curve[0] = accuracy(model, held, gates);
    for (int k = 1; k <= H; k++) {
        gates[order[k - 1]] = 0.0f;
        curve[k] = accuracy(model, held, gates);
    }
}

/* Every subset is tried up to this many heads (2^H evaluations). */
enum { MAX_SUBSET_HEADS = 10 };

/* best[k] = the best held-out accuracy of any H - k heads kept, k = 0..H:
 * the bound that no pruning order can pass. false when H is too large to
 * try every subset. */
static bool best_subsets(const TwoKeyModel *model, const HeldOut *held, double *best)
{
    const int H = model->num_heads;
    if (H > MAX_SUBSET_HEADS)
        return false;
    for (int k = 0; k <= H; k++)
        best[k] = -1.0;
    for (unsigned kept = 0; kept < 1u << H; kept++) {
        float gates[MAX_HEADS] = {0};
        int count = 0;
        for (int h = 0; h < H; h++) {
            gates[h] = (float)(kept >> h & 1u);
            count += (int)(kept >> h & 1u);
        }
        const double a = accuracy(model, held, gates);
        if (a > best[H - count])
            best[H - count] = a;
    }
    return true;
}

/* A model's pruning: the ranking and the curves, k masked -> [k]. */
typedef struct {
    int least_first[MAX_HEADS];
    double by_least[MAX_HEADS + 1], by_most[MAX_HEADS + 1], random[MAX_HEADS + 1];
    double best[MAX_HEADS + 1];
    bool has_best;
} Pruning;

/* The model of seed, ranked by importance (H,): its curves on held. */
static void prune(const Options *opt, const TwoKeyModel *model, const HeldOut *held,
                  const double *importance, uint64_t seed, Pruning *p)
{
    const int H = model->num_heads;
    int most_first[MAX_HEADS] = {0}, order[MAX_HEADS] = {0};
    argsort(importance, p->least_first, H);
    for (int i = 0; i < H; i++)
        most_first[i] = p->least_first[H - 1 - i];
    pruning_curve(model, held, p->least_first, p->by_least);
    pruning_curve(model, held, most_first, p->by_most);
    double one_order[MAX_HEADS + 1];
    for (int k = 0; k <= H; k++)
        p->random[k] = 0.0;
    Rng rng = rng_use(seed, RNG_ORDERS);
    for (int r = 0; r < opt->orders; r++) {
        rng_permutation(&rng, order, H);
        pruning_curve(model, held, order, one_order);
        for (int k = 0; k <= H; k++)
            p->random[k] += one_order[k] / opt->orders;
    }
    p->has_best = best_subsets(model, held, p->best);
}

/* The mean of a curve over heads kept 0 to H: the area under it, as a
 * share of the whole box. */
static double area(const double *curve, int H)
{
    double sum = 0.0;
    for (int k = 0; k <= H; k++)
        sum += curve[k];
    return sum / (H + 1);
}

/* The fewest heads kept whose accuracy stays within one point of all H,
 * pruning along curve (k masked -> curve[k]). */
static int fewest_heads(const double *curve, int H)
{
    int k = 0;
    while (k < H && curve[k + 1] >= curve[0] - 0.01)
        k++;
    return H - k;
}

/* One table row per number of heads kept; most (k masked -> [k]) may be
 * NULL, best NULL when it was not computed. */
static void print_curves(const char *indent, int H, const double *least, const double *most,
                         const double *random, const double *best, int orders)
{
    char mean[32];
    snprintf(mean, sizeof mean, "(mean of %d)", orders);
    printf("%sheads kept   least important%s   random orders   best subset\n", indent,
           most != NULL ? "   most important" : "");
    printf("%s                        first%s   %13s\n", indent,
           most != NULL ? "            first" : "", mean);
    for (int k = 0; k <= H; k++) {
        printf("%s%10d   %14.1f%%", indent, H - k, 100.0 * least[k]);
        if (most != NULL)
            printf("   %13.1f%%", 100.0 * most[k]);
        printf("   %12.1f%%", 100.0 * random[k]);
        if (best != NULL)
            printf("   %10.1f%%\n", 100.0 * best[k]);
        else
            printf("   %11s\n", "-");
    }
}

static int part3_pruning(const Options *opt, const TwoKeyModel *model,
                         const Pruning *p)
{
    const int H = model->num_heads;
    printf("Part 3. Pruning one head at a time: held-out accuracy against heads kept\n\n");
    print_curves("   ", H, p->by_least, p->by_most, p->random, p->has_best ? p->best : NULL,
                 opt->orders);
    printf("   (best subset: the best of every set of that many heads, all %s tried)\n",
           p->has_best ? "of them" : "too many to be");
    printf("\n   fewest heads kept within one point of all %d: %d least important first, "
           "%d most\n   important first, %d on the random orders' mean\n", H,
           fewest_heads(p->by_least, H), fewest_heads(p->by_most, H),
           fewest_heads(p->random, H));
    if (opt->plot_dir == NULL)
        return 0;
    const int lines = p->has_best ? 4 : 3;
    Tensor *xs = tensor_zeros(SHAPE(H + 1)), *ys = tensor_zeros(SHAPE(lines, H + 1));
    for (int k = 0; k <= H; k++) {
        xs->data[k] = (float)(H - k);
        AT2(ys, 0, k) = (float)(100.0 * p->by_least[k]);
        AT2(ys, 1, k) = (float)(100.0 * p->by_most[k]);
        AT2(ys, 2, k) = (float)(100.0 * p->random[k]);
        if (p->has_best)
            AT2(ys, 3, k) = (float)(100.0 * p->best[k]);
    }
    const char *titles[4] = {"least important first", "most important first", "random order",
                             "best subset"};
    const int status = plot_curves(opt->plot_dir, "head_pruning", xs, ys, "heads kept",
                                   "held-out accuracy (%)", titles, false);
    if (status == 0)
        printf("\nwrote %s/head_pruning.dat and %s/head_pruning.gp (render: gnuplot "
               "%s/head_pruning.gp)\n", opt->plot_dir, opt->plot_dir, opt->plot_dir);
    tensor_free(xs);
    tensor_free(ys);
    return status == 0 ? 0 : 1;
}

/* ---- Part 4 -------------------------------------------------------------------- */

/* curves[i][k] over the n models -> out[k], the median at each k. */
static void median_curve(const Pruning *p, int n, int H, size_t offset, double *out)
{
    double values[MAX_SEEDS];
    for (int k = 0; k <= H; k++) {
        for (int i = 0; i < n; i++)
            values[i] = ((const double *)((const char *)&p[i] + offset))[k];
        out[k] = seeds_median(values, n);
    }
}

/* Each model ranked on its training examples and pruned on the held-out
 * ones, if it learned the task; the summary over those. */
static void part4_seeds(const Options *opt, const Task *task, TwoKeyModel *const *models,
                        const TaskBatch *held_out_examples)
{
    const int H = opt->heads;
    printf("\nPart 4. Over %d seeds (%llu to %llu): the same for every model\n\n", opt->seeds,
           (unsigned long long)opt->seed,
           (unsigned long long)(opt->seed + (uint64_t)opt->seeds - 1));
    Pruning *p = checked_calloc(PROG, (size_t)opt->seeds, sizeof *p);
    uint64_t seeds[MAX_SEEDS];
    int n = 0, left_out = 0;
    printf("   models below %.0f%% held out, left out:", 100.0 * TRAINED);
    for (int s = 0; s < opt->seeds; s++) {
        const uint64_t seed = opt->seed + (uint64_t)s;
        HeldOut held = {(TaskBatch *)held_out_examples, two_key_heads(models[s],
                                                                      held_out_examples)};
        const double full = accuracy(models[s], &held, NULL);
        if (full < TRAINED) {
            printf("%s seed %llu (%.1f%%)", left_out > 0 && left_out % 4 == 0 ? "\n   " : "",
                   (unsigned long long)seed, 100.0 * full);
            left_out++;
        } else {
            TaskBatch *ranking = ranking_examples(task, held_out_examples->batch_size, seed);
            double importance[MAX_HEADS] = {0};
            two_key_head_importance(models[s], ranking, importance);
            prune(opt, models[s], &held, importance, seed, &p[n]);
            seeds[n++] = seed;
            task_batch_free(ranking);
        }
        tensor_free(held.heads);
    }
    printf("%s\n", left_out == 0 ? " none" : "");
    if (n == 0) {
        printf("   (no model to prune)\n");
        free(p);
        return;
    }
    int above = 0, worst = 0;
    for (int i = 0; i < n; i++) {
        const double margin = area(p[i].by_least, H) - area(p[i].random, H);
        above += margin > 0.0;
        if (margin < area(p[worst].by_least, H) - area(p[worst].random, H))
            worst = i;
    }
    printf("   least important first above the random orders' mean (area under the curve,\n"
           "   heads kept 0 to %d): %d of %d models\n\n", H, above, n);
    double least[MAX_HEADS + 1], random[MAX_HEADS + 1], best[MAX_HEADS + 1];
    median_curve(p, n, H, offsetof(Pruning, by_least), least);
    median_curve(p, n, H, offsetof(Pruning, random), random);
    median_curve(p, n, H, offsetof(Pruning, best), best);
    printf("   the median over the %d models at each number of heads kept:\n\n", n);
    print_curves("   ", H, least, NULL, random, p[0].has_best ? best : NULL, opt->orders);
    const Pruning *w = &p[worst];
    printf("\n   the worst model for the ranking, seed %llu (least important first %.1f points\n"
           "   of area %s the random mean):\n", (unsigned long long)seeds[worst],
           100.0 * fabs(area(w->by_least, H) - area(w->random, H)),
           area(w->by_least, H) < area(w->random, H) ? "below" : "above");
    print_order("   least important first:     ", w->least_first, H);
    printf("\n");
    print_curves("   ", H, w->by_least, w->by_most, w->random, w->has_best ? w->best : NULL,
                 opt->orders);
    free(p);
}

/* Save under --to; 0, or 1 after one line on stderr. */
static int save(const Options *opt, TwoKeyModel *model)
{
    char err[MODEL_ERR_LEN];
    if (two_key_save(model, opt->to_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return 1;
    }
    printf("saved the model in %s (run again with --from %s)\n\n", opt->to_dir, opt->to_dir);
    return 0;
}

int main(int argc, char **argv)
{
    Options opt = parse_options(argc, argv);
    TwoKeyModel *models[MAX_SEEDS] = {NULL};
    if (opt.from_dir != NULL) {
        models[0] = load(&opt);
        if (models[0] == NULL)
            return 1;
    } else {
        Task task = task_two_keys(opt.pairs, opt.countries, opt.countries);
        if (!train_all(&opt, &task, models))
            return 1;
    }
    TwoKeyModel *model = models[0];   /* the first seed's: parts 1 to 3 */
    Task task = task_two_keys(opt.pairs, model->key_vocab, model->value_vocab);
    HeldOut held = {task_batch_new(&task, opt.examples), NULL};
    Rng held_out_rng = rng_use(opt.seed, RNG_HELDOUT);
    task_draw(&task, held.examples, SPLIT_HELDOUT, &held_out_rng);
    held.heads = two_key_heads(model, held.examples);
    TaskBatch *ranking = ranking_examples(&task, opt.examples, opt.seed);

    int status = check_finite(model, &held);
    if (status == 0)
        part1_model(&opt, model, &held);
    if (status == 0 && opt.to_dir != NULL)
        status = save(&opt, model);
    if (status == 0) {
        double importance[MAX_HEADS] = {0}, lost[MAX_HEADS] = {0};
        part2_importance(model, ranking, &held, importance, lost);
        Pruning pruning;
        prune(&opt, model, &held, importance, opt.seed, &pruning);
        status = part3_pruning(&opt, model, &pruning);
    }
    if (status == 0 && opt.seeds > 1)
        part4_seeds(&opt, &task, models, held.examples);
    tensor_free(held.heads);
    task_batch_free(held.examples);
    task_batch_free(ranking);
    for (int s = 0; s < opt.seeds; s++)
        two_key_free(models[s]);
    return status;
}
