/* seeds.c - outcomes over many seeds, and their runs on threads. See seeds.h. */
#define _POSIX_C_SOURCE 200809L
#include "learn/seeds.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory.h"
#include "tensor.h"

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double seeds_median(double *values, int runs)
{
    qsort(values, (size_t)runs, sizeof *values, compare_doubles);
    return runs % 2 ? values[runs / 2] : (values[runs / 2 - 1] + values[runs / 2]) / 2.0;
}

SeedSummary seeds_summary(const double *values, int runs, double success)
{
    double *sorted = checked_calloc((size_t)runs, sizeof *sorted);
    memcpy(sorted, values, (size_t)runs * sizeof *sorted);
    SeedSummary s = {0, runs, seeds_median(sorted, runs), sorted[0], sorted[runs - 1]};
    for (int i = 0; i < runs; i++)
        s.succeeded += values[i] >= success;
    free(sorted);
    return s;
}

typedef struct {
    int jobs, num_threads, done;
    void (*job)(void *arg, int j);
    void *arg;
    bool terminal;
    pthread_mutex_t lock;   /* for done and the progress line */
} Pool;

typedef struct {
    Pool *pool;
    int thread;
} Worker;

static void *work(void *p)
{
    const Worker *w = p;
    Pool *pool = w->pool;
    for (int j = w->thread; j < pool->jobs; j += pool->num_threads) {
        pool->job(pool->arg, j);
        pthread_mutex_lock(&pool->lock);
        pool->done++;
        if (pool->terminal && pool->done < pool->jobs)
            fprintf(stderr, "\r  trained %d of %d models ", pool->done, pool->jobs);
        else if (pool->terminal)
            fprintf(stderr, "\r%*s\r", 40, "");
        pthread_mutex_unlock(&pool->lock);
    }
    return NULL;
}

void seeds_run(int jobs, int num_threads, void (*job)(void *arg, int j), void *arg)
{
    if (num_threads < 1)
        num_threads = 1;
    Pool pool = {jobs, num_threads, 0, job, arg, isatty(STDERR_FILENO) == 1,
                 PTHREAD_MUTEX_INITIALIZER};
    pthread_t *ids = checked_calloc((size_t)num_threads, sizeof *ids);
    Worker *workers = checked_calloc((size_t)num_threads, sizeof *workers);
    bool *started = checked_calloc((size_t)num_threads, sizeof *started);
    for (int t = 0; t < num_threads; t++)
        workers[t] = (Worker){&pool, t};
    for (int t = 1; t < num_threads; t++)
        started[t] = pthread_create(&ids[t], NULL, work, &workers[t]) == 0;
    work(&workers[0]);
    /* a thread that could not be created costs time, not results: its
     * share runs here */
    for (int t = 1; t < num_threads; t++) {
        if (started[t])
            pthread_join(ids[t], NULL);
        else
            work(&workers[t]);
    }
    pthread_mutex_destroy(&pool.lock);
    free(started);
    free(workers);
    free(ids);
}
