/*
 * decode_files - decode a layer given as .npy files, one token at a time
 * with a key-value cache (05_multihead/decoding.md, "Your own layer").
 *
 * decode's file mode as a tool of its own: decode links this file and
 * `decode --from DIR ...` calls decode_files_main in decode's process
 * (CLI_MODE in common/io/cli.h); its lines then start with "decode:".
 *
 * Legend: B = batch_size, T = tokens, H = num_heads, G = num_kv_heads,
 * D = num_hiddens, d = D / H.
 */
#include <stdint.h>
#include <stdio.h>

#include "heads.h"
#include "io/cli.h"
#include "run/layer_files.h"
#include "kv_cache.h"
#include "tensor.h"

typedef struct {
    const char *prog;
    int num_heads, num_kv_heads, capacity;
    bool num_heads_given, num_kv_heads_given;
    const char *from_dir, *to_dir;
} Options;

/* The cache fits the tokens and the memory; 0, or 1 after one line. */
static int check_capacity(const Options *opt, const Tensor *tokens, int D)
{
    const int B = tokens->shape[0], T = tokens->shape[1], H = opt->num_heads;
    const int G = opt->num_kv_heads;
    if (T > opt->capacity)
        return fail("%s/tokens.npy holds %d tokens, more than the cache's capacity "
                    "--capacity %d", opt->from_dir, T, opt->capacity);
    char err[LAYER_FILES_ERR_LEN], detail[120];
    snprintf(detail, sizeof detail, "a cache of %d tokens, B = %d, G = %d, d = %d",
             opt->capacity, B, G, D / H);
    if (memory_check(kv_cache_bytes(B, G, opt->capacity, D / H) + 4.0 * tokens->size * 4,
                     detail, "use a smaller --capacity", err, sizeof err) != 0)
        return fail("%s", err);
    return 0;
}

/* --to DIR: outputs (B, T, D) as DIR/outputs.npy; 0, or 1 after one line. */
static int save_outputs(const char *dir, const Tensor *outputs)
{
    char err[LAYER_FILES_ERR_LEN];
    const NamedTensor set[] = {{"outputs", outputs, NULL}};
    if (layer_files_save(dir, set, 1, err, sizeof err) != 0)
        return fail("%s", err);
    printf("wrote %s/outputs.npy (%d, %d, %d)\n", dir, outputs->shape[0], outputs->shape[1],
           outputs->shape[2]);
    return 0;
}

/* DIR's layer of G key-value heads decodes DIR/tokens.npy one token at a
 * time; the outputs (B, T, D) go to --to DIR/outputs.npy */
static int decode_files(const Options *opt)
{
    const char *dir = opt->from_dir;
    char err[LAYER_FILES_ERR_LEN];
    DecoderFiles files;
    int status = layer_files_load_decoder(dir, opt->num_heads, opt->num_kv_heads, &files, err,
                                          sizeof err) != 0 ? fail("%s", err) : 0;
    const Tensor *tokens = files.tokens;
    const int D = files.layer.num_hiddens;
    if (status == 0)
        status = check_capacity(opt, tokens, D);
    Tensor *outputs = status == 0 ? decode_sequence(&files.layer, tokens) : NULL;
    const size_t bad = outputs ? tensor_first_non_finite(outputs) : SIZE_MAX;
    if (bad != SIZE_MAX)
        status = fail("the outputs overflow float32 (%s at element %zu of (%d, %d, "
                      "%d)): scale the tokens or the weights down; nothing written",
                      non_finite_name(outputs->data[bad]), bad, tokens->shape[0],
                      tokens->shape[1], D);
    if (status == 0)
        printf("decoded %s/tokens.npy (%d, %d, %d) one token at a time: --heads %d, --kv-heads "
               "%d, %s biases\n", dir, tokens->shape[0], tokens->shape[1], D, opt->num_heads,
               opt->num_kv_heads, files.layer.bias ? "with" : "without");
    if (status == 0 && opt->to_dir != NULL)
        status = save_outputs(opt->to_dir, outputs);
    tensor_free(outputs);
    decoder_files_free(&files);
    return status;
}

static Options parse_options(int argc, char **argv, int *done)
{
    Options opt = {.prog = program_name("decode_files"), .num_heads = 8,
                   .num_kv_heads = 8, .capacity = 4096};
    const CliOption options[] = {
        {"--from", CLI_FROM_DIR, &opt.from_dir, .metavar = "DIR",
         .help = "decode DIR/tokens.npy (B, T, D) with W_q (D, D), W_k and W_v\n"
                 "(G*d, D), W_o (D, D) and optional b_q ... b_o, as DIR/NAME.npy"},
        {"--to", CLI_DIR, &opt.to_dir, .metavar = "DIR",
         .help = "write the outputs (B, T, D) as DIR/outputs.npy"},
        {"--heads", CLI_INT, &opt.num_heads, .min = 1, .max = 1024, .metavar = "H",
         .help = "num_heads of the layer", .given = &opt.num_heads_given},
        {"--kv-heads", CLI_INT, &opt.num_kv_heads, .min = 1, .max = 1024, .metavar = "G",
         .help = "num_kv_heads of the layer, dividing H", .given = &opt.num_kv_heads_given},
        {"--capacity", CLI_INT, &opt.capacity, .min = 1, .max = 1 << 24, .metavar = "N",
         .help = "tokens the cache holds"},
    };
    static const char summary[] =
        "Decode a layer of G key-value heads given as .npy files, one token at a time\n"
        "with a key-value cache (decode --from runs this tool).";
    *done = cli_parse(&(CliTable){opt.prog, summary, CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    if (opt.from_dir == NULL)
        cli_fail(opt.prog, "--heads, --kv-heads and --to go with --from DIR");
    if (!opt.num_heads_given || !opt.num_kv_heads_given)
        cli_fail(opt.prog, "--from needs --heads H and --kv-heads G: the sizes the weights "
                 "were made for");
    char why[CLI_ERR_LEN];
    if (!kv_heads_split(opt.num_heads, opt.num_kv_heads, "--heads", "--kv-heads", why, sizeof why))
        cli_fail(opt.prog, "%s", why);
    return opt;
}

/* The tool's entry: its own program's, and decode's --from. */
int decode_files_main(int argc, char **argv)
{
    int done;
    const Options opt = parse_options(argc, argv, &done);
    if (done != CLI_RUN)
        return done;
    return decode_files(&opt);
}

/* The tool as a program of its own; decode links this file built with
 * -DTOOL_AS_MODE, without this main (see the Makefile). */
#ifndef TOOL_AS_MODE
int main(int argc, char **argv)
{
    return decode_files_main(argc, argv);
}
#endif
