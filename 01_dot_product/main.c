/*
 * 01_dot_product - a Python dictionary as hard attention, then relaxed.
 *
 * Part 1: keys, queries and values as one-hot vectors. The similarity of a
 *         query to each key is a dot product that is 1 or 0, and multiplying
 *         that row by the values picks out one value: capital["Japan"].
 * Part 2: give the words real-valued vectors. Similarities become real
 *         numbers and the answer becomes a blend of all the values.
 * Part 3: a static layer Relu(W x + b) applies the same W to every input;
 *         attention's weights are computed from the input itself.
 *
 * Legend: Q = number of queries, K = number of keys (= values), V = number
 * of distinct values, W = vocabulary size, d = embedding size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "ops.h"
#include "random.h"
#include "softmax.h"
#include "tensor.h"

static const char PROG[] = "dot_product";

/* The dictionary of the story: capital = {"Japan": "Tokyo", ...}. */
enum { NUM_KEYS = 3, VOCAB = 4, EMBED = 4, TOKENS = 3 };
static const char *const values_text[NUM_KEYS] = {"Tokyo", "Washington D.C.", "London"};
/* Every word the queries may use: the NUM_KEYS keys first, in the order of
 * values_text, then the words that are not keys. */
static const char *const vocabulary[VOCAB] = {"Japan", "USA", "British", "France"};

typedef struct {
    const char *query_word;
    uint64_t seed;
} Options;

/* "Japan, USA, British, France" into buf. */
static const char *vocabulary_list(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int w = 0; w < VOCAB && used < len; w++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", w ? ", " : "", vocabulary[w]);
    return buf;
}

static int word_index(const char *word)
{
    for (int i = 0; i < VOCAB; i++)
        if (strcmp(word, vocabulary[i]) == 0)
            return i;
    return -1;
}

/* Print "name (shape) =" and the tensor, the shape read from the tensor
 * itself so that it stays right when the dictionary grows. */
static void print_with_shape(const char *name, const Tensor *x)
{
    char shape[64], label[160];
    snprintf(label, sizeof label, "%s %s", name, shape_str(shape, sizeof shape, x->ndim, x->shape));
    tensor_print_named(label, x);
}

/* One-hot row for word i over the vocabulary: 1 at i, 0 elsewhere. */
static void one_hot(float *row, int size, int i)
{
    for (int j = 0; j < size; j++)
        row[j] = j == i ? 1.0f : 0.0f;
}

/* (rows, size): row j is one-hot at j. */
static Tensor *one_hot_rows(int rows, int size)
{
    Tensor *x = tensor_zeros(SHAPE(rows, size));
    for (int j = 0; j < rows; j++)
        one_hot(&AT2(x, j, 0), size, j);
    return x;
}

/* What the all-zero similarity row of an unmatched query becomes once
 * softmax (chapter 02) turns scores into weights: similarity (1, K),
 * values (K, V). Equal scores get equal weights, so the answer is the
 * average of the values, not zeros. */
static void unmatched_with_softmax(const Tensor *similarity, const Tensor *values)
{
    Tensor *weights = tensor_copy(similarity);
    softmax_row(weights->data, NUM_KEYS);
    Tensor *answer = matmul(weights, values);
    printf("From chapter 02 on, softmax turns the scores into weights, and equal scores\n"
           "get equal weights: the query gets the average of all the values instead.\n");
    tensor_print_named("softmax(similarity)         ", weights);
    tensor_print_named("softmax(similarity) @ values", answer);
    TENSOR_FREE(weights, answer);
}

/* Part 1: the dictionary, with 0/1 similarities. */
/* The Python dictionary and what it answers for the query word. */
static void print_dictionary(int query)
{
    printf("  capital = {");
    for (int j = 0; j < NUM_KEYS; j++)
        printf("%s\"%s\": \"%s\"", j ? ", " : "", vocabulary[j], values_text[j]);
    printf("}\n");
    if (query < NUM_KEYS)
        printf("  capital[\"%s\"]  ->  \"%s\"\n\n", vocabulary[query], values_text[query]);
    else
        printf("  capital[\"%s\"]  ->  KeyError: '%s'\n\n", vocabulary[query], vocabulary[query]);
}

/* answer (1, V): one-hot at the looked-up value, or all zeros for a word
 * that matches no key. */
static void print_lookup_verdict(int query, const Tensor *similarity, const Tensor *answer,
                                 const Tensor *values)
{
    int picked = -1;
    for (int v = 0; v < NUM_KEYS; v++)
        if (AT2(answer, 0, v) == 1.0f)
            picked = v;
    if (picked >= 0) {
        printf("The answer row is one-hot at %d: \"%s\", exactly capital[\"%s\"].\n\n",
               picked, values_text[picked], vocabulary[query]);
    } else {
        printf("The answer row is all zeros: \"%s\" matches no key, so attention returns\n"
               "nothing, where the dictionary raises KeyError.\n", vocabulary[query]);
        unmatched_with_softmax(similarity, values);
        printf("\n");
    }
}

static void part1_dictionary_as_attention(int query)
{
    printf("Part 1. A dictionary is attention with 0/1 similarities\n\n");
    print_dictionary(query);

    /* keys (K, W): one-hot over the vocabulary [Japan, USA, British, France];
     * values (K, V): one-hot over the three answers; queries (1, W): the word */
    Tensor *keys = one_hot_rows(NUM_KEYS, VOCAB);
    Tensor *values = one_hot_rows(NUM_KEYS, NUM_KEYS);
    Tensor *queries = tensor_zeros(SHAPE(1, VOCAB));
    one_hot(&AT2(queries, 0, 0), VOCAB, query);

    char words[256];
    printf("Words are one-hot vectors over the vocabulary [%s].\n",
           vocabulary_list(words, sizeof words));
    print_with_shape("keys  ", keys);
    print_with_shape("values", values);
    printf("query \"%s\":\n", vocabulary[query]);
    print_with_shape("queries", queries);

    /* similarity (1, K) = queries (1, W) @ keys^T (W, K) */
    Tensor *similarity = matmul_bt(queries, keys);
    /* answer (1, V) = similarity (1, K) @ values (K, V) */
    Tensor *answer = matmul(similarity, values);
    tensor_print_named("similarity = queries @ keys^T", similarity);
    tensor_print_named("answer = similarity @ values ", answer);

    print_lookup_verdict(query, similarity, answer, values);

    Tensor *part[] = {keys, values, queries, similarity, answer};
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++)
        tensor_free(part[i]);
}

/* Part 2: real-valued word vectors; the answer is a blend of the values. */
static void part2_real_valued_similarities(int query, Rng *rng)
{
    printf("Part 2. Relaxing the similarities to real numbers\n\n");
    /* embedding (W, d): one seeded random vector per word */
    Tensor *embedding = tensor_normal(rng, 0.0f, 1.0f, SHAPE(VOCAB, EMBED));
    /* keys (K, d) are the first K rows: the words that are keys */
    Tensor *keys = tensor_from(embedding->data, SHAPE(NUM_KEYS, EMBED));
    printf("Every word gets a vector of %d seeded random numbers; the keys are the\n"
           "vectors of the key words, one per row.\n", EMBED);
    print_with_shape("keys", keys);

    /* With queries = keys, similarity[i][j] = k_i . k_j = k_j . k_i */
    Tensor *similarity = matmul_bt(keys, keys);
    print_with_shape("similarity = keys @ keys^T", similarity);
    float asymmetry = 0.0f;
    for (int i = 0; i < NUM_KEYS; i++)
        for (int j = 0; j < NUM_KEYS; j++)
            asymmetry = fmaxf(asymmetry, fabsf(AT2(similarity, i, j) - AT2(similarity, j, i)));
    printf("With queries = keys the matrix is symmetric: max |S - S^T| = %g\n\n",
           (double)asymmetry);

    /* query (1, d): the vector of the asked word */
    Tensor *queries = tensor_from(&AT2(embedding, query, 0), SHAPE(1, EMBED));
    Tensor *scores = matmul_bt(queries, keys);   /* (1, K) */
    printf("query \"%s\":\n", vocabulary[query]);
    tensor_print_named("similarity to each key", scores);
    printf("answer = ");
    int best = 0;
    for (int j = 0; j < NUM_KEYS; j++) {
        float s = AT2(scores, 0, j);
        printf("%s%.4f * \"%s\"", j == 0 ? "" : (s < 0 ? " - " : " + "),
               (double)(j == 0 ? s : fabsf(s)), values_text[j]);
        if (s > AT2(scores, 0, best))
            best = j;
    }
    printf("\n");
    printf("Every value takes part, weighted by its key's similarity; \"%s\" weighs most.\n"
           "These weights can be negative and do not sum to 1: chapter 02 turns\n"
           "scores into proper weights with softmax.\n\n", values_text[best]);

    Tensor *part[] = {embedding, keys, similarity, queries, scores};
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++)
        tensor_free(part[i]);
}

/* The attention weights of x (TOKENS, d): x @ x^T, computed from x itself. */
static Tensor *attention_weights_of(const Tensor *x)
{
    return matmul_bt(x, x);
}

/* Part 3: a static layer against attention, on two inputs that differ only
 * in their last token. */
static void part3_fixed_versus_computed_weights(Rng *rng)
{
    printf("Part 3. Fixed weights versus weights computed from the input\n\n");
    Tensor *weight = tensor_normal(rng, 0.0f, 0.5f, SHAPE(EMBED, EMBED));
    Tensor *bias = tensor_normal(rng, 0.0f, 0.1f, SHAPE(EMBED));
    Tensor *input_a = tensor_normal(rng, 0.0f, 1.0f, SHAPE(TOKENS, EMBED));
    Tensor *input_b = tensor_copy(input_a);
    for (int p = 0; p < EMBED; p++)       /* change only the last token */
        AT2(input_b, TOKENS - 1, p) = rng_normal(rng);
    print_with_shape("input A (tokens, size)", input_a);
    tensor_print_named("input B: token 2 replaced", input_b);

    /* static: y_i = Relu(W x_i + b), token by token, W fixed */
    Tensor *static_a = linear(input_a, weight, bias);
    Tensor *static_b = linear(input_b, weight, bias);
    relu_inplace(static_a);
    relu_inplace(static_b);
    /* attention: Y = (X X^T) X, the weight matrix is made from X */
    Tensor *weights_a = attention_weights_of(input_a);
    Tensor *weights_b = attention_weights_of(input_b);
    Tensor *attend_a = matmul(weights_a, input_a);
    Tensor *attend_b = matmul(weights_b, input_b);

    printf("Static layer Relu(W x + b): the same W for both inputs.\n");
    tensor_print_named("output A", static_a);
    tensor_print_named("output B", static_b);
    printf("Attention X X^T: a new weight matrix for each input.\n");
    tensor_print_named("weights A", weights_a);
    tensor_print_named("weights B", weights_b);

    float static_change = 0.0f, attend_change = 0.0f;
    for (int p = 0; p < EMBED; p++) {
        static_change = fmaxf(static_change, fabsf(AT2(static_a, 0, p) - AT2(static_b, 0, p)));
        attend_change = fmaxf(attend_change, fabsf(AT2(attend_a, 0, p) - AT2(attend_b, 0, p)));
    }
    printf("Only token 2 changed. How much does the output of token 0 change?\n");
    printf("  static layer: %.4f   (token 0 never sees token 2)\n", (double)static_change);
    printf("  attention:    %.4f   (token 0 mixes in every token)\n", (double)attend_change);

    Tensor *part[] = {weight, bias, input_a, input_b, static_a, static_b,
                      weights_a, weights_b, attend_a, attend_b};
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++)
        tensor_free(part[i]);
}

/* The word asked for, checked against the vocabulary here: a usage error,
 * status 2, with the words that would do. */
static Options parse_options(int argc, char **argv, int *query, int *done)
{
    Options opt = {.query_word = "Japan", .seed = 0};
    const CliOption options[] = {
        {"--query", CLI_STRING, &opt.query_word, .metavar = "WORD",
         .help = "the word to look up: Japan, USA, British or France"},
        {"--seed", CLI_U64, &opt.seed, .metavar = "N",
         .help = "seed for the word vectors and the static layer"},
    };
    *done = cli_parse(&(CliTable){PROG, "A Python dictionary as attention: one-hot keys and queries, their dot\n"
                                        "products as 0/1 similarities, then real-valued word vectors.",
                                  CLI_COUNT(options), options}, argc, argv);
    if (*done != CLI_RUN)
        return opt;
    *query = word_index(opt.query_word);
    char words[256];
    if (*query < 0)
        cli_fail(PROG, "--query: '%s' is not in the vocabulary (%s)", opt.query_word,
                 vocabulary_list(words, sizeof words));
    return opt;
}

int main(int argc, char **argv)
{
    int query;
    int done;
    Options opt = parse_options(argc, argv, &query, &done);
    if (done != CLI_RUN)
        return done;
    Rng rng = rng_new(opt.seed);

    part1_dictionary_as_attention(query);
    part2_real_valued_similarities(query, &rng);
    part3_fixed_versus_computed_weights(&rng);
    return 0;
}
