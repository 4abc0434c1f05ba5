/*
 * bench_passes.h - what the benchmark of the fast path (05_multihead/bench)
 * times: the multi-head layer's forward, or forward + backward, clear or
 * fast, and streaming attention alone on the heads, full or causal. Each
 * is a BenchPass of bench_lines.h, built from a BenchLineSpec.
 *
 * Legend: B = batch_size, n = tokens (self-attention: T = n_k = n),
 * D = num_hiddens, H = num_heads, d = D / H.
 *
 * FLOPs: the forward counts 4 projections (2 * rows * D * D each) and 2
 * attention products (2 * B * T * n_k * D each); forward + backward 3 times
 * that (each product of the forward has two in the backward); attention
 * alone its 2 products forward, 3 times that with the backward, twice for
 * the backward alone (the recomputed scores are not counted: they are the
 * price of not keeping the weights). Under the causal mask query i
 * multiplies i + 1 keys: (n + 1) / 2n of the full attention products.
 *
 * Beside bench.c, the one program that uses it, and linked with it alone
 * (the Makefile's WITH_ lists; common/README.md says why).
 */
#ifndef BENCH_PASSES_H
#define BENCH_PASSES_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_lines.h"

/* the layer's forward, its forward + backward; attention alone on the
 * heads: forward, forward + backward, backward */
typedef enum {
    BENCH_FORWARD, BENCH_FORWARD_BACKWARD,
    BENCH_ATTENTION_FORWARD, BENCH_ATTENTION_FB, BENCH_ATTENTION_BACKWARD
} BenchPassKind;
extern const char *const BENCH_PASS_NAMES[];   /* "forward", "fwd+bwd", ... */

typedef struct {
    const char *label;         /* what the line calls this configuration */
    int batch, num_queries, num_keys, num_hiddens, num_heads;
    BenchPassKind pass;
    bool clear;                /* a clear line too, where it fits */
    bool one_thread;           /* a fast line on 1 thread too, not only on N */
    bool toy_mask;             /* d2l's valid_lens [3, 2] */
    bool causal;               /* valid_lens_causal: query i sees keys 0 .. i */
    const char *note;          /* printed before the configuration's lines */
} BenchConfig;

/* One line: its configuration, fast or clear, threads, and the inputs' seed
 * and standard deviation. */
typedef struct {
    const BenchConfig *c;
    bool fast;
    int threads;
    uint64_t seed;
    double scale;
} BenchLineSpec;

/* build, run and destroy for a BenchLineSpec */
extern const BenchPass BENCH_LAYER_PASS;

/* The attention-alone passes (on the heads' (B*H, n, d) tensors). */
bool bench_is_attention_alone(const BenchConfig *c);
/* FLOPs of one pass, counted as above. */
double bench_flops(const BenchConfig *c);
/* Bytes one line holds at its peak, clear or fast. */
double bench_line_bytes(const BenchConfig *c, bool clear);

#endif


