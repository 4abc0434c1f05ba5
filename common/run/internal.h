/*
 * internal.h - what only the tests and the fuzz targets call of run/, kept
 * out of the public headers: a program loads a training state into a new
 * optimiser (lookup_load_training_new).
 */
#ifndef RUN_INTERNAL_H
#define RUN_INTERNAL_H

#include <stddef.h>

#include "run/saved_models.h"

/* lookup_load_training_new into an Adam the caller already has (over the
 * model's parameters); limits NULL: the batch size and the pairs are not
 * checked. 0, or -1 with err filled and nothing changed. */
int lookup_load_training(LookupModel *model, Adam *adam, LookupTraining *training,
                         const LookupLimits *limits, const char *dir, char *err, size_t err_len);

#endif
