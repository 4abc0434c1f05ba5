/*
 * tasks.h - seeded generators of task examples for training: the dictionary
 * (introduced in chapter 05's optional section "Attention that learns"), a
 * query naming two keys (chapter 05's heads experiment and head importance)
 * and sequence reversal (chapter 06's positions experiment).
 *
 * Legend: B = batch_size, P = entries of one example (num_pairs),
 * Q = query words of one example, A = answer words of one example.
 *
 * Every task is written in one shape, so one model and one training loop
 * serve them all: an example is
 *     entries  P (key, value) pairs: keys (P,) and values (P,), word ids
 *     query    Q word ids, from the key vocabulary
 *     answer   A word ids, from the value vocabulary
 * and a batch holds B examples side by side, row-major: keys (B, P),
 * values (B, P), queries (B, Q), answers (B, A).
 *
 * The dictionary task (TASK_DICTIONARY): P different countries, each paired
 * with a capital drawn at random (P different capitals), and a query naming
 * one of the P countries; the answer is the capital paired with it in THIS
 * example. The pairing changes every time, so no fixed country -> capital
 * map can be learned: the answer must be looked up in the entries.
 *     {Japan: Lima, France: Tokyo, Peru: Oslo}  query France  -> Tokyo
 *
 * Training and held-out examples never meet: every possible example
 * belongs to exactly one of two splits, decided by one bit of its
 * fingerprint (task_example_hash), and task_draw keeps drawing until it has
 * an example of the split asked for. The bit says nothing a model could
 * use, so both splits follow the same distribution; a held-out example is
 * never trained on, and no list of the training examples is needed to
 * know it.
 *
 * Two keys (TASK_TWO_KEYS): a dictionary as above, and a query naming TWO
 * of its countries; the answer is their two capitals, in the query's order
 * (Q = 2, A = 2):
 *     {Japan: Lima, France: Tokyo, Peru: Oslo}  query Peru Japan  -> Oslo Lima
 * A model that reads the query as one vector, with one softmax over the
 * entries, has to split that softmax's weight between two entries; what it
 * gets back is a blend of two capitals that no longer says which came from
 * which country. Chapter 05 measures what several heads change.
 *
 * Reversal (TASK_REVERSAL): a sequence of T different tokens, the letters
 * a, b, c, ...; the answer at position t is the token at position T-1-t.
 * The sequence is the entries (keys and values alike) and the queries
 * (P = Q = A = T), the answers the sequence reversed:
 *     tokens  k c o a f m b h  ->  answers  h b m f a o c k
 * Because the tokens differ, the answer at t is one of the other T-1 tokens
 * of the sequence (T even: never the token at t itself); a model that sees
 * which tokens are there but not where can only guess among them, 1 in T-1.
 *
 * Adding a task: a TaskKind, a constructor that fills the Task (sizes and
 * vocabularies), and a case in task_draw that writes one example.
 */
#ifndef TASKS_H
#define TASKS_H

#include <stdint.h>
#include <stdio.h>

#include "random.h"

typedef enum {
    TASK_DICTIONARY,
    TASK_TWO_KEYS,
    TASK_REVERSAL,
} TaskKind;

typedef struct {
    TaskKind kind;
    const char *name;                /* "dictionary", "two keys", "reversal" */
    int num_pairs;                   /* P */
    int num_queries;                 /* Q */
    int num_answers;                 /* A */
    int key_vocab;                   /* key and query ids are in [0, key_vocab) */
    int value_vocab;                 /* value and answer ids are in [0, value_vocab) */
    const char *const *key_words;    /* key_vocab words: how ids print */
    const char *const *value_words;  /* value_vocab words */
} Task;

/* The largest vocabularies the built-in word lists give: countries and
 * capitals, and the letters a to z. */
enum { TASK_MAX_COUNTRIES = 40, TASK_MAX_LETTERS = 26 };

/* The dictionary task: P pairs drawn from the first key_vocab countries
 * and the first value_vocab capitals (each from P to TASK_MAX_COUNTRIES).
 * Out-of-range sizes are a programming error: programs check their
 * options first. */
Task task_dictionary(int num_pairs, int key_vocab, int value_vocab);
/* The two-key task: the same, P from 2. */
Task task_two_keys(int num_pairs, int key_vocab, int value_vocab);
/* Sequences of length different letters out of the first vocab, length
 * from 2 to vocab and vocab at most TASK_MAX_LETTERS. */
Task task_reversal(int length, int vocab);

typedef struct {
    int batch_size;     /* B */
    int num_pairs;      /* P */
    int num_queries;    /* Q */
    int num_answers;    /* A */
    int *keys;          /* (B, P) */
    int *values;        /* (B, P) */
    int *queries;       /* (B, Q) */
    int *answers;       /* (B, A) */
} TaskBatch;

/* Room for batch_size examples of the task (contents undefined). */
TaskBatch *task_batch_new(const Task *task, int batch_size);
void task_batch_free(TaskBatch *batch);   /* NULL is fine */
/* Example b of batch alone, as a new batch of one (any task). */
TaskBatch *task_batch_example(const TaskBatch *batch, int b);

typedef enum { SPLIT_TRAIN = 0, SPLIT_HELDOUT = 1 } TaskSplit;

/* Fill the batch with fresh examples of one split, drawn from rng one
 * after the other: the same generator state gives the same batch on every
 * machine. */
void task_draw(const Task *task, TaskBatch *batch, TaskSplit split, Rng *rng);
/* n examples of one split (new), drawn from seed's stream for it: the
 * held-out set from RNG_HELDOUT; training examples from RNG_BATCHES, the
 * first ones a training run of that seed draws. */
TaskBatch *task_examples(const Task *task, int n, TaskSplit split, uint64_t seed);

/* A 64-bit fingerprint of example b (its entries, query and answer):
 * FNV-1a over the ids as 4-byte little-endian words, then a 64-bit mixing
 * step so that every bit depends on every id. */
uint64_t task_example_hash(const TaskBatch *batch, int b);
/* The split example b belongs to: the top bit of its fingerprint. */
TaskSplit task_split_of(const TaskBatch *batch, int b);

/* Example b in words, on one line without a newline:
 *     {Japan: Lima, France: Tokyo, Peru: Oslo}  query France */
void task_print_example(FILE *out, const Task *task, const TaskBatch *batch, int b);
/* tokens (length,) on one line, without a newline: "k c o a f m b h". */
void task_print_sequence(FILE *out, const Task *task, const int *tokens, int length);

#endif
