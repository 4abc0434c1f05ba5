/*
 * tasks_more.h - two more tasks in tasks.h's shape: a query naming two keys
 * (chapter 05's heads experiment and head importance) and sequence reversal
 * (chapter 06's positions experiment).
 *
 * Legend: B = batch_size, P = entries of one example (num_pairs), T = tokens
 * of a sequence.
 *
 * Two keys (TASK_TWO_KEYS): a dictionary as in the dictionary task, P
 * different countries each paired with a different capital, and a query
 * naming TWO of its countries; the answer is their two capitals, in the
 * query's order (Q = 2, A = 2):
 *     {Japan: Lima, France: Tokyo, Peru: Oslo}  query Peru Japan  -> Oslo Lima
 * A model that reads the query as one vector, with one softmax over the
 * entries, has to split that softmax's weight between two entries; what it
 * gets back is a blend of two capitals that no longer says which came from
 * which country. Chapter 05 measures what several heads change.
 *
 * Reversal (TASK_REVERSAL): a sequence of T different tokens, the letters
 * a, b, c, ...; the answer at position t is the token at position T-1-t.
 * In tasks.h's shape the sequence is the entries (keys and values alike)
 * and the queries (P = Q = A = T), the answers the sequence reversed:
 *     tokens  k c o a f m b h  ->  answers  h b m f a o c k
 * Because the tokens differ, the answer at t is one of the other T-1 tokens
 * of the sequence (T even: never the token at t itself); a model that sees
 * which tokens are there but not where can only guess among them, 1 in T-1.
 *
 * Each task draws with its own function below (tasks.h's task_draw does not
 * know these kinds), from the split asked for: a held-out example is never
 * trained on.
 */
#ifndef TASKS_MORE_H
#define TASKS_MORE_H

#include "random.h"
#include "tasks.h"

/* Kinds of their own, after tasks.h's. */
#define TASK_TWO_KEYS ((TaskKind)(TASK_DICTIONARY + 1))
#define TASK_REVERSAL ((TaskKind)(TASK_DICTIONARY + 2))

/* The largest vocabulary of the reversal task: the letters a to z. */
enum { TASK_MAX_LETTERS = 26 };

/* P pairs drawn from the first key_vocab countries and the first
 * value_vocab capitals, P from 2 to both vocabularies and those at most
 * TASK_MAX_COUNTRIES. Out-of-range sizes are a programming error. */
Task task_two_keys(int num_pairs, int key_vocab, int value_vocab);
/* Fill batch (made by task_batch_new for this task) with fresh examples of
 * one split, as task_draw does: training and held-out never meet. */
void task_two_keys_draw(const Task *task, TaskBatch *batch, TaskSplit split, Rng *rng);

/* Sequences of length different letters out of the first vocab, length
 * from 2 to vocab and vocab at most TASK_MAX_LETTERS. */
Task task_reversal(int length, int vocab);
void task_reversal_draw(const Task *task, TaskBatch *batch, TaskSplit split, Rng *rng);

/* Example b of batch alone, as a new batch of one (any task). */
TaskBatch *task_batch_example(const TaskBatch *batch, int b);
/* tokens (length,) on one line, without a newline: "k c o a f m b h". */
void task_print_sequence(FILE *out, const Task *task, const int *tokens, int length);

#endif
