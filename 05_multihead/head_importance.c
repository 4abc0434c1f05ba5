/*
 * head_importance - d2l's exercise 2 on a trained model: how important is
 * each head, and which heads can be pruned?
 *
 * Part 1: a multi-head model trained on the two-key task of
 *         heads_experiment (or loaded with --from), and its held-out
 *         accuracy with every head.
 * Part 2: each head's importance, Michel, Levy and Neubig's
 *         I_h = E|dL/dxi_h| for a gate xi_h = 1 on its output (one backward
 *         pass for all heads, head_gates.h), beside the accuracy lost when
 *         that head alone is masked; a finite difference checks one slope.
 * Part 3: prune heads one at a time, least important first, most important
 *         first and in random orders, and measure held-out accuracy against
 *         heads kept.
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
#include <sys/stat.h>
#include <unistd.h>

#include "io/cli.h"
#include "io/curve.h"
#include "io/saved_models.h"
#include "learn/optim.h"
#include "learn/tasks.h"
#include "learn/two_key_model.h"
#include "tensor.h"

static const char PROG[] = "head_importance";

/* The held-out set is evaluated in one batch: at the largest sizes it
 * still takes a few hundred MB. */
enum { MAX_HEADS = 16, MAX_HIDDENS = 128, MAX_PAIRS = 16, MAX_ORDERS = 1000,
       MAX_EXAMPLES = 5000 };


typedef struct {
    uint64_t seed;
    int heads, hiddens, pairs, countries, steps, batch, examples, orders;
    float lr;
    bool sizes_given;           /* an option that shapes or trains a new model */
    const char *from_dir, *to_dir, *plot_dir;
} Options;

static Options parse_options(int argc, char **argv)
{
    Options opt = {.seed = 0, .heads = 8, .hiddens = 32, .pairs = 6, .countries = 16,
                   .steps = 1500, .batch = 32, .examples = 1000, .orders = 20, .lr = 0.01f};
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
                     "--hiddens, --countries, --steps, --batch and --lr train a new one");
    } else {
        if (opt.hiddens % opt.heads != 0)
            cli_fail(PROG, "--hiddens %d does not divide by --heads %d", opt.hiddens,
                     opt.heads);
        if (opt.countries < opt.pairs)
            cli_fail(PROG, "--countries %d is fewer than --pairs %d: a dictionary needs %d "
                     "different countries", opt.countries, opt.pairs, opt.pairs);
    }
    return opt;
}

/* ---- Part 1 -------------------------------------------------------------------- */

/* A line that rewrites itself on a terminal (stderr); nothing otherwise. */
static void show_progress(int step, int steps, double loss)
{
    fprintf(stderr, "\r  step %5d of %d, loss %.4f  ", step, steps, loss);
    if (step == steps)
        fprintf(stderr, "\r%*s\r", 50, "");
}

static TwoKeyModel *train(const Options *opt, const Task *task)
{
    Rng init = rng_use(opt->seed, RNG_PARAMETERS);
    Rng data = rng_use(opt->seed, RNG_BATCHES);
    TwoKeyModel *model = two_key_new(opt->countries, opt->countries, opt->hiddens, opt->heads,
                                     &init);
    Adam *adam = adam_new(model->params, TWO_KEY_NUM_PARAMS, opt->lr);
    TaskBatch *batch = task_batch_new(task, opt->batch);
    const bool terminal = isatty(STDERR_FILENO);
    for (int step = 1; step <= opt->steps; step++) {
        task_draw(task, batch, SPLIT_TRAIN, &data);
        const double loss = two_key_train_step(model, adam, batch);
        if (!isfinite(loss)) {
            fflush(stdout);
            fprintf(stderr, "%s: the loss became %s at step %d; try a smaller --lr\n", PROG,
                    non_finite_name(loss), step);
            two_key_free(model);
            model = NULL;
            break;
        }
        if (terminal && (step % 10 == 0 || step == opt->steps))
            show_progress(step, opt->steps, loss);
    }
    task_batch_free(batch);
    adam_free(adam);
    return model;
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
           "Held-out accuracy with every head, both capitals right: %.1f%% of %d examples.\n\n",
           H, D / H, D, opt->pairs, model->key_vocab, model->value_vocab,
           100.0 * accuracy(model, held, NULL), held->examples->batch_size);
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

/* dL/dxi_h on held-out example 0 two ways: the dot product of
 * two_key_head_importance, and a central difference of the loss. */
static void check_one_slope(TwoKeyModel *model, const TaskBatch *held_out, int head)
{
    const int H = model->num_heads;
    TaskBatch *one = task_batch_example(held_out, 0);
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
    printf("   check on held-out example 0, head %d: |dL/dxi| = %.4e by the dot product,\n"
           "   %.4e by a central difference of the loss (xi = 1 -+ %g)\n\n", head, slope[head],
           fabs(numeric), (double)eps);
    task_batch_free(one);
}

/* importance (H,) and lost (H,): each head's I_h and the accuracy lost by
 * masking it alone. */
static void part2_importance(TwoKeyModel *model, const HeldOut *held, double *importance,
                             double *lost)
{
    const int H = model->num_heads;
    printf("Part 2. How much each head matters\n\n"
           "   importance I_h = mean over the held-out examples of |dL/dxi_h| at xi = 1,\n"
           "   from one backward pass; masked: held-out accuracy with head h alone off\n\n"
           "   head   importance   share   rank   masked   accuracy lost   rank\n");
    two_key_head_importance(model, held->examples, importance);
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
     * share of the total (Michel et al. normalise the same way) compares them */
    double total = 0.0;
    for (int h = 0; h < H; h++)
        total += importance[h];
    for (int h = 0; h < H; h++)
        printf("   %4d   %10.2e   %4.1f%%   %4d   %5.1f%%   %12.1f%%   %4d\n", h, importance[h],
               total > 0.0 ? 100.0 * importance[h] / total : 0.0, rank_i[h], 100.0 * masked[h],
               100.0 * lost[h], rank_l[h]);
    printf("   (share: of the heads' total importance; rank 1 = least important, or least\n"
           "   missed)\n\n");
    print_order("   least important first:     ", by_importance, H);
    print_order("   least missed when masked:  ", by_loss, H);
    printf("\n");
    check_one_slope(model, held->examples, by_importance[H - 1]);
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

/* The fewest heads kept whose accuracy stays within one point of all H,
 * pruning along curve (k masked -> curve[k]). */
static int fewest_heads(const double *curve, int H)
{
    int k = 0;
    while (k < H && curve[k + 1] >= curve[0] - 0.01)
        k++;
    return H - k;
}

static int part3_pruning(const Options *opt, const TwoKeyModel *model, const HeldOut *held,
                         const double *importance)
{
    const int H = model->num_heads;
    int least_first[MAX_HEADS] = {0}, most_first[MAX_HEADS] = {0}, order[MAX_HEADS] = {0};
    argsort(importance, least_first, H);
    for (int i = 0; i < H; i++)
        most_first[i] = least_first[H - 1 - i];
    double by_least[MAX_HEADS + 1], by_most[MAX_HEADS + 1], random[MAX_HEADS + 1] = {0};
    double one_order[MAX_HEADS + 1];
    pruning_curve(model, held, least_first, by_least);
    pruning_curve(model, held, most_first, by_most);
    Rng rng = rng_use(opt->seed, RNG_ORDERS);
    for (int r = 0; r < opt->orders; r++) {
        rng_permutation(&rng, order, H);
        pruning_curve(model, held, order, one_order);
        for (int k = 0; k <= H; k++)
            random[k] += one_order[k] / opt->orders;
    }
    printf("Part 3. Pruning one head at a time: held-out accuracy against heads kept\n\n"
           "   heads kept   least important first   most important first   random (mean of %d)\n",
           opt->orders);
    for (int k = 0; k <= H; k++)
        printf("   %10d   %20.1f%%   %19.1f%%   %17.1f%%\n", H - k, 100.0 * by_least[k],
               100.0 * by_most[k], 100.0 * random[k]);
    printf("\n   fewest heads kept within one point of all %d: %d least important first, "
           "%d most\n   important first, %d on the random orders' mean\n", H,
           fewest_heads(by_least, H), fewest_heads(by_most, H), fewest_heads(random, H));
    if (opt->plot_dir == NULL)
        return 0;
    Tensor *xs = tensor_zeros(SHAPE(H + 1)), *ys = tensor_zeros(SHAPE(3, H + 1));
    for (int k = 0; k <= H; k++) {
        xs->data[k] = (float)(H - k);
        AT2(ys, 0, k) = (float)(100.0 * by_least[k]);
        AT2(ys, 1, k) = (float)(100.0 * by_most[k]);
        AT2(ys, 2, k) = (float)(100.0 * random[k]);
    }
    const char *titles[3] = {"least important first", "most important first", "random order"};
    const int status = plot_curves(opt->plot_dir, "head_pruning", xs, ys, "heads kept",
                                   "held-out accuracy (%)", titles, false);
    if (status == 0)
        printf("\nwrote %s/head_pruning.dat and %s/head_pruning.gp (render: gnuplot "
               "%s/head_pruning.gp)\n", opt->plot_dir, opt->plot_dir, opt->plot_dir);
    tensor_free(xs);
    tensor_free(ys);
    return status == 0 ? 0 : 1;
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
    TwoKeyModel *model = NULL;
    if (opt.from_dir != NULL) {
        model = load(&opt);
    } else {
        Task task = task_two_keys(opt.pairs, opt.countries, opt.countries);
        model = train(&opt, &task);
    }
    if (model == NULL)
        return 1;
    Task task = task_two_keys(opt.pairs, model->key_vocab, model->value_vocab);
    HeldOut held = {task_batch_new(&task, opt.examples), NULL};
    Rng held_out_rng = rng_use(opt.seed, RNG_HELDOUT);
    task_draw(&task, held.examples, SPLIT_HELDOUT, &held_out_rng);
    held.heads = two_key_heads(model, held.examples);

    int status = check_finite(model, &held);
    if (status == 0)
        part1_model(&opt, model, &held);
    if (status == 0 && opt.to_dir != NULL)
        status = save(&opt, model);
    if (status == 0) {
        double importance[MAX_HEADS] = {0}, lost[MAX_HEADS] = {0};
        part2_importance(model, &held, importance, lost);
        status = part3_pruning(&opt, model, &held, importance);
    }
    tensor_free(held.heads);
    task_batch_free(held.examples);
    two_key_free(model);
    return status;
}
