/*
 * internal.h - functions of the learning layer that only the tests call,
 * kept out of its public headers.
 */
#ifndef LEARN_INTERNAL_H
#define LEARN_INTERNAL_H

#include <stdbool.h>

#include "learn/optim.h"

/* true when every gradient is finite (a NaN or inf means training broke). */
bool parameters_grads_finite(const Parameter *params, int count);

#endif
