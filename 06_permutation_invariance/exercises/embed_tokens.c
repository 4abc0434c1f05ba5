/*
 * Exercise 6.12: a GPT's embedding
 * (06_permutation_invariance/your_gpt.md, "Exercises": three
 * hints there, each a step closer to the code).
 *
 * wte (V, D), a row per token; wpe (C, D), a row per position; tokens
 * (B, T), T <= C, each in [0, V) -> x (B, T, D), written:
 *     x[b][t] = wte[tokens[b][t]] + wpe[t]
 * Do not change the inputs.
 *
 * Grade it:  make check EXERCISE=06_permutation_invariance/exercises/embed_tokens.c
 */
#include "exercises.h"

void my_embed_tokens(const float *wte, const float *wpe, const int *tokens, int B, int T,
                     int D, float *x)
{
    not_started();   /* delete this line when you begin */
    (void)wte;
    (void)wpe;
    (void)tokens;
    (void)B;
    (void)T;
    (void)D;
    (void)x;
}
