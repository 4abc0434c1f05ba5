/*
 * memory.h - memory that is never missing silently (introduced in chapter 01).
 *
 * Two things a program asks of the machine's memory:
 *   - a buffer: checked_malloc and checked_calloc, which stop the program
 *     (die) with one line and the bytes, as llm.c's mallocCheck does, when
 *     the memory is not there;
 *   - a whole run: memory_check and memory_require, which compare what a
 *     run's sizes need with what the machine has before the work starts,
 *     so that a run too large fails at once, not after minutes of swapping.
 */
#ifndef MEMORY_H
#define MEMORY_H

#include <stddef.h>

/* malloc(count * elem) and calloc(count, elem) that cannot return NULL:
 *     float *row = checked_malloc(n, sizeof *row);
 * When the memory is not there, or count * elem overflows, die's line,
 * "[prog: ]checked_malloc: out of memory allocating 4096 bytes (0.0 MB)",
 * and the program stops: a run that is too large for the machine is
 * memory_require's to refuse before its work, so a buffer that cannot be had
 * is a bug. A request for 0 bytes returns a valid pointer to free. */
void *checked_malloc(size_t count, size_t elem);
void *checked_calloc(size_t count, size_t elem);

/* Allocations made so far, by checked_malloc and checked_calloc and by
 * the allocators with their own alignment (a tensor's numbers,
 * fast_alloc_panels), which call memory_counted: a test asks how many a
 * piece of work made (a training step that makes none once its memory is
 * laid out, 06_permutation_invariance/language_step.h). Counted on every
 * thread, at the cost of one atomic addition each. */
size_t memory_allocations(void);
void memory_counted(void);

/* Bytes a program may hope to allocate: the physical memory, or the
 * address-space limit (ulimit -v) when that is smaller; *what names which
 * of the two it is, for a message. SIZE_MAX when neither is known. */
size_t memory_available(const char **what);

/* What every run holds besides its tensors (memory_check adds it). */
#define MEMORY_BASE_BYTES 16e6
/* The check itself. need: the bytes a run's tensors take at their largest,
 * worked out from the sizes asked for (an estimate that errs on the large
 * side), MEMORY_BASE_BYTES added;
 * detail: what dominates it, or NULL; hint: what to make smaller. Returns
 * 0 when need fits, else -1 with one line in err:
 *   "this run needs about 34.4 GB of memory (two (65536, 65536) matrices),
 *    more than the machine's memory, 25.3 GB: use a smaller --cost-max" */
int memory_check(double need, const char *detail, const char *hint, char *err, size_t err_len);
/* For a program, before its work: the same check; 0 when need fits, else
 * that line on stderr and fail's status, for the program to return:
 *     const int status = memory_require(need, "the weights", "use fewer keys");
 *     if (status != 0)
 *         return status; */
int memory_require(double need, const char *detail, const char *hint)
    __attribute__((warn_unused_result));
/* "17.2 GB": bytes as a person reads them, in powers of 1000. */
void bytes_text(char *buf, size_t len, double bytes);

#endif
