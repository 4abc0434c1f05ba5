/*
 * tasks.c - seeded generators of task examples (introduced in chapter 05's
 * optional section "Attention that learns"; the two-key task and reversal
 * in chapters 05 and 06's optional sections). See tasks.h.
 *
 * Legend: B = batch_size, P = num_pairs, Q = query words, A = answer words,
 * T = tokens of a sequence.
 */
#include "learn/tasks.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "memory.h"

/* Countries and their capitals, one word each. The lists are only the
 * vocabularies: an example pairs them at random, so "Japan: Lima" is as
 * likely as "Japan: Tokyo". */
static const char *const COUNTRIES[TASK_MAX_COUNTRIES] = {
    "Japan",   "France",  "Peru",    "Kenya",   "Chile",    "Egypt",    "Spain",    "Italy",
    "Brazil",  "Canada",  "Norway",  "Sweden",  "Greece",   "Poland",   "Cuba",     "Ghana",
    "Nepal",   "Iran",    "Mali",    "Fiji",    "Oman",     "Qatar",    "Turkey",   "Russia",
    "China",   "Vietnam", "Austria", "Hungary", "Portugal", "Ireland",  "Germany",  "Finland",
    "Denmark", "Colombia", "Ecuador", "Morocco", "Senegal", "Thailand", "Australia", "Iraq",
};
static const char *const CAPITALS[TASK_MAX_COUNTRIES] = {
    "Tokyo",   "Paris",   "Lima",    "Nairobi", "Santiago", "Cairo",    "Madrid",   "Rome",
    "Brasilia", "Ottawa", "Oslo",    "Stockholm", "Athens", "Warsaw",   "Havana",   "Accra",
    "Kathmandu", "Tehran", "Bamako", "Suva",    "Muscat",   "Doha",     "Ankara",   "Moscow",
    "Beijing", "Hanoi",   "Vienna",  "Budapest", "Lisbon",  "Dublin",   "Berlin",   "Helsinki",
    "Copenhagen", "Bogota", "Quito", "Rabat",   "Dakar",    "Bangkok",  "Canberra", "Baghdad",
};
static const char *const LETTERS[TASK_MAX_LETTERS] = {
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
    "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
};

Task task_dictionary(int num_pairs, int key_vocab, int value_vocab)
{
    if (num_pairs < 1 || key_vocab < num_pairs || value_vocab < num_pairs ||
        key_vocab > TASK_MAX_COUNTRIES || value_vocab > TASK_MAX_COUNTRIES)
        die("num_pairs %d needs vocabularies from num_pairs to %d words, "
            "got %d keys and %d values", num_pairs, TASK_MAX_COUNTRIES, key_vocab, value_vocab);
    return (Task){
        .kind = TASK_DICTIONARY,
        .name = "dictionary",
        .num_pairs = num_pairs,
        .num_queries = 1,
        .num_answers = 1,
        .key_vocab = key_vocab,
        .value_vocab = value_vocab,
        .key_words = COUNTRIES,
        .value_words = CAPITALS,
    };
}

Task task_two_keys(int num_pairs, int key_vocab, int value_vocab)
{
    if (num_pairs < 2)
        die("a query names two of the entries: num_pairs must be at "
            "least 2, got %d", num_pairs);
    /* the dictionary task's vocabularies and checks, with two query words */
    Task task = task_dictionary(num_pairs, key_vocab, value_vocab);
    task.kind = TASK_TWO_KEYS;
    task.name = "two keys";
    task.num_queries = 2;
    task.num_answers = 2;
    return task;
}

Task task_reversal(int length, int vocab)
{
    if (length < 2 || vocab < length || vocab > TASK_MAX_LETTERS)
        die("length %d needs a vocabulary from length to %d letters, got %d",
            length, TASK_MAX_LETTERS, vocab);
    return (Task){
        .kind = TASK_REVERSAL,
        .name = "reversal",
        .num_pairs = length,
        .num_queries = length,
        .num_answers = length,
        .key_vocab = vocab,
        .value_vocab = vocab,
        .key_words = LETTERS,
        .value_words = LETTERS,
    };
}

TaskBatch *task_batch_new(const Task *task, int batch_size)
{
    if (batch_size < 1)
        die("batch_size must be at least 1, got %d", batch_size);
    TaskBatch *batch = checked_calloc(1, sizeof *batch);
    const size_t B = (size_t)batch_size;
    batch->batch_size = batch_size;
    batch->num_pairs = task->num_pairs;
    batch->num_queries = task->num_queries;
    batch->num_answers = task->num_answers;
    batch->keys = checked_calloc(B * task->num_pairs, sizeof(int));
    batch->values = checked_calloc(B * task->num_pairs, sizeof(int));
    batch->queries = checked_calloc(B * task->num_queries, sizeof(int));
    batch->answers = checked_calloc(B * task->num_answers, sizeof(int));
    return batch;
}

void task_batch_free(TaskBatch *batch)
{
    if (batch == NULL)
        return;
    free(batch->keys);
    free(batch->values);
    free(batch->queries);
    free(batch->answers);
    free(batch);
}

TaskBatch *task_batch_example(const TaskBatch *batch, int b)
{
    if (b < 0 || b >= batch->batch_size)
        die("example %d of a batch of %d", b, batch->batch_size);
    const int P = batch->num_pairs, Q = batch->num_queries, A = batch->num_answers;
    TaskBatch *one = checked_calloc(1, sizeof *one);
    *one = (TaskBatch){.batch_size = 1, .num_pairs = P, .num_queries = Q, .num_answers = A};
    one->keys = checked_malloc((size_t)P, sizeof(int));
    one->values = checked_malloc((size_t)P, sizeof(int));
    one->queries = checked_malloc((size_t)Q, sizeof(int));
    one->answers = checked_malloc((size_t)A, sizeof(int));
    memcpy(one->keys, batch->keys + (size_t)b * P, (size_t)P * sizeof(int));
    memcpy(one->values, batch->values + (size_t)b * P, (size_t)P * sizeof(int));
    memcpy(one->queries, batch->queries + (size_t)b * Q, (size_t)Q * sizeof(int));
    memcpy(one->answers, batch->answers + (size_t)b * A, (size_t)A * sizeof(int));
    return one;
}

/* out[0..count): count different words out of [0, vocab), in random order:
 * the first count entries of a partial Fisher-Yates shuffle. */
static void draw_distinct(Rng *rng, int *out, int count, int vocab, int *scratch)
{
    for (int i = 0; i < vocab; i++)
        scratch[i] = i;
    for (int i = 0; i < count; i++) {
        int j = i + (int)rng_below(rng, (uint32_t)(vocab - i));
        int tmp = scratch[i];
        scratch[i] = scratch[j];
        scratch[j] = tmp;
        out[i] = scratch[i];
    }
}

/* One dictionary example: keys (P,), values (P,), query (1,), answer (1,). */
static void draw_dictionary(const Task *task, Rng *rng, int *keys, int *values, int *query,
                            int *answer, int *scratch)
{
    const int P = task->num_pairs;
    draw_distinct(rng, keys, P, task->key_vocab, scratch);
    draw_distinct(rng, values, P, task->value_vocab, scratch);
    const int asked = (int)rng_below(rng, (uint32_t)P);   /* the entry the query names */
    query[0] = keys[asked];
    answer[0] = values[asked];
}

/* One two-key example: keys (P,), values (P,), query (2,), answer (2,). */
static void draw_two_keys(const Task *task, Rng *rng, int *keys, int *values, int *query,
                          int *answer, int *scratch)
{
    const int P = task->num_pairs;
    draw_distinct(rng, keys, P, task->key_vocab, scratch);
    draw_distinct(rng, values, P, task->value_vocab, scratch);
    /* the two entries the query names, different and in random order */
    int asked[2];
    draw_distinct(rng, asked, 2, P, scratch);
    for (int i = 0; i < 2; i++) {
        query[i] = keys[asked[i]];
        answer[i] = values[asked[i]];
    }
}

/* One reversal example: the sequence (T,) is the keys, the values and the
 * queries; the answers (T,) are it reversed. */
static void draw_reversal(const Task *task, Rng *rng, int *keys, int *values, int *query,
                          int *answer, int *scratch)
{
    const int T = task->num_pairs;
    draw_distinct(rng, keys, T, task->key_vocab, scratch);
    for (int t = 0; t < T; t++) {
        values[t] = keys[t];
        query[t] = keys[t];
        answer[T - 1 - t] = keys[t];   /* the mirrored position */
    }
}

void task_draw(const Task *task, TaskBatch *batch, TaskSplit split, Rng *rng)
{
    const int P = task->num_pairs, Q = task->num_queries, A = task->num_answers;
    if (batch->num_pairs != P || batch->num_queries != Q || batch->num_answers != A)
        die("the batch was made for %d pairs, %d query and %d answer words; the %s "
            "task has %d, %d and %d", batch->num_pairs, batch->num_queries,
            batch->num_answers, task->name, P, Q, A);
    const int vocab = task->key_vocab > task->value_vocab ? task->key_vocab : task->value_vocab;
    int *scratch = checked_malloc((size_t)vocab, sizeof(int));
    for (int b = 0; b < batch->batch_size; b++) {
        int *keys = batch->keys + (size_t)b * P, *values = batch->values + (size_t)b * P;
        int *query = batch->queries + (size_t)b * Q, *answer = batch->answers + (size_t)b * A;
        do {   /* about two draws per example: half of all examples are in each split */
            switch (task->kind) {
            case TASK_DICTIONARY:
                draw_dictionary(task, rng, keys, values, query, answer, scratch);
                break;
            case TASK_TWO_KEYS:
                draw_two_keys(task, rng, keys, values, query, answer, scratch);
                break;
            case TASK_REVERSAL:
                draw_reversal(task, rng, keys, values, query, answer, scratch);
                break;
            }
        } while (task_split_of(batch, b) != split);
    }
    free(scratch);
}

TaskBatch *task_examples(const Task *task, int n, TaskSplit split, uint64_t seed)
{
    TaskBatch *examples = task_batch_new(task, n);
    Rng rng = rng_use(seed, split == SPLIT_TRAIN ? RNG_BATCHES : RNG_HELDOUT);
    task_draw(task, examples, split, &rng);
    return examples;
}

/* FNV-1a over the example's numbers, in a fixed order. */
static uint64_t fnv1a_ints(uint64_t hash, const int *xs, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t x = (uint32_t)xs[i];
        for (int byte = 0; byte < 4; byte++) {
            hash ^= (x >> (8 * byte)) & 0xffu;
            hash *= 1099511628211ULL;
        }
    }
    return hash;
}

uint64_t task_example_hash(const TaskBatch *batch, int b)
{
    const int P = batch->num_pairs, Q = batch->num_queries, A = batch->num_answers;
    uint64_t hash = 14695981039346656037ULL;
    hash = fnv1a_ints(hash, batch->keys + (size_t)b * P, P);
    hash = fnv1a_ints(hash, batch->values + (size_t)b * P, P);
    hash = fnv1a_ints(hash, batch->queries + (size_t)b * Q, Q);
    hash = fnv1a_ints(hash, batch->answers + (size_t)b * A, A);
    /* FNV-1a's lowest bit is only the parity of the ids' lowest bits; the
     * finaliser of MurmurHash3 (fmix64) spreads every input bit over all 64 */
    hash ^= hash >> 33;
    hash *= 0xff51afd7ed558ccdULL;
    hash ^= hash >> 33;
    hash *= 0xc4ceb9fe1a85ec53ULL;
    hash ^= hash >> 33;
    return hash;
}

TaskSplit task_split_of(const TaskBatch *batch, int b)
{
    return (TaskSplit)(task_example_hash(batch, b) >> 63);
}

void task_print_example(FILE *out, const Task *task, const TaskBatch *batch, int b)
{
    const int P = batch->num_pairs, Q = batch->num_queries;
    const int *keys = batch->keys + (size_t)b * P, *values = batch->values + (size_t)b * P;
    const int *query = batch->queries + (size_t)b * Q;
    fputc('{', out);
    for (int i = 0; i < P; i++)
        fprintf(out, "%s%s: %s", i ? ", " : "", task->key_words[keys[i]],
                task->value_words[values[i]]);
    fputs("}  query", out);   /* two spaces: the query stands apart */
    for (int i = 0; i < Q; i++)
        fprintf(out, " %s", task->key_words[query[i]]);
}

void task_print_sequence(FILE *out, const Task *task, const int *tokens, int length)
{
    for (int t = 0; t < length; t++)
        fprintf(out, "%s%s", t ? " " : "", task->key_words[tokens[t]]);
}
