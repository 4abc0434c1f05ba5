/*
 * test_fuzz.c - the inputs in tests/fuzz/regressions/cli/ and
 * regressions/model/ replayed through the fuzz targets' own promise checks
 * (tests/fuzz/cli_promises.c, model_promises.c), so that a bug the fuzzer
 * once found stays fixed; and the hand-made inputs at the edges, each with
 * the verdict it must get. (The .npy reader's regressions are replayed by
 * tests/test_npy.c.)
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/promises.h"
#include "helpers.h"

#define REGRESSIONS "tests/fuzz/regressions/"
#define MODEL_SEEDS "tests/fuzz/model_seeds/"

/* A file's bytes in a buffer of exactly its length, as libFuzzer gives an
 * input, so that AddressSanitizer sees a read one byte past the end. */
static uint8_t *read_input(const char *path, size_t *len)
{
    char *text = read_text_file(path, len);
    cr_assert_not_null(text, "cannot read %s", path);
    uint8_t *bytes = malloc(*len > 0 ? *len : 1);
    memcpy(bytes, text, *len);
    free(text);
    return bytes;
}

/* Every file of a folder through check; returns how many there were. */
static int replay(const char *folder, const char *(*check)(const char *path))
{
    DIR *d = opendir(folder);
    cr_assert_not_null(d, "cannot list %s", folder);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s%s", folder, e->d_name);
        const char *broken = check(path);
        cr_expect_null(broken, "%s: broken promise: %s", path, broken);
        files++;
    }
    closedir(d);
    return files;
}

/* ---- the option tables -------------------------------------------------------- */

static const char *cli_check_file(const char *path)
{
    size_t len;
    uint8_t *bytes = read_input(path, &len);
    CliOutcome outcome;
    const char *broken = cli_promises(bytes, len, &outcome);
    free(bytes);
    return broken;
}

Test(fuzz, cli_regressions_keep_the_promises)
{
    cr_expect_geq(replay(REGRESSIONS "cli/", cli_check_file), 9);
}

static CliOutcome cli_outcome(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, REGRESSIONS "cli/%s", name);
    size_t len;
    uint8_t *bytes = read_input(path, &len);
    CliOutcome outcome;
    const char *broken = cli_promises(bytes, len, &outcome);
    cr_expect_null(broken, "%s: %s", name, broken);
    free(bytes);
    return outcome;
}

/* The status each edge gets, and which option its error names. */
Test(fuzz, cli_edges_get_their_verdicts)
{
    const struct {
        const char *name;
        CliStatus status;
        const char *named;   /* the error starts "fuzz_prog: <named>" */
    } edges[] = {
        {"last_option_without_value", CLI_ERROR, "--seed"},
        {"number_with_leading_space", CLI_ERROR, "--tokens"},
        {"newline_in_number", CLI_ERROR, "--seed"},
        {"newline_in_unknown_option", CLI_ERROR, "unknown option '--bo\\ngus'"},
        {"float_rounding_past_range", CLI_ERROR, "--dropout"},
        {"seed_past_2_64", CLI_ERROR, "--seed"},
        {"help_after_options", CLI_HELP, NULL},
        {"help_as_a_value", CLI_PARSED, NULL},
        {"list_with_empty_entry", CLI_PARSED, NULL},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        CliOutcome outcome = cli_outcome(edges[i].name);
        cr_expect_eq(outcome.status, edges[i].status, "%s: status %d, expected %d",
                     edges[i].name, outcome.status, edges[i].status);
        if (edges[i].named != NULL) {
            char start[96];
            snprintf(start, sizeof start, "fuzz_prog: %s", edges[i].named);
            cr_expect(strncmp(outcome.message, start, strlen(start)) == 0,
                      "%s: the error should start '%s': '%s'", edges[i].name, start,
                      outcome.message);
        }
    }
    /* "--name --help": --help is the name's value, and the list is read */
    cr_expect_eq(cli_outcome("help_as_a_value").list_count, 2);
    /* "1,,2" parses as a string and is refused by the list reader */
    cr_expect_eq(cli_outcome("list_with_empty_entry").list_count, -1);
}

/* ---- the model directory -------------------------------------------------------- */

static const char *model_check_file(const char *path)
{
    size_t len;
    uint8_t *bytes = read_input(path, &len);
    ModelOutcome outcome;
    const char *broken = model_promises(bytes, len, &outcome);
    free(bytes);
    return broken;
}

Test(fuzz, model_regressions_keep_the_promises, .fini = model_promises_cleanup)
{
    cr_expect_geq(replay(REGRESSIONS "model/", model_check_file), 7);
    cr_expect_geq(replay(MODEL_SEEDS, model_check_file), 4);
}

/* The verdict each edge gets, which file its refusal names, and the sizes
 * of an accepted model. The promise checks compare every tensor, moment,
 * step and learning rate of a refused load with a copy taken before. */
Test(fuzz, model_edges_get_their_verdicts, .fini = model_promises_cleanup)
{
    const struct {
        const char *path;
        ModelVerdict verdict;
        const char *named;   /* the refusal names DIR/<named>; "" for DIR itself */
        int vocab, hiddens, heads;
    } edges[] = {
        {REGRESSIONS "model/missing_num_heads", MODEL_REFUSED, "num_heads.npy", 0, 0, 0},
        {REGRESSIONS "model/vocabulary_of_zero", MODEL_REFUSED, "embed_keys.weight.npy", 0, 0,
         0},
        {REGRESSIONS "model/heads_do_not_divide_hiddens", MODEL_REFUSED, "", 0, 0, 0},
        {REGRESSIONS "model/readout_as_directory", MODEL_REFUSED, "readout.weight.npy", 0, 0, 0},
        {REGRESSIONS "model/batch_of_zero", MODEL_TRAINING_REFUSED, "training.npy", 2, 2, 2},
        {REGRESSIONS "model/lr_as_named_pipe", MODEL_TRAINING_REFUSED, "optimizer.lr.npy", 2, 2, 2},
        {REGRESSIONS "model/step_as_broken_link", MODEL_TRAINING_REFUSED, "optimizer.step.npy",
         2, 2, 2},
        {MODEL_SEEDS "no_training_state", MODEL_TRAINING_REFUSED, "optimizer.step.npy", 2, 2,
         2},
        {MODEL_SEEDS "v2_d2_h2", MODEL_ACCEPTED, NULL, 2, 2, 2},
        {MODEL_SEEDS "v2_d1_h1", MODEL_ACCEPTED, NULL, 2, 1, 1},
        {MODEL_SEEDS "v3_d4_h2", MODEL_ACCEPTED, NULL, 3, 4, 2},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        size_t len;
        uint8_t *bytes = read_input(edges[i].path, &len);
        ModelOutcome outcome;
        const char *broken = model_promises(bytes, len, &outcome);
        free(bytes);
        cr_expect_null(broken, "%s: %s", edges[i].path, broken);
        cr_expect_eq(outcome.verdict, edges[i].verdict, "%s: verdict %d, expected %d",
                     edges[i].path, outcome.verdict, edges[i].verdict);
        cr_expect(outcome.key_vocab == edges[i].vocab && outcome.num_hiddens == edges[i].hiddens &&
                  outcome.num_heads == edges[i].heads, "%s: sizes %d, %d, %d", edges[i].path,
                  outcome.key_vocab, outcome.num_hiddens, outcome.num_heads);
        if (edges[i].named != NULL) {
            /* after the scratch directory's name: "/<file>: " or " does not hold" */
            const char *after = strstr(outcome.message, "/model_fuzz_");
            after = after ? strpbrk(after + 1, "/ ") : NULL;
            char want[128];
            snprintf(want, sizeof want, edges[i].named[0] ? "/%s: " : " does not hold",
                     edges[i].named);
            cr_expect(after && strncmp(after, want, strlen(want)) == 0,
                      "%s: the refusal should name '%s': '%s'", edges[i].path, want,
                      outcome.message);
        }
    }
}
