#include "platform_names.h"   /* first: sigaltstack (XSI) */
/*
 * runner.c - the runner: the learner's function and nothing of the
 * repository's answer (grader.h). The judge starts it with an empty
 * environment, its requests on fd 3, its answers on fd 4, and stdout and
 * stderr where the judge reads them. It says it is ready, then for every
 * call rebuilds the arguments (sides.h), calls the learner's function and
 * sends the results back, until fd 3 ends. Whatever it does instead can
 * only make its answers wrong, late or missing: the judge says which.
 */
#include "sides.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum { REQUESTS = 3, ANSWERS = 4, MAX_REGIONS = 256 };
#define NO_REGION UINT32_MAX

static struct {
    unsigned char *base[MAX_REGIONS];
    uint64_t bytes[MAX_REGIONS];
    uint32_t count;
    bool bad;
} regions;
static bool started = true;

void not_started(void) { started = false; }

/* ---- arguments -------------------------------------------------------------- */

int rtake_int(WireIn *in) { return (int)wire_take_u32(in); }
size_t rtake_size(WireIn *in) { return (size_t)wire_take_u64(in); }
float rtake_float(WireIn *in) { return wire_take_f32(in); }
double rtake_double(WireIn *in) { return wire_take_f64(in); }

/* a region and an offset in it: the pointer the judge's argument was, with
 * at least `need` bytes after it */
static void *take_pointer(WireIn *in, uint64_t need)
{
    uint32_t r = wire_take_u32(in);
    uint64_t offset = wire_take_u64(in);
    if (r == NO_REGION)
        return NULL;
    if (r >= regions.count || offset > regions.bytes[r] || need > regions.bytes[r] - offset) {
        regions.bad = true;
        return NULL;
    }
    return regions.base[r] + offset;
}

float *rtake_floats(WireIn *in) { return take_pointer(in, 0); }
int *rtake_ints(WireIn *in) { return take_pointer(in, 0); }

float **rtake_floats_array(WireIn *in)
{
    uint32_t n = wire_take_u32(in);
    if (n > MAX_REGIONS) {
        regions.bad = true;
        return NULL;
    }
    float **list = calloc(n ? n : 1, sizeof *list);
    for (uint32_t i = 0; i < n; i++)
        list[i] = take_pointer(in, 0);
    return list;
}

Tensor *rtake_tensor(WireIn *in)
{
    if (!wire_take_u32(in))
        return NULL;
    Tensor *t = calloc(1, sizeof *t);
    t->ndim = (int)wire_take_u32(in);
    t->size = 1;
    for (int i = 0; i < TENSOR_MAX_DIMS; i++) {
        t->shape[i] = (int)wire_take_u32(in);
        if (i < t->ndim)
            t->size *= (size_t)t->shape[i];
    }
    t->data = take_pointer(in, (uint64_t)t->size * sizeof(float));
    return t;
}

Tensor **rtake_tensor_out(WireIn *in)
{
    (void)in;
    return calloc(1, sizeof(Tensor *));
}

ValidLens *rtake_valid_lens(WireIn *in)
{
    if (!wire_take_u32(in))
        return NULL;
    ValidLens *v = calloc(1, sizeof *v);
    v->ndim = (int)wire_take_u32(in);
    v->shape[0] = (int)wire_take_u32(in);
    v->shape[1] = (int)wire_take_u32(in);
    v->data = take_pointer(in, 0);
    return v;
}

MultiHeadAttention *rtake_mha(WireIn *in)
{
    MultiHeadAttention *m = calloc(1, sizeof *m);
    m->query_size = rtake_int(in);
    m->key_size = rtake_int(in);
    m->value_size = rtake_int(in);
    m->num_hiddens = rtake_int(in);
    m->num_heads = rtake_int(in);
    m->num_kv_heads = rtake_int(in);
    m->dropout = rtake_float(in);
    m->bias = rtake_int(in) != 0;
    Tensor **fields[] = {&m->W_q, &m->W_k, &m->W_v, &m->W_o, &m->b_q, &m->b_k, &m->b_v, &m->b_o};
    for (int i = 0; i < 8; i++)
        *fields[i] = rtake_tensor(in);
    return m;
}

KVCache *rtake_kv_cache(WireIn *in)
{
    KVCache *c = calloc(1, sizeof *c);
    c->batch_size = rtake_int(in);
    c->num_kv_heads = rtake_int(in);
    c->capacity = rtake_int(in);
    c->head_size = rtake_int(in);
    c->length = rtake_int(in);
    c->keys = rtake_floats(in);
    c->values = rtake_floats(in);
    return c;
}

Block *rtake_block(WireIn *in)
{
    Block *b = calloc(1, sizeof *b);
    b->ln1_weight = rtake_tensor(in);
    b->ln1_bias = rtake_tensor(in);
    b->attn = rtake_mha(in);
    Tensor **fields[] = {&b->ln2_weight, &b->ln2_bias, &b->fc_weight, &b->fc_bias,
                         &b->proj_weight, &b->proj_bias};
    for (int i = 0; i < 6; i++)
        *fields[i] = rtake_tensor(in);
    return b;
}

BlockCache *rtake_block_cache(WireIn *in)
{
    (void)in;
    return calloc(1, sizeof(BlockCache));
}

Rng *rtake_rng(WireIn *in)
{
    Rng *r = calloc(1, sizeof *r);
    const void *p = wire_take(in, sizeof *r);
    if (p)
        memcpy(r, p, sizeof *r);
    return r;
}

bool runner_arguments_ok(WireIn *in) { return !in->bad && !regions.bad && in->at == in->len; }

/* ---- results ------------------------------------------------------------------ */

void runner_regions(WireOut *out)
{
    wire_u32(out, WIRE_REPLY);
    wire_u32(out, started ? 0 : 1);
    wire_u32(out, regions.count);
    for (uint32_t r = 0; r < regions.count; r++)
        wire_bytes(out, regions.base[r], regions.bytes[r]);
}

/* a tensor as it is: the judge checks its shape */
static void send_tensor(WireOut *out, const Tensor *t)
{
    wire_u32(out, t != NULL);
    if (!t)
        return;
    wire_u32(out, (uint32_t)t->ndim);
    for (int i = 0; i < TENSOR_MAX_DIMS; i++)
        wire_u32(out, (uint32_t)t->shape[i]);
    wire_u64(out, t->size);
    wire_bytes(out, t->data, t->size * sizeof(float));
}

void rsend_tensor_out(WireOut *out, Tensor **t) { send_tensor(out, *t); }

void rsend_kv_cache(WireOut *out, KVCache *cache) { wire_u32(out, (uint32_t)cache->length); }

void rret_valid_lens(WireOut *out, ValidLens *v)
{
    wire_u32(out, v != NULL);
    if (!v)
        return;
    uint64_t count = (uint64_t)(v->shape[0] > 0 ? v->shape[0] : 0) *
                     (uint64_t)(v->ndim == 2 ? (v->shape[1] > 0 ? v->shape[1] : 0) : 1);
    wire_u32(out, (uint32_t)v->ndim);
    wire_u32(out, (uint32_t)v->shape[0]);
    wire_u32(out, (uint32_t)v->shape[1]);
    wire_u64(out, count);
    wire_bytes(out, v->data, count * sizeof(int));
}

void rsend_block_cache(WireOut *out, BlockCache *c)
{
    const Tensor *fields[] = {c->h1, c->mean1, c->rstd1, c->x_mid, c->h2, c->mean2, c->rstd2,
                              c->f, c->g};
    for (int i = 0; i < 9; i++)
        send_tensor(out, fields[i]);
    const MultiHeadCache *m = &c->attn.clear;
    const Tensor *attn[] = {m->queries, m->keys, m->values, m->Q, m->K, m->V,
                            m->attention.weights, m->attention.dropout_scale, m->concat};
    for (int i = 0; i < 9; i++)
        send_tensor(out, attn[i]);
    rret_valid_lens(out, (ValidLens *)m->valid_lens);
}

void rsend_rng(WireOut *out, Rng *rng) { wire_bytes(out, rng, sizeof *rng); }
void rret_tensor(WireOut *out, Tensor *t) { send_tensor(out, t); }
void rret_int(WireOut *out, int v) { wire_u32(out, (uint32_t)v); }
void rret_size(WireOut *out, size_t v) { wire_u64(out, v); }
void rret_float(WireOut *out, float v) { wire_f32(out, v); }
void rret_double(WireOut *out, double v) { wire_f64(out, v); }

/* ---- a fault next to the stack: said before the fault ends the runner ------- */

static uintptr_t stack_top;

static void on_fault(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t at = (uintptr_t)info->si_addr;
    struct rlimit limit;
    uintptr_t reach = getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                          ? (uintptr_t)limit.rlim_cur : (uintptr_t)1 << 30;
    if (sig == SIGSEGV && at < stack_top && stack_top - at <= reach + (1u << 20)) {
        static const struct { uint64_t len; uint32_t tag; } frame = {4, WIRE_STACK};
        ssize_t ignored = write(ANSWERS, &frame, 12);
        (void)ignored;
    }
}

static void catch_faults(void)
{
    static char alternate[1 << 16];
    stack_t ss = {.ss_sp = alternate, .ss_size = sizeof alternate, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}

int main(void)
{
    int here = 0;
    stack_top = (uintptr_t)&here;
    program_name(runner_exercise);
    catch_faults();
    WireOut out = {0};
    wire_u32(&out, WIRE_READY);
    if (!wire_send(ANSWERS, &out))
        return 2;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    while (wire_receive(REQUESTS, &buf, &cap, &len, NULL)) {
        WireIn in = {buf, len, 0, false};
        if (wire_take_u32(&in) != WIRE_CALL)
            return 2;
        for (uint32_t r = 0; r < regions.count; r++)
            free(regions.base[r]);
        regions.count = wire_take_u32(&in);
        if (regions.count > MAX_REGIONS)
            return 2;
        for (uint32_t r = 0; r < regions.count; r++) {
            regions.bytes[r] = wire_take_u64(&in);
            const void *p = wire_take(&in, regions.bytes[r]);
            regions.base[r] = malloc(regions.bytes[r] ? regions.bytes[r] : 1);
            if (!p || !regions.base[r])
                return 2;
            memcpy(regions.base[r], p, regions.bytes[r]);
        }
        wire_reset(&out);
        runner_call(&in, &out);
        if (out.len == 0 || !wire_send(ANSWERS, &out))
            return 2;   /* the request was not one the judge sends */
    }
    return 0;
}
