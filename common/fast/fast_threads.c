/*
 * fast_threads.c - the fast path's waiting workers. See fast_threads.h.
 *
 * One call at a time owns the workers (owner_lock). A call publishes its
 * work under pool.lock and counts a new generation; each worker runs the
 * share its number names (worker i runs share i + 1) for every generation
 * it sees, and the last one to finish wakes the caller.
 *
 * Waiting: a worker that finished a share first polls the generation
 * POLLS times, a pause instruction apart, then sleeps on a condition
 * variable. Waking a sleeping thread is a trip through the kernel; in a
 * training step the next product usually comes sooner than the polls run
 * out, and a polling worker starts on it at once. The caller polls the
 * same way for the workers to finish.
 */
#define _POSIX_C_SOURCE 200809L
#include "fast/fast_threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

enum {
    MAX_WORKERS = 63,    /* the programs ask for at most 64 threads */
    POLLS = 4096,        /* looks at the generation before sleeping, a pause apart */
};

typedef struct {
    pthread_t id;
    unsigned long seen;   /* the last generation this worker looked at */
} Worker;

static struct {
    pthread_mutex_t lock;     /* guards everything below but the atomics */
    pthread_cond_t wake;      /* a new generation, or stop */
    pthread_cond_t done;      /* pending reached 0 */
    Worker workers[MAX_WORKERS];
    int num_workers;          /* started and not yet joined */
    void (*work)(void *arg, int thread);
    void *arg;
    int num_shares;           /* of the current generation */
    bool stop;
    atomic_ulong generation;  /* written under lock, polled without */
    atomic_int pending;       /* worker shares of this generation not yet done */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Held by the thread whose call owns the workers. */
static pthread_mutex_t owner_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local bool on_worker;   /* this thread is one of the workers */
static bool hooks_set;   /* the fork and exit hooks are registered; under owner_lock */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p)
{
    Worker *self = p;
    const int share = (int)(self - pool.workers) + 1;
    on_worker = true;
    for (;;) {
        for (int i = 0; i < POLLS && atomic_load(&pool.generation) == self->seen; i++)
            cpu_relax();
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.generation) == self->seen && !pool.stop)
            pthread_cond_wait(&pool.wake, &pool.lock);
        if (pool.stop) {
            pthread_mutex_unlock(&pool.lock);
            return NULL;
        }
        self->seen = atomic_load(&pool.generation);
        void (*work)(void *, int) = pool.work;
        void *arg = pool.arg;
        const bool mine = share < pool.num_shares;
        pthread_mutex_unlock(&pool.lock);
        if (!mine)
            continue;
        work(arg, share);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) {
            /* under the lock, so the caller cannot miss it between its
             * check of pending and its wait */
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
}

/* fork copies only the thread that calls it: the child has no workers,
 * whatever the pool says. Both locks are taken around the fork, so the
 * pool is copied in a consistent state, and the child starts its own
 * workers afresh (the benchmark forks a child per line). */
static void before_fork(void)
{
    pthread_mutex_lock(&owner_lock);
    pthread_mutex_lock(&pool.lock);
}

static void after_fork_in_parent(void)
{
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&owner_lock);
}

static void after_fork_in_child(void)
{
    /* the condition variables still count the parent's sleeping workers
     * as waiters, and a broadcast would wait for them: made anew */
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.num_workers = 0;
    after_fork_in_parent();
}

/* With owner_lock held: start workers until there are wanted of them (or
 * as many as the system gives); return how many there are. */
static int start_workers(int wanted)
{
    if (wanted > MAX_WORKERS)
        wanted = MAX_WORKERS;
    if (!hooks_set) {
        /* without the fork hooks a forked child would wait for workers it
         * does not have: then no workers at all */
        if (pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) != 0)
            return 0;
        atexit(fast_threads_stop);
        hooks_set = true;
    }
    while (pool.num_workers < wanted) {
        Worker *w = &pool.workers[pool.num_workers];
        w->seen = atomic_load(&pool.generation);
        if (pthread_create(&w->id, NULL, worker_main, w) != 0)
            break;
        pool.num_workers++;
    }
    return pool.num_workers;
}

void fast_parallel(int num_threads, void (*work)(void *arg, int thread), void *arg)
{
    if (num_threads < 1)
        num_threads = 1;
    int shared = 1;   /* shares 0 .. shared-1 run in parallel, the rest here */
    if (num_threads > 1 && !on_worker && pthread_mutex_trylock(&owner_lock) == 0) {
        shared = 1 + start_workers(num_threads - 1);
        if (shared > num_threads)
            shared = num_threads;
        if (shared == 1)
            pthread_mutex_unlock(&owner_lock);
    }
    if (shared > 1) {
        pthread_mutex_lock(&pool.lock);
        pool.work = work;
        pool.arg = arg;
        pool.num_shares = shared;
        atomic_store(&pool.pending, shared - 1);
        atomic_fetch_add(&pool.generation, 1);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    work(arg, 0);
    /* shares no worker took (the workers busy or too few): here, in turn */
    for (int t = shared; t < num_threads; t++)
        work(arg, t);
    if (shared > 1) {
        for (int i = 0; i < POLLS && atomic_load(&pool.pending) > 0; i++)
            cpu_relax();
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.pending) > 0)
            pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
        pthread_mutex_unlock(&owner_lock);
    }
}

void fast_threads_stop(void)
{
    /* From a worker (a share that ended the program), or while a call is
     * running: leave the workers alone, the process is ending. */
    if (on_worker || pthread_mutex_trylock(&owner_lock) != 0)
        return;
    pthread_mutex_lock(&pool.lock);
    pool.stop = true;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.num_workers; i++)
        pthread_join(pool.workers[i].id, NULL);
    pthread_mutex_lock(&pool.lock);
    pool.num_workers = 0;
    pool.stop = false;
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&owner_lock);
}

int fast_threads_worth(int num_threads, double flops)
{
    if (num_threads < 1)
        num_threads = 1;
    const double per_thread = FAST_FLOPS_PER_THREAD;
    return flops < per_thread * num_threads ? 1 + (int)(flops / per_thread) : num_threads;
}
