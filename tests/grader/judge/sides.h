/*
 * sides.h - what the calls stubs.awk writes are made of: on the judge's
 * side (grader.c) jput_KIND sends an argument before the call, jback_KIND
 * takes back what the function left in it, jret_KIND its result; on the
 * runner's side (runner.c) rtake_KIND rebuilds an argument, rsend_KIND and
 * rret_KIND send them back. A kind per type of parameter (stubs.awk).
 */
#ifndef SIDES_H
#define SIDES_H

#include "exercises.h"
#include "functions.h"
#include "wire.h"

#ifdef JUDGE
typedef struct Wire Wire;
Wire *judge_begin(void);
void jput_int(Wire *w, int v);
void jput_size(Wire *w, size_t v);
void jput_float(Wire *w, float v);
void jput_double(Wire *w, double v);
/* a pointer into a registered region, or count elements of its own */
void jput_floats(Wire *w, const float *p, long count);
void jput_ints(Wire *w, const int *p, long count);
void jput_floats_array(Wire *w, float *const *p, int count);
void jput_tensor(Wire *w, const Tensor *t);
void jput_tensor_out(Wire *w, Tensor **out);
void jput_valid_lens(Wire *w, const ValidLens *v);
void jput_mha(Wire *w, const MultiHeadAttention *layer);
void jput_kv_cache(Wire *w, const KVCache *cache);
void jput_block(Wire *w, const Block *block);
void jput_block_cache(Wire *w, const BlockCache *cache);
void jput_rng(Wire *w, const Rng *rng);
void jput_function(Wire *w, GraderFunction f);
/* sends the call and waits for the answer; the regions are copied back */
void judge_call(Wire *w);
void jback_tensor_out(Wire *w, Tensor **out);
void jback_kv_cache(Wire *w, KVCache *cache);
void jback_block_cache(Wire *w, BlockCache *cache);
void jback_rng(Wire *w, Rng *rng);
Tensor *jret_tensor(Wire *w);
ValidLens *jret_valid_lens(Wire *w);
int jret_int(Wire *w);
size_t jret_size(Wire *w);
float jret_float(Wire *w);
double jret_double(Wire *w);
/* every byte of the answer read, none missing */
void judge_end(Wire *w);
#else
extern const char runner_exercise[];
void runner_call(WireIn *in, WireOut *out);
int rtake_int(WireIn *in);
size_t rtake_size(WireIn *in);
float rtake_float(WireIn *in);
double rtake_double(WireIn *in);
float *rtake_floats(WireIn *in);
int *rtake_ints(WireIn *in);
float **rtake_floats_array(WireIn *in);
Tensor *rtake_tensor(WireIn *in);
Tensor **rtake_tensor_out(WireIn *in);
ValidLens *rtake_valid_lens(WireIn *in);
MultiHeadAttention *rtake_mha(WireIn *in);
KVCache *rtake_kv_cache(WireIn *in);
Block *rtake_block(WireIn *in);
BlockCache *rtake_block_cache(WireIn *in);
Rng *rtake_rng(WireIn *in);
GraderFunction rtake_function(WireIn *in);
bool runner_arguments_ok(WireIn *in);
void runner_regions(WireOut *out);
void rsend_tensor_out(WireOut *out, Tensor **t);
void rsend_kv_cache(WireOut *out, KVCache *cache);
void rsend_block_cache(WireOut *out, BlockCache *cache);
void rsend_rng(WireOut *out, Rng *rng);
void rret_tensor(WireOut *out, Tensor *t);
void rret_valid_lens(WireOut *out, ValidLens *v);
void rret_int(WireOut *out, int v);
void rret_size(WireOut *out, size_t v);
void rret_float(WireOut *out, float v);
void rret_double(WireOut *out, double v);
#endif

#endif
