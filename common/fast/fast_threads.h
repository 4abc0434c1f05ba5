/*
 * fast_threads.h - the worker threads every parallel loop of the fast path
 * runs on (the speed section of chapter 05, 05_multihead/fast.md).
 *
 * A parallel loop here is a function work(arg, t) called once for each
 * share t = 0 .. num_threads-1 of the work: share t always covers the same
 * rows, columns or jobs, whichever thread runs it, so a result depends on
 * the number of shares and never on the timing (the same thread count
 * gives the same bits).
 *
 * Starting a thread costs some tens of microseconds, as much as a small
 * matrix product, so the threads are started once, on the first call that
 * wants them, and then wait for work between calls. They are joined when
 * the program exits (or by fast_threads_stop).
 */
#ifndef FAST_THREADS_H
#define FAST_THREADS_H

/* Run work(arg, t) for t = 0 .. num_threads-1 and return when all are
 * done: share 0 on the calling thread, the others on the waiting workers.
 * When the workers are busy (a call from inside a share, or from another
 * thread at the same time) or cannot be started, the calling thread runs
 * every share itself, one after the other: slower, the same result. */
void fast_parallel(int num_threads, void (*work)(void *arg, int thread), void *arg);

/* How many of num_threads threads a piece of work of `flops` floating-
 * point operations is worth: one more for each FAST_FLOPS_PER_THREAD, at
 * least 1, at most num_threads. Handing a share to a waiting worker costs
 * a few microseconds on a quiet machine and far more when the worker's
 * core is busy with another program (the worker waits for its turn); and
 * small products run far below the peak, so their FLOPs take longer than
 * the count says. Below this much work a second thread made the training
 * page's default batch slower. Fewer threads change no result. */
enum { FAST_FLOPS_PER_THREAD = 8000000 };
int fast_threads_worth(int num_threads, double flops);

/* Join the workers; the next fast_parallel starts them again. Registered
 * with atexit by the first call that starts them. */
void fast_threads_stop(void);

#endif
