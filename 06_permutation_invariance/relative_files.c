/*
 * relative_files - RoPE or ALiBi attention on heads read from .npy files,
 * for comparing with PyTorch (chapter 06's page relative_positions.md,
 * "Checked against PyTorch").
 *
 *   relative_files --from DIR --to DIR --positions rope [--causal] [--offset S]
 *
 * reads DIR/queries.npy, keys.npy, values.npy, each (B, H, T, d), and
 * writes scores.npy (after the positions, before the mask), weights.npy
 * and output.npy. Without arguments it prints its --help.
 * relative_positions links this file and runs its --from and --to command
 * lines through relative_files_main in its own process (CLI_MODE in
 * common/io/cli.h), under relative_positions' name.
 *
 * Legend: B = batch_size, H = num_heads, T = tokens, d = head size.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "io/cli.h"
#include "run/layer_files.h"
#include "position_attention.h"
#include "rope.h"
#include "tensor.h"

typedef struct {
    const char *prog;   /* "relative_files", or the name of the program that ran it */
    const char *from_dir, *to_dir, *positions;
    int offset;
    bool causal;
    HeadPositions how;
} Options;

/* DIR/queries, keys, values.npy (B, H, T, d) -> in[3] as (B*H, T, d), and
 * shape (B, H, T, d); 0, or 1 with the one line printed and in[] freed. An
 * --offset that the tokens carry past the last position is a usage error:
 * exit 2. */
static int load_heads(const Options *opt, Tensor *in[3], int shape[4])
{
    char err[LAYER_FILES_ERR_LEN];
    int status = layer_files_load_heads(opt->from_dir, in, err, sizeof err) != 0
                     ? fail("%s", err) : 0;
    if (status == 0)
        memcpy(shape, in[0]->shape, 4 * sizeof *shape);
    if (status == 0 && opt->how == HEAD_POSITIONS_ROPE && shape[3] % 2 != 0)
        status = fail("RoPE turns pairs of columns: the head size (the last dimension of "
                      "%s/queries.npy) must be even, got %d", opt->from_dir, shape[3]);
    const long long last = status == 0 ? (long long)opt->offset + shape[2] - 1 : 0;
    const bool too_far = status == 0 && last >= ROPE_MAX_POSITION;
    if (status != 0 || too_far)
        TENSOR_FREE(in[0], in[1], in[2]);
    if (too_far)
        cli_fail(opt->prog, "--offset %d with %d tokens reaches position %lld; positions must "
                 "stay below 2^24 = %d, where float32 stops holding every integer",
                 opt->offset, shape[2], last, ROPE_MAX_POSITION);
    if (status != 0)
        return status;
    for (int i = 0; i < 3; i++)
        tensor_reshape(in[i], SHAPE(shape[0] * shape[1], shape[2], shape[3]));
    return 0;
}

/* The three results, each checked finite, written to --to as one set;
 * 0 or 1. */
static int save_results(const Options *opt, const NamedTensor set[3])
{
    for (int i = 0; i < 3; i++)
        if (tensor_first_non_finite(set[i].tensor) < set[i].tensor->size)
            return fail("the %s are not finite: the inputs in %s are too large "
                        "for float32", set[i].name, opt->from_dir);
    char err[LAYER_FILES_ERR_LEN];
    if (layer_files_save(opt->to_dir, set, 3, err, sizeof err) != 0)
        return fail("%s", err);
    return 0;
}

/* (B*H, T, d) x3 -> DIR/scores.npy, weights.npy, output.npy */
static int run_files(const Options *opt)
{
    Tensor *in[3];
    int shape[4];
    int status = load_heads(opt, in, shape);
    if (status != 0)
        return status;
    const int B = shape[0], H = shape[1], T = shape[2], d = shape[3];
    const PositionAttention how = {opt->how, H, opt->offset, opt->causal};
    Tensor *scores = NULL, *weights = NULL, *output = position_attention_forward(
        &how, in[0], in[1], in[2], &scores, &weights, NULL);
    tensor_reshape(scores, SHAPE(B, H, T, T));
    tensor_reshape(weights, SHAPE(B, H, T, T));
    tensor_reshape(output, SHAPE(B, H, T, d));
    const NamedTensor set[3] = {{"scores", scores, NULL}, {"weights", weights, NULL},
                                {"output", output, NULL}};
    status = save_results(opt, set);
    if (status == 0)
        printf("%s positions%s, S = %d, (B, H, T, d) = (%d, %d, %d, %d)\n"
               "wrote %s/scores.npy (B, H, T, T), weights.npy (B, H, T, T), "
               "output.npy (B, H, T, d)\n", opt->positions, opt->causal ? ", causal" : "",
               opt->offset, B, H, T, d, opt->to_dir);
    TENSOR_FREE(in[0], in[1], in[2], scores, weights, output);
    return status;
}

/* --from, --to and --positions are needed; the checks that take two
 * options, in relative_positions' old order, so its messages stay. */
static void check_options(Options *opt)
{
    if (opt->from_dir == NULL)
        cli_fail(opt->prog, opt->to_dir != NULL || opt->positions != NULL || opt->causal
                                ? "--to, --positions and --causal go with --from DIR"
                                : "--from DIR is needed: where queries, keys, values.npy are");
    if (opt->to_dir == NULL)
        cli_fail(opt->prog, "--from needs --to DIR, where the results go");
    if (opt->positions == NULL)
        cli_fail(opt->prog, "--from needs --positions none, rope or alibi");
    const char *names[3] = {"none", "rope", "alibi"};
    for (int p = 0; p < 3; p++)
        if (strcmp(opt->positions, names[p]) == 0) {
            opt->how = (HeadPositions)p;
            return;
        }
    cli_fail(opt->prog, "--positions '%s': expected none, rope or alibi", opt->positions);
}

/* The tool's entry: its own program's, and relative_positions' --from. */
int relative_files_main(int argc, char **argv)
{
    Options opt = {.prog = program_name("relative_files")};
    const CliOption options[] = {
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "read queries, keys, values.npy (B, H, T, d)"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "write scores, weights, output.npy"},
        {"--positions", CLI_STRING, &opt.positions, .metavar = "P",
         .help = "none, rope or alibi"},
        {"--causal", CLI_FLAG, &opt.causal, .help = "query i sees keys j <= i"},
        {"--offset", CLI_INT, &opt.offset, .min = 0, .max = ROPE_MAX_POSITION, .metavar = "S",
         .help = "the first position"},
    };
    const CliTable table = {opt.prog, "RoPE or ALiBi attention on heads from .npy files, as "
                            "PyTorch would compute it.", CLI_COUNT(options), options};
    const int done = cli_parse(&table, argc, argv);
    if (done != CLI_RUN)
        return done;
    if (argc == 1) {   /* a tool has no built-in example: it says what it takes */
        cli_print_help(&table, stdout);
        return 0;
    }
    check_options(&opt);
    return run_files(&opt);
}

/* The tool as a program of its own; relative_positions links this file
 * built with -DTOOL_AS_MODE, without this main (see the Makefile). */
#ifndef TOOL_AS_MODE
int main(int argc, char **argv)
{
    return relative_files_main(argc, argv);
}
#endif
