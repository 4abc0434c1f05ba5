/*
 * tasks_more.c - the two-key task and sequence reversal (introduced in
 * chapters 05 and 06's optional sections). See tasks_more.h.
 *
 * Legend: B = batch_size, P = num_pairs, T = tokens of a sequence.
 */
#include "tasks_more.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static const char *const LETTERS[TASK_MAX_LETTERS] = {
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
    "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
};

Task task_two_keys(int num_pairs, int key_vocab, int value_vocab)
{
    if (num_pairs < 2)
        die("task_two_keys", "a query names two of the entries: num_pairs must be at "
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
        die("task_reversal", "length %d needs a vocabulary from length to %d letters, got %d",
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

/* Stop unless batch was made for task. */
static void check_batch(const char *func, const Task *task, const TaskBatch *batch,
                        TaskKind kind)
{
    if (task->kind != kind)
        die(func, "this function draws the %s task only, got the %s task",
            kind == TASK_TWO_KEYS ? "two keys" : "reversal", task->name);
    if (batch->num_pairs != task->num_pairs || batch->num_queries != task->num_queries ||
        batch->num_answers != task->num_answers)
        die(func, "the batch was made for %d pairs, %d query and %d answer words; the %s "
            "task has %d, %d and %d", batch->num_pairs, batch->num_queries,
            batch->num_answers, task->name, task->num_pairs, task->num_queries,
            task->num_answers);
}

/* out[0..count): count different words out of [0, vocab), in random order:
 * the first count entries of a partial Fisher-Yates shuffle (tasks.c draws
 * the same way). scratch holds vocab ints. */
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

void task_two_keys_draw(const Task *task, TaskBatch *batch, TaskSplit split, Rng *rng)
{
    const char *func = "task_two_keys_draw";
    check_batch(func, task, batch, TASK_TWO_KEYS);
    const int P = task->num_pairs;
    const int vocab = task->key_vocab > task->value_vocab ? task->key_vocab : task->value_vocab;
    int *scratch = checked_malloc(func, (size_t)vocab, sizeof(int));
    for (int b = 0; b < batch->batch_size; b++) {
        int *keys = batch->keys + (size_t)b * P, *values = batch->values + (size_t)b * P;
        int *query = batch->queries + (size_t)b * 2, *answer = batch->answers + (size_t)b * 2;
        do {   /* until the example is of the split asked for (tasks.h) */
            draw_distinct(rng, keys, P, task->key_vocab, scratch);
            draw_distinct(rng, values, P, task->value_vocab, scratch);
            /* the two entries the query names, different and in random order */
            int asked[2];
            draw_distinct(rng, asked, 2, P, scratch);
            for (int i = 0; i < 2; i++) {
                query[i] = keys[asked[i]];
                answer[i] = values[asked[i]];
            }
        } while (task_split_of(batch, b) != split);
    }
    free(scratch);
}

void task_reversal_draw(const Task *task, TaskBatch *batch, TaskSplit split, Rng *rng)
{
    const char *func = "task_reversal_draw";
    check_batch(func, task, batch, TASK_REVERSAL);
    const int T = task->num_pairs;
    int *scratch = checked_malloc(func, (size_t)task->key_vocab, sizeof(int));
    for (int b = 0; b < batch->batch_size; b++) {
        const size_t row = (size_t)b * T;
        do {
            draw_distinct(rng, batch->keys + row, T, task->key_vocab, scratch);
            for (int t = 0; t < T; t++) {
                const int token = batch->keys[row + t];
                batch->values[row + t] = token;
                batch->queries[row + t] = token;
                batch->answers[row + (T - 1 - t)] = token;   /* the mirrored position */
            }
        } while (task_split_of(batch, b) != split);
    }
    free(scratch);
}

TaskBatch *task_batch_example(const TaskBatch *batch, int b)
{
    const char *func = "task_batch_example";
    if (b < 0 || b >= batch->batch_size)
        die(func, "example %d of a batch of %d", b, batch->batch_size);
    const int P = batch->num_pairs, Q = batch->num_queries, A = batch->num_answers;
    TaskBatch *one = checked_calloc(func, 1, sizeof *one);
    *one = (TaskBatch){.batch_size = 1, .num_pairs = P, .num_queries = Q, .num_answers = A};
    one->keys = checked_malloc(func, (size_t)P, sizeof(int));
    one->values = checked_malloc(func, (size_t)P, sizeof(int));
    one->queries = checked_malloc(func, (size_t)Q, sizeof(int));
    one->answers = checked_malloc(func, (size_t)A, sizeof(int));
    memcpy(one->keys, batch->keys + (size_t)b * P, (size_t)P * sizeof(int));
    memcpy(one->values, batch->values + (size_t)b * P, (size_t)P * sizeof(int));
    memcpy(one->queries, batch->queries + (size_t)b * Q, (size_t)Q * sizeof(int));
    memcpy(one->answers, batch->answers + (size_t)b * A, (size_t)A * sizeof(int));
    return one;
}

void task_print_sequence(FILE *out, const Task *task, const int *tokens, int length)
{
    for (int t = 0; t < length; t++)
        fprintf(out, "%s%s", t ? " " : "", task->key_words[tokens[t]]);
}
