/* test_random.c - the seeded generator gives the same numbers everywhere. */
#include <criterion/criterion.h>
#include <math.h>

#include "random.h"

Test(random, matches_the_pcg32_reference_sequence)
{
    /* pcg32-demo's published output for pcg32_srandom_r(42, 54) */
    const uint32_t expected[] = {0xa15c02b7, 0x7b47f409, 0xba1d3330,
                                 0x83d2f293, 0xbfa4784b, 0xcbed606e};
    Rng rng = rng_new_stream(42u, 54u);
    for (int i = 0; i < 6; i++) {
        uint32_t r = rng_u32(&rng);
        cr_expect_eq(r, expected[i], "draw %d", i);
    }
}

Test(random, uniform_normal_and_permutation_for_fixed_seeds)
{
    /* Hard-coded so that a change to any of them is seen. */
    const float uniform[] = {0.893574178f, 0.217230141f, 0.36051482f, 0.375444591f};
    const float normal[] = {-0.344113767f, -0.781577885f, -0.141502857f, -0.826555252f};
    const int permutation[] = {0, 7, 3, 5, 6, 1, 4, 2};
    Rng rng = rng_new(0);
    for (int i = 0; i < 4; i++) {
        float u = rng_uniform(&rng);
        cr_expect_eq(u, uniform[i], "uniform %d", i);
    }
    rng = rng_new(7);
    for (int i = 0; i < 4; i++) {
        float z = rng_normal(&rng);   /* Criterion's macros evaluate twice */
        cr_expect_float_eq(z, normal[i], 1e-6f, "normal %d", i);
    }
    rng = rng_new(3);
    int perm[8];
    rng_permutation(&rng, perm, 8);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(perm[i], permutation[i], "perm[%d]", i);
}

Test(random, distributions_have_the_right_moments)
{
    Rng rng = rng_new(123);
    enum { N = 200000 };
    double sum = 0, sum_sq = 0, usum = 0;
    for (int i = 0; i < N; i++) {
        double z = rng_normal(&rng);
        sum += z;
        sum_sq += z * z;
        double u = rng_uniform(&rng);
        cr_assert(u >= 0.0 && u < 1.0);
        usum += u;
    }
    cr_expect(fabs(sum / N) < 0.01, "normal mean %g", sum / N);
    cr_expect(fabs(sum_sq / N - 1.0) < 0.015, "normal variance %g", sum_sq / N);
    cr_expect(fabs(usum / N - 0.5) < 0.005, "uniform mean %g", usum / N);
}

Test(random, below_and_permutation_cover_their_range)
{
    Rng rng = rng_new(5);
    int counts[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint32_t r = rng_below(&rng, 7);
        cr_assert(r < 7);
        counts[r]++;
    }
    for (int i = 0; i < 7; i++)
        cr_expect(counts[i] > 850 && counts[i] < 1150, "count[%d] = %d", i, counts[i]);
    int perm[50], seen[50] = {0};
    rng_permutation(&rng, perm, 50);
    for (int i = 0; i < 50; i++)
        seen[perm[i]]++;
    for (int i = 0; i < 50; i++)
        cr_expect_eq(seen[i], 1);
}

/* The first two draws of a generator, as one number. */
static uint64_t first_draws(Rng rng)
{
    const uint64_t high = rng_u32(&rng);
    return high << 32 | rng_u32(&rng);
}

/* A learning program's uses of randomness never draw the same numbers,
 * whatever the seed: the parameters, the batches, the held-out examples,
 * the orders and the per-step batches of steps 1 to 200. Parameters drawn
 * from rng_new(seed), the stream of the seed, fail this at the seed equal
 * to another use's stream number: with the held-out examples on stream 2,
 * seed 2 drew both from one generator. */
Test(random, the_streams_of_a_seed_never_coincide)
{
    enum { USES = 4, STEPS = 200, DRAWS = USES + STEPS };
    const uint64_t big = (uint64_t)1 << 32;
    uint64_t seeds[80];
    for (int i = 0; i < 64; i++)
        seeds[i] = (uint64_t)i;
    for (int i = 64; i < 80; i++)
        seeds[i] = big + (uint64_t)(i - 64) - 8;   /* around the per-step streams' base */
    for (int i = 0; i < 80; i++) {
        const uint64_t seed = seeds[i];
        uint64_t draws[DRAWS];
        const RngUse uses[USES] = {RNG_PARAMETERS, RNG_BATCHES, RNG_HELDOUT, RNG_ORDERS};
        for (int u = 0; u < USES; u++)
            draws[u] = first_draws(rng_use(seed, uses[u]));
        for (int s = 0; s < STEPS; s++)
            draws[USES + s] = first_draws(rng_step(seed, (uint64_t)s + 1));
        for (int a = 0; a < DRAWS; a++)
            for (int b = a + 1; b < DRAWS; b++)
                cr_assert_neq(draws[a], draws[b], "seed %llu: draws %d and %d coincide",
                              (unsigned long long)seed, a, b);
    }
}
