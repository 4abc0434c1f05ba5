/*
 * seeds.h - an outcome measured over many seeds (introduced in chapter
 * 05's optional section on several heads): a model that either learns a
 * task or gets stuck is reported as a success rate, with the median and the
 * range, never as one seed or a mean that hides the failures.
 *
 * Legend: S = the number of seeds (runs).
 */
#ifndef SEEDS_H
#define SEEDS_H

typedef struct {
    int succeeded, runs;             /* runs at or above the success line, of S */
    double median, lowest, highest;  /* of the S outcomes */
} SeedSummary;

/* values (S,), S >= 1, -> the summary; success is the line a run must
 * reach (values >= success count). values is left as it was. */
SeedSummary seeds_summary(const double *values, int runs, double success);

/* The median of values (S,), S >= 1, sorting them in place. */
double seeds_median(double *values, int runs);

/* job(arg, j) for j = 0 .. jobs-1, shared out between num_threads threads
 * (thread t takes jobs t, t + num_threads, ...). Each job must depend on j
 * alone (its own seed's streams, its own output slots), so the results do
 * not depend on the number of threads. On a terminal, stderr shows "trained
 * j of jobs models" in place, then clears it. */
void seeds_run(int jobs, int num_threads, void (*job)(void *arg, int j), void *arg);

#endif
