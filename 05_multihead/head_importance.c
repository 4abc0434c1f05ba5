/*
 * head_importance - d2l's exercise 2 on a trained model: how important is each head, and which
 * heads can be pruned? (05_multihead/heads.md; the pruning itself is head_pruning.c, beside it)
 *
 * Part 1: a model trained on heads_experiment's two-key task (or --from),
 *         and its held-out accuracy with every head.
 * Part 2: each head's importance, Michel, Levy and Neubig's I_h = E|dL/dxi_h| for a gate
 *         xi_h = 1 on its output (head_gates.h), on training examples, beside the held-out
 *         accuracy lost when that head alone is masked; a finite difference checks one slope.
 * Part 3: held-out accuracy as heads are pruned one at a time, least or most
 *         important first and in random orders, beside the best subset of
 *         each size: the bound no ranking can pass.
 * Part 4 (--seeds N): the same over N seeds: how often the ranking beats the
 *         random orders, the median curves, the worst seed.
 *
 * Legend: N = held-out examples, P = dictionary entries, H = num_heads, D = num_hiddens.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "head_pruning.h"
#include "io/cli.h"
#include "io/plot.h"
#include "learn/seeds.h"
#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "run/saved_models.h"
#include "tensor.h"

static const char PROG[] = "head_importance";

enum { MAX_HEADS = PRUNING_MAX_HEADS, MAX_HIDDENS = 128, MAX_PAIRS = 16, MAX_ORDERS = 1000,
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

/* The run at its largest (pruning_bytes_needed), refused when it does not fit. */
static int check_memory(const Options *opt, int key_vocab, int value_vocab, int D, int H)
{
    const int at_once = opt->threads < opt->seeds ? opt->threads : opt->seeds;
    char detail[96];
    snprintf(detail, sizeof detail, "%d %s, %d at once, batches of %d, %d held out", opt->seeds,
             plural(opt->seeds, "model", "models"), at_once, opt->batch, opt->examples);
    return memory_require(pruning_bytes_needed(key_vocab, value_vocab, opt->pairs, D, H,
                                               opt->seeds, at_once, opt->batch, opt->examples),
                          detail,
                          "use fewer --seeds or --threads, a smaller --batch or --examples");
}

/* A loaded model takes no sizes; a new one needs sizes that fit together. */
static void check_options(const Options *opt)
{
    if (opt->from_dir != NULL) {
        if (opt->to_dir != NULL)
            cli_fail(PROG, "--from and --to together would only copy the model");
        if (opt->sizes_given)
            cli_fail(PROG, "--from takes the model's sizes from its files; --heads, "
                     "--hiddens, --countries, --steps, --batch, --lr and --seeds train new "
                     "ones");
        return;
    }
    if (opt->countries < opt->pairs)
        cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                 "different countries", opt->countries, opt->pairs, opt->pairs);
    if (opt->to_dir != NULL && opt->seeds > 1)
        cli_fail(PROG, "--to saves one model: --seeds %d trains %d", opt->seeds, opt->seeds);
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.seed = 0, .heads = 8, .hiddens = 32, .pairs = 6, .countries = 16,
                   .steps = 1500, .batch = 32, .examples = 1000, .orders = 20, .seeds = 1,
                   .threads = 2, .lr = 0.01f};
    bool *trains = &opt.sizes_given;
    const CliOption options[] = {
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "load a model saved with --to, not train one"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "save the trained model as DIR/<parameter>.npy"},
        {"--heads", CLI_INT, &opt.heads, .min = 1, .max = MAX_HEADS, .metavar = "H",
         .help = "num_heads, dividing D", .given = trains, .splits = &opt.hiddens},
        {"--hiddens", CLI_INT, &opt.hiddens, .min = 1, .max = MAX_HIDDENS, .metavar = "D",
         .help = "num_hiddens", .given = trains},
        {"--countries", CLI_INT, &opt.countries, .min = 2, .max = TASK_MAX_COUNTRIES,
         .metavar = "C", .help = "words per vocabulary, at least P", .given = trains},
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
    *done = cli_parse(&(CliTable){PROG, "d2l's exercise 2 on a trained model: each head's importance, "
                                  "and held-out\naccuracy as heads are pruned.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done == CLI_RUN)
        check_options(&opt);
    return opt;
}

/* ---- the model: trained or loaded ----------------------------------------------- */

/* models[0..seeds) trained on T threads, model s from seed S + s's streams alone: the
 * same numbers for any T. 0, or the exit status after one line, every model freed, if a loss
 * was not a number. */
static int train_all(const Options *opt, TwoKeyModel **models)
{
    const int status = check_memory(opt, opt->countries, opt->countries, opt->hiddens, opt->heads);
    if (status != 0)
        return status;
    const Task task = task_two_keys(opt->pairs, opt->countries, opt->countries);
    const TwoKeyTraining how = {opt->countries, opt->countries, opt->hiddens, opt->heads, 0,
                                opt->steps, opt->batch, opt->lr};
    int bad_steps[MAX_SEEDS] = {0};
    two_key_train_seeds(&task, &how, opt->seed, opt->seeds, opt->threads, models, bad_steps);
    for (int s = 0; s < opt->seeds; s++)
        if (bad_steps[s] != 0) {
            for (int i = 0; i < opt->seeds; i++)
                two_key_free(models[i]);
            return fail("seed %llu: the loss stopped being a number at step %d; try a smaller "
                        "--lr", (unsigned long long)(opt->seed + (uint64_t)s), bad_steps[s]);
        }
    return 0;
}

/* models[0] = the model --from names, with checks that it fits the task;
 * 0, or the exit status after one line on stderr. */
static int load(const Options *opt, TwoKeyModel **models)
{
    char err[MODEL_ERR_LEN];
    TwoKeyModel *model = two_key_from_dir(opt->from_dir, err, sizeof err);
    if (model == NULL)
        return fail("%s", err);
    const int Vk = model->key_vocab, Vv = model->value_vocab, H = model->num_heads;
    const char *problem = NULL;
    if (H > MAX_HEADS)
        problem = "more heads than this program prunes";
    else if (Vk > TASK_MAX_COUNTRIES || Vv > TASK_MAX_COUNTRIES)
        problem = "a vocabulary larger than the task's word lists";
    else if (Vk < opt->pairs || Vv < opt->pairs)
        problem = "a vocabulary smaller than --pairs";
    const int status = problem == NULL ? check_memory(opt, Vk, Vv, model->num_hiddens, H) : 0;
    if (problem == NULL && status == 0)
        models[0] = model;
    else
        two_key_free(model);
    if (problem == NULL)
        return status;
    return fail("%s: a model of %d heads and vocabularies of %d and %d words: %s (%d heads, "
                "%d words, --pairs %d)", opt->from_dir, H, Vk, Vv, problem, MAX_HEADS,
                TASK_MAX_COUNTRIES, opt->pairs);
}

/* Save under --to; 0, or 1 after one line on stderr. */
static int save(const Options *opt, TwoKeyModel *model)
{
    char err[MODEL_ERR_LEN];
    if (two_key_save(model, opt->to_dir, err, sizeof err) != 0)
        return fail("%s", err);
    printf("saved the model in %s (run again with --from %s)\n\n", opt->to_dir, opt->to_dir);
    return 0;
}

/* 0, or 1 after one line when a loaded model's finite parameters overflow
 * float32: the held-out loss or a head's importance is not a number. */
static int check_finite(const HeldOut *held, TwoKeyModel *model, const TaskBatch *ranking)
{
    const double loss = two_key_evaluate_heads(held->model, held->examples, held->heads, NULL,
                                               NULL);
    if (!isfinite(loss))
        return fail("the held-out loss is %s: the model's forward overflows "
                    "float32 on these examples", non_finite_name(loss));
    double importance[MAX_HEADS];
    two_key_head_importance(model, ranking, importance);
    for (int h = 0; h < model->num_heads; h++)
        if (!isfinite(importance[h]))
            return fail("head %d's importance is %s: the model's backward "
                        "overflows float32 on the ranking examples", h,
                        non_finite_name(importance[h]));
    return 0;
}

/* ---- Part 1 -------------------------------------------------------------------- */

static void part1_model(const Options *opt, const HeldOut *held)
{
    const TwoKeyModel *model = held->model;
    const int H = model->num_heads, D = model->num_hiddens, N = held->examples->batch_size;
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
           100.0 * held_out_accuracy(held, NULL), N, N);
}

/* ---- Part 2 -------------------------------------------------------------------- */

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
    TaskBatch *one = task_batch_example(ranking, 0);
    double slope[MAX_HEADS] = {0};   /* one example: |dL/dxi_h| itself */
    two_key_head_importance(model, one, slope);
    const float eps = 1e-2f;
    printf("   check on training example 0, head %d: |dL/dxi| = %.4e by the dot product,\n"
           "   %.4e by a central difference of the loss (xi = 1 -+ %g)\n\n", head, slope[head],
           fabs(two_key_gate_slope(model, one, head, eps)), (double)eps);
    task_batch_free(one);
}

/* -> w: each head's I_h on the ranking examples, shown beside the
 * held-out accuracy lost by masking it alone. */
static void part2_importance(TwoKeyModel *model, const TaskBatch *ranking, const HeldOut *held,
                             HeadWorth *worth)
{
    const int H = model->num_heads;
    printf("Part 2. How much each head matters\n\n"
           "   importance I_h = mean over the training examples of |dL/dxi_h| at xi = 1,\n"
           "   from one backward pass; masked: held-out accuracy with head h alone off\n\n"
           "   head   importance   share   rank   masked   accuracy lost   rank\n");
    head_worth(model, ranking, held, worth);
    const HeadWorth w = *worth;
    /* a well-trained model's loss is near 0, and so are its slopes: the share of the total
     * compares them. Michel et al. divide a layer's importances by their l2 norm instead; with
     * one layer both divide every head by the same number, so the ranking is the same */
    double total = 0.0;
    for (int h = 0; h < H; h++)
        total += w.importance[h];
    for (int h = 0; h < H; h++)
        printf("   %4d   %10.2e   %4.1f%%   %4d   %5.1f%%   %12.1f%%   %4d\n", h,
               w.importance[h], total > 0.0 ? 100.0 * w.importance[h] / total : 0.0,
               w.rank_importance[h], 100.0 * w.masked[h], 100.0 * w.lost[h], w.rank_lost[h]);
    printf("   (share: of the heads' total importance, where Michel et al. divide by the\n"
           "   l2 norm of the layer's importances: one layer here, so the same ranking;\n"
           "   rank 1 = least important, or least missed)\n\n");
    print_order("   least important first:     ", w.by_importance, H);
    print_order("   least missed when masked:  ", w.by_lost, H);
    printf("\n");
    check_one_slope(model, ranking, w.by_importance[H - 1]);
}

/* ---- Part 3 -------------------------------------------------------------------- */

/* One table row per number of heads kept; the most important first
 * column when with_most, the best subset's when p->has_best. */
static void print_curves(const Pruning *p, int H, bool with_most, int orders)
{
    char mean[32];
    snprintf(mean, sizeof mean, "(mean of %d)", orders);
    printf("   heads kept   least important%s   random orders   best subset\n",
           with_most ? "   most important" : "");
    printf("                           first%s   %13s\n", with_most ? "            first" : "",
           mean);
    for (int k = 0; k <= H; k++) {
        printf("   %10d   %14.1f%%", H - k, 100.0 * p->by_least[k]);
        if (with_most)
            printf("   %13.1f%%", 100.0 * p->by_most[k]);
        printf("   %12.1f%%", 100.0 * p->random[k]);
        if (p->has_best)
            printf("   %10.1f%%\n", 100.0 * p->best[k]);
        else
            printf("   %11s\n", "-");
    }
}

/* The curves as DIR/head_pruning.{dat,gp}; 0, or 1 after one line. */
static int plot_pruning(const char *dir, const Pruning *p, int H)
{
    const int lines = p->has_best ? 4 : 3;
    const double *curves[4] = {p->by_least, p->by_most, p->random, p->best};
    Tensor *xs = tensor_zeros(SHAPE(H + 1)), *ys = tensor_zeros(SHAPE(lines, H + 1));
    for (int k = 0; k <= H; k++) {
        xs->data[k] = (float)(H - k);
        for (int i = 0; i < lines; i++)
            AT2(ys, i, k) = (float)(100.0 * curves[i][k]);
    }
    const char *titles[4] = {"least important first", "most important first", "random order",
                             "best subset"};
    const int status = plot_curves(dir, "head_pruning", xs, ys, "heads kept",
                                   "held-out accuracy (%)", titles, false);
    if (status == 0)
        printf("\nwrote %s/head_pruning.dat and %s/head_pruning.gp (render: gnuplot "
               "%s/head_pruning.gp)\n", dir, dir, dir);
    TENSOR_FREE(xs, ys);
    return status;
}

static int part3_pruning(const Options *opt, const Pruning *p, int H)
{
    printf("Part 3. Pruning one head at a time: held-out accuracy against heads kept\n\n");
    print_curves(p, H, true, opt->orders);
    printf("   (best subset: the best of every set of that many heads, all %s tried)\n",
           p->has_best ? "of them" : "too many to be");
    printf("\n   fewest heads kept within one point of all %d: %d least important first, "
           "%d most\n   important first, %d on the random orders' mean\n", H,
           fewest_heads(p->by_least, H), fewest_heads(p->by_most, H),
           fewest_heads(p->random, H));
    return opt->plot_dir != NULL ? plot_pruning(opt->plot_dir, p, H) : 0;
}

/* ---- Part 4 -------------------------------------------------------------------- */

/* Over the n models pruned, p (seeds): wins over random orders, medians, the worst. */
static void print_seed_summary(const Options *opt, const Pruning *p, const uint64_t *seeds, int n)
{
    const int H = opt->heads;
    int above = 0, worst = 0;
    for (int i = 0; i < n; i++) {
        above += pruning_margin(&p[i], H) > 0.0;
        if (pruning_margin(&p[i], H) < pruning_margin(&p[worst], H))
            worst = i;
    }
    printf("   least important first above the random orders' mean (area under the curve,\n"
           "   heads kept 0 to %d): %d of %d models\n\n", H, above, n);
    Pruning median;
    pruning_median(p, n, H, &median);
    printf("   the median over the %d models at each number of heads kept:\n\n", n);
    print_curves(&median, H, false, opt->orders);
    const Pruning *w = &p[worst];
    printf("\n   the worst model for the ranking, seed %llu (least important first %.1f points\n"
           "   of area %s the random mean):\n", (unsigned long long)seeds[worst],
           100.0 * fabs(pruning_margin(w, H)), pruning_margin(w, H) < 0.0 ? "below" : "above");
    print_order("   least important first:     ", w->least_first, H);
    printf("\n");
    print_curves(w, H, true, opt->orders);
}

/* Each model ranked on its training examples and pruned on the held-out
 * ones, if it learned the task; the summary over those. */
static void part4_seeds(const Options *opt, const Task *task, TwoKeyModel *const *models,
                        const TaskBatch *held_out_examples)
{
    const int N = held_out_examples->batch_size;
    printf("\nPart 4. Over %d seeds (%llu to %llu): the same for every model\n\n", opt->seeds,
           (unsigned long long)opt->seed,
           (unsigned long long)(opt->seed + (uint64_t)opt->seeds - 1));
    Pruning *p = checked_calloc((size_t)opt->seeds, sizeof *p);
    uint64_t seeds[MAX_SEEDS];
    int n = 0, left_out = 0;
    printf("   models below %.0f%% held out, left out:", 100.0 * TRAINED);
    for (int s = 0; s < opt->seeds; s++) {
        const uint64_t seed = opt->seed + (uint64_t)s;
        HeldOut held = held_out_new(models[s], held_out_examples);
        const double full = held_out_accuracy(&held, NULL);
        if (full < TRAINED) {
            printf("%s seed %llu (%.1f%%)", left_out > 0 && left_out % 4 == 0 ? "\n   " : "",
                   (unsigned long long)seed, 100.0 * full);
            left_out++;
        } else {
            TaskBatch *ranking = task_examples(task, N, SPLIT_TRAIN, seed);
            double importance[MAX_HEADS] = {0};
            two_key_head_importance(models[s], ranking, importance);
            prune_heads(&held, importance, opt->orders, seed, &p[n]);
            seeds[n++] = seed;
            task_batch_free(ranking);
        }
        held_out_free(&held);
    }
    printf("%s\n", left_out == 0 ? " none" : "");
    if (n == 0)
        printf("   (no model to prune)\n");
    else
        print_seed_summary(opt, p, seeds, n);
    free(p);
}

int main(int argc, char **argv)
{
    int done;
    Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    TwoKeyModel *models[MAX_SEEDS] = {NULL};
    int status = opt.from_dir != NULL ? load(&opt, models) : train_all(&opt, models);
    if (status != 0)
        return status;
    TwoKeyModel *model = models[0];   /* the first seed's: parts 1 to 3 */
    Task task = task_two_keys(opt.pairs, model->key_vocab, model->value_vocab);
    TaskBatch *held_out = task_examples(&task, opt.examples, SPLIT_HELDOUT, opt.seed);
    /* the heads are ranked on the first examples the training drew: a
     * ranking made on the examples it is then scored on would be tuned to them */
    TaskBatch *ranking = task_examples(&task, opt.examples, SPLIT_TRAIN, opt.seed);
    HeldOut held = held_out_new(model, held_out);

    status = check_finite(&held, model, ranking);
    if (status == 0)
        part1_model(&opt, &held);
    if (status == 0 && opt.to_dir != NULL)
        status = save(&opt, model);
    if (status == 0) {
        HeadWorth worth;
        part2_importance(model, ranking, &held, &worth);
        Pruning pruning;
        prune_heads(&held, worth.importance, opt.orders, opt.seed, &pruning);
        status = part3_pruning(&opt, &pruning, model->num_heads);
    }
    if (status == 0 && opt.seeds > 1)
        part4_seeds(&opt, &task, models, held_out);
    held_out_free(&held);
    task_batch_free(held_out);
    task_batch_free(ranking);
    for (int s = 0; s < opt.seeds; s++)
        two_key_free(models[s]);
    return status;
}
