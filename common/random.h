/*
 * random.h - one small seeded generator (introduced in chapter 01).
 *
 * Every program draws its random numbers from here, never from rand():
 * the same seed gives the same numbers on every machine and compiler.
 * The generator is PCG32 (O'Neill, 2014): a 64-bit linear congruential
 * state whose output is scrambled by a xorshift and a data-dependent
 * rotation. Uniform floats use the top 24 bits, so every value is an exact
 * multiple of 2^-24; normals use the polar method in double precision.
 */
#ifndef RANDOM_H
#define RANDOM_H

#include <stdint.h>

typedef struct {
    uint64_t state;
    uint64_t inc;      /* odd: which of the 2^63 streams */
    double spare;      /* the polar method makes normals in pairs */
    int has_spare;
} Rng;

Rng rng_new(uint64_t seed);
/* PCG32 with an explicit stream, seeded exactly as the reference code's
 * pcg32_srandom_r(seed, stream) is. rng_new(s) is rng_new_stream(s, s). */
Rng rng_new_stream(uint64_t seed, uint64_t stream);

/* What a learning program draws, each from a stream of its own. Two
 * generators with the same seed and different streams give different
 * sequences, so with fixed stream numbers the parameters, the batches and
 * the held-out examples never coincide, whatever the seed. (rng_new(seed)
 * takes the stream from the seed: seed 2 would be stream 2, the held-out
 * set's, so a program that draws for more than one use calls rng_use.) */
typedef enum {
    RNG_PARAMETERS = 1,   /* the initial parameters */
    RNG_BATCHES = 2,      /* training batches, one after the other */
    RNG_HELDOUT = 3,      /* the held-out examples */
    RNG_ORDERS = 4,       /* anything else a program shuffles (pruning orders) */
    RNG_PROBES = 5,       /* the probes a trained model is measured on */
} RngUse;
Rng rng_use(uint64_t seed, RngUse use);
/* The batch of training step s (s >= 1) on a stream of its own, above
 * every RngUse: the batch of step s depends on the seed and s alone, so a
 * run that goes on from a saved step draws what an uninterrupted run
 * would. */
Rng rng_step(uint64_t seed, uint64_t step);
uint32_t rng_u32(Rng *rng);
/* Uniform integer in [0, n), without modulo bias. n > 0. */
uint32_t rng_below(Rng *rng, uint32_t n);
/* Uniform float in [0, 1). */
float rng_uniform(Rng *rng);
/* Standard normal, mean 0 and variance 1. */
float rng_normal(Rng *rng);
/* perm[0..n) filled with a uniformly random permutation of 0..n-1
 * (Fisher-Yates). */
void rng_permutation(Rng *rng, int *perm, int n);

#endif
