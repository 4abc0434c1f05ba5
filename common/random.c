/* random.c - PCG32 and what is drawn from it. See random.h. */
#include "random.h"

#include <math.h>

Rng rng_new_stream(uint64_t seed, uint64_t stream)
{
    /* PCG's reference seeding (pcg32_srandom_r), so the sequence can be
     * checked against the published one. */
    Rng rng = {0, (stream << 1u) | 1u, 0.0, 0};
    rng_u32(&rng);
    rng.state += seed;
    rng_u32(&rng);
    return rng;
}

Rng rng_new(uint64_t seed)
{
    /* The stream follows the seed too, so nearby seeds give unrelated
     * sequences. */
    return rng_new_stream(seed, seed);
}

Rng rng_use(uint64_t seed, RngUse use)
{
    return rng_new_stream(seed, (uint64_t)use);
}

Rng rng_step(uint64_t seed, uint64_t step)
{
    /* streams 2^32 + s: far above the RngUse numbers for any step a
     * program takes (PCG keeps 63 bits of the stream) */
    return rng_new_stream(seed, ((uint64_t)1 << 32) + step);
}

uint32_t rng_u32(Rng *rng)
{
    uint64_t old = rng->state;
    rng->state = old * 6364136223846793005ULL + rng->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

uint32_t rng_below(Rng *rng, uint32_t n)
{
    /* Reject the few values at the bottom that would make some results
     * more likely than others: 2^32 mod n of them. */
    uint32_t threshold = (uint32_t)(-n) % n;
    for (;;) {
        uint32_t r = rng_u32(rng);
        if (r >= threshold)
            return r % n;
    }
}

float rng_uniform(Rng *rng)
{
    /* 24 bits fill a float's mantissa exactly: no rounding up to 1.0. */
    return (float)(rng_u32(rng) >> 8) * (1.0f / 16777216.0f);
}

float rng_normal(Rng *rng)
{
    if (rng->has_spare) {
        rng->has_spare = 0;
        return (float)rng->spare;
    }
    /* Marsaglia's polar method: a uniform point in the unit disc gives two
     * independent normals. Only log and sqrt are needed, both of which
     * libm gets right to the last bit, so results agree across machines. */
    double u, v, s;
    do {
        u = 2.0 * ((double)(rng_u32(rng) >> 8) / 16777216.0) - 1.0;
        v = 2.0 * ((double)(rng_u32(rng) >> 8) / 16777216.0) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double factor = sqrt(-2.0 * log(s) / s);
    rng->spare = v * factor;
    rng->has_spare = 1;
    return (float)(u * factor);
}

void rng_permutation(Rng *rng, int *perm, int n)
{
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(rng, (uint32_t)i + 1u);
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}
