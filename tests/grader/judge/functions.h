/* functions.h - the functions exercise 6.3 measures (f in
 * my_equivariance_gap): self-attention, self-attention after positional
 * encodings, causal self-attention. The judge sends which of them f is;
 * the runner holds the same list (functions.c) and passes it on. */
#ifndef GRADER_FUNCTIONS_H
#define GRADER_FUNCTIONS_H

#include "tensor.h"

typedef Tensor *(*GraderFunction)(const Tensor *X);
enum { GRADER_FUNCTIONS = 3 };
extern const GraderFunction grader_functions[GRADER_FUNCTIONS];

#endif
