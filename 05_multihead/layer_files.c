/*
 * 05_multihead/layer_files - the multi-head layer as .npy files: run a
 * layer whose inputs and weights are files (for instance a PyTorch
 * nn.MultiheadAttention, compared with PyTorch's results), or write the
 * layer of multihead's Part 3 as such files.
 *
 * multihead runs this tool's code as its file mode (CLI_MODE in
 * common/io/cli.h): the program links this file and calls layer_files_main,
 * so `multihead --from DIR --heads H` and `multihead --to DIR` run here, in
 * multihead's process, and their lines start with "multihead:".
 *
 *   --from DIR --heads H [--to OUT] [--plot DIR]
 *       the layer of DIR's files, checked against DIR/expected_*.npy;
 *       its results written into OUT (common/run/layer_files.h)
 *   --to DIR [sizes, --valid-lens, --bias, --dropout, --train, --seed]
 *       the layer of multihead's Part 3 on its random inputs, built by the
 *       same function (multihead_example.h), so the same numbers for the
 *       same options, written for --from to read
 *
 * Legend: B = batch_size, T = num_queries, K = num_keys (key-value pairs),
 * H = num_heads, D = num_hiddens, d = D / H.
 */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "heads.h"
#include "io/cli.h"
#include "run/layer_files.h"
#include "multihead.h"
#include "multihead_example.h"
#include "random.h"
#include "tensor.h"
#include "valid_lens.h"

enum { MAX_BATCH = 64 };

/* The program's name in every line: "multihead" when multihead runs this
 * mode, else "layer_files" (program_name, error.h). */
static const char *PROG = "layer_files";

typedef struct {
    MultiheadExampleSizes example;           /* --to's layer and inputs */
    bool train;
    const char *valid_lens_text;             /* NULL: d2l's [3, 2] */
    const char *from_dir, *to_dir, *plot_dir;
    bool heads_given, example_flags;         /* example_flags: one of Part 3's options given */
} Options;

/* The run's files into dir as one set (layer_files_save_run): 0, or 1. */
static int save_run(const char *dir, const LayerFiles *inputs, const LayerResults *results)
{
    char err[LAYER_FILES_ERR_LEN];
    return layer_files_save_run(dir, inputs, results, err, sizeof err) != 0 ? fail("%s", err) : 0;
}

/* --to and --plot, each written whatever becomes of the other (a failed
 * one says so in its own line): 0, or the exit status. */
static int save_and_plot(const Options *opt, const LayerFiles *inputs,
                         const LayerResults *results)
{
    const int saved = opt->to_dir ? save_run(opt->to_dir, inputs, results) : 0;
    const int plotted = opt->plot_dir
                            ? layer_files_plot_multihead(opt->plot_dir, results->attention_weights)
                            : 0;
    return saved != 0 ? saved : plotted;
}

/* ---- --from: a layer from .npy files ------------------------------------------------ */

/* The layer of files, its results checked (within memory and finite by
 * multihead_checked_run, then against expected_*.npy), then plotted and written. */
static int run_from_files(const Options *opt, const LayerFiles *files)
{
    char err[LAYER_FILES_ERR_LEN];
    LayerResults results;
    if (multihead_checked_run(&files->layer, files->queries, files->keys, files->values,
                              files->valid_lens, files->grad_output, &results, err,
                              sizeof err) != 0)
        return fail("%s", err);
    printf("Part 4. A layer from .npy files\n\n");
    layer_files_print(opt->from_dir, files);
    tensor_print_named("output", results.output);
    tensor_print_named("attention_weights", results.attention_weights);
    printf("\n");
    if (files->grad_output != NULL)
        layer_gradients_print(&results.grads);

    /* float32 sums taken in another order agree with PyTorch to about 1e-6 */
    const int verdict = layer_files_check_results(opt->from_dir, &results, 1e-5f, 1e-5f, err,
                                                  sizeof err);
    int status = verdict < 0 ? fail("%s", err) : 0;
    if (status == 0 && verdict > 0) {   /* a failed check replaces no previous result */
        status = fail("the results differ from the expected_*.npy files in %s%s",
                      opt->from_dir, opt->plot_dir || opt->to_dir ? "; nothing was written"
                                                                  : "");
    }
    /* into another directory the inputs go too, so that it holds one whole run */
    const bool same = opt->to_dir && layer_files_same_dir(opt->from_dir, opt->to_dir);
    if (status == 0)
        status = save_and_plot(opt, same ? NULL : files, &results);
    layer_results_free(&results);
    return status;
}

static int layer_from_files(const Options *opt)
{
    LayerFiles files;
    char err[LAYER_FILES_ERR_LEN];
    const int status = layer_files_load(opt->from_dir, opt->example.heads, &files, err, sizeof err) != 0
                           ? fail("%s", err)
                           : run_from_files(opt, &files);
    layer_files_free(&files);
    return status;
}

/* ---- --to alone: multihead's Part 3 as files ---------------------------------------- */

/* multihead's Part 3: its example (multihead_example.h), run, plotted
 * and written with its inputs. */
static int write_part3(const Options *opt, MultiheadExample *ex, ValidLens *valid_lens)
{
    Tensor *weights = NULL;
    Tensor *output = multihead_forward(ex->layer, ex->X, ex->Y, ex->Y, valid_lens, opt->train,
                                       &ex->rng, &weights);
    const LayerFiles inputs = layer_files_borrow(ex->layer, ex->X, ex->Y, ex->Y, valid_lens);
    const int status = save_and_plot(opt, &inputs, &(LayerResults){output, weights, {0}});
    if (status == 0)
        printf("%s also holds the inputs and parameters: run it again with\n"
               "  %s --from %s --heads %d\n", opt->to_dir, PROG, opt->to_dir,
               opt->example.heads);
    TENSOR_FREE(output, weights);
    return status;
}

/* The mask of Part 3: --valid-lens, 'none' (NULL), or d2l's [3, 2] when
 * it fits and otherwise every key of every sequence. */
static ValidLens *read_valid_lens(const Options *opt)
{
    const char *text = opt->valid_lens_text;
    const int B = opt->example.batch, K = opt->example.keys;
    if (text && strcmp(text, "none") == 0)
        return NULL;
    long given[MAX_BATCH] = {3, 2};
    char err[CLI_ERR_LEN];
    const int n = text ? cli_read_long_list("--valid-lens", text, 0, K, given, MAX_BATCH, err,
                                            sizeof err) : B;
    if (n < 0)
        cli_fail(PROG, "%s", err);
    if (n != B)
        cli_fail(PROG, "--valid-lens needs %d lengths (one per sequence), got %d", B, n);
    int lens[MAX_BATCH];
    for (int b = 0; b < n; b++)
        lens[b] = text || (n == 2 && K >= 3) ? (int)given[b] : K;
    return valid_lens_1d(lens, n);
}

static int layer_to_files(const Options *opt)
{
    const MultiheadExampleSizes *s = &opt->example;
    ValidLens *valid_lens = read_valid_lens(opt);
    MultiheadExample ex = multihead_example_new(s);
    char err[LAYER_FILES_ERR_LEN];
    const int status = multihead_check_memory(ex.layer, s->batch, s->queries, s->keys, false,
                                              err, sizeof err) != 0
                           ? fail("%s", err)
                           : write_part3(opt, &ex, valid_lens);
    valid_lens_free(valid_lens);
    multihead_example_free(&ex);
    return status;
}

/* ---- the command line --------------------------------------------------------------- */

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.example = MULTIHEAD_EXAMPLE_D2L};
    MultiheadExampleSizes *s = &opt.example;
    bool *part3 = &opt.example_flags;   /* Part 3's options: --from refuses them */
    const CliOption options[] = {
        {"--batch", CLI_INT, &s->batch, .min = 1, .max = MAX_BATCH, .metavar = "B",
         .help = "sequences", .given = part3},
        {"--queries", CLI_INT, &s->queries, .min = 1, .max = 256, .metavar = "T",
         .help = "queries per sequence", .given = part3},
        {"--keys", CLI_INT, &s->keys, .min = 1, .max = 256, .metavar = "N",
         .help = "key-value pairs per sequence", .given = part3},
        {"--hiddens", CLI_INT, &s->hiddens, .min = 1, .max = 1024, .metavar = "D",
         .help = "num_hiddens", .given = part3},
        {"--heads", CLI_INT, &s->heads, .min = 1, .max = 1024, .metavar = "H",
         .help = "num_heads, must divide D; needed with --from", .given = &opt.heads_given},
        {"--valid-lens", CLI_STRING, &opt.valid_lens_text, .metavar = "L", .given = part3,
         .help = "B comma-separated lengths from 0 to --keys, or 'none'",
         .default_text = "3,2 as d2l;\n--keys for every sequence at other sizes"},
        {"--bias", CLI_FLAG, &s->bias, .help = "give the four projections biases",
         .given = part3},
        {"--dropout", CLI_FLOAT, &s->dropout, CLI_DROPOUT_RANGE,
         .help = "dropout on the attention weights", .given = part3},
        {"--train", CLI_FLAG, &opt.train, .help = "training mode: dropout acts", .given = part3},
        {"--seed", CLI_U64, &s->seed, .metavar = "N",
         .help = "seed for Part 3's parameters and inputs"},
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "queries, keys, values, W_q ... W_o, optional b_q ... b_o\n"
                 "and valid_lens as DIR/NAME.npy; compared with DIR/expected_*.npy;\n"
                 "with DIR/grad_output.npy (B, T, D) the backward runs too"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "write output.npy and attention_weights.npy into DIR, and for\n"
                 "Part 3's layer its inputs and parameters too, for --from;\n"
                 "with grad_output.npy also grad_queries.npy ... grad_b_o.npy"},
        {"--plot", CLI_DIR, &opt.plot_dir, .metavar = "DIR",
         .help = "write the per-head weights as DIR/multihead_weights.{dat,gp}"},
    };
    static const char summary[] =
        "The multi-head layer as .npy files: with --from, a layer whose inputs and\n"
        "weights are files, compared with PyTorch's results; with --to alone, the layer\n"
        "of multihead's Part 3 and its random inputs, written for --from to read.";
    *done = cli_parse(&(CliTable){PROG, summary, CLI_COUNT(options), options}, argc, argv);
    return opt;
}

/* Checks that involve two options. */
static void check_options(const Options *opt)
{
    if (opt->from_dir == NULL && opt->to_dir == NULL && opt->example_flags)
        cli_fail(PROG, "--batch, --queries and --keys size the layer that --to DIR writes; "
                 "give --to DIR too (the story keeps d2l's sizes)");
    if (opt->from_dir == NULL && opt->to_dir == NULL)
        cli_fail(PROG, "give --from DIR (a layer from .npy files) or --to DIR (try --help)");
    if (opt->from_dir && !opt->heads_given)
        cli_fail(PROG, "--from needs --heads H: the number of heads the weights were made for");
    if (opt->from_dir && opt->example_flags)
        cli_fail(PROG, "--from takes its sizes, biases and mask from the files; drop --batch, "
                 "--queries, --keys, --hiddens, --valid-lens, --bias, --dropout and --train");
    char why[CLI_ERR_LEN];
    if (!opt->from_dir && !heads_split(opt->example.hiddens, opt->example.heads, "--hiddens",
                                       "--heads", why, sizeof why))
        cli_fail(PROG, "%s", why);
}

/* The tool's entry: its own program's, and multihead's --from and --to. */
int layer_files_main(int argc, char **argv)
{
    PROG = program_name("layer_files");
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    check_options(&opt);
    return opt.from_dir ? layer_from_files(&opt) : layer_to_files(&opt);
}

/* The tool as a program of its own; a program that runs it as a mode links
 * this file built with -DTOOL_AS_MODE, without this main (see the Makefile). */
#ifndef TOOL_AS_MODE
int main(int argc, char **argv)
{
    return layer_files_main(argc, argv);
}
#endif
