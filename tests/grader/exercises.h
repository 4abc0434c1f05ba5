/*
 * exercises.h - the functions a learner writes in the exercises, one
 * declaration each, so that a file with the wrong signature does not
 * compile. Each chapter's list is in exercises_NN.h.
 *
 * A starter file includes this header and calls not_started() in the
 * function's body: the grader then says "not started yet" instead of
 * listing what fails. Delete that line when you begin.
 */
#ifndef EXERCISES_H
#define EXERCISES_H

#include "tensor.h"
#include "valid_lens.h"

void not_started(void);

#include "exercises_01.h"
#include "exercises_02.h"
#include "exercises_03.h"
#include "exercises_04.h"
#include "exercises_05.h"
#include "exercises_06.h"

#endif
