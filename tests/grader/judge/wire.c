#include "platform_names.h"   /* first: poll's names under strict POSIX */
/* wire.c - frames between the judge and the runner (wire.h). */
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void wire_reset(WireOut *o) { o->len = 0; }

void wire_free(WireOut *o)
{
    free(o->data);
    *o = (WireOut){0};
}

void wire_bytes(WireOut *o, const void *p, size_t n)
{
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n)
            cap *= 2;
        unsigned char *grown = realloc(o->data, cap);
        if (!grown)
            abort();   /* out of memory: the other side sees the stream end */
        o->data = grown;
        o->cap = cap;
    }
    if (n)
        memcpy(o->data + o->len, p, n);
    o->len += n;
}

void wire_u32(WireOut *o, uint32_t v) { wire_bytes(o, &v, sizeof v); }
void wire_u64(WireOut *o, uint64_t v) { wire_bytes(o, &v, sizeof v); }
void wire_f32(WireOut *o, float v) { wire_bytes(o, &v, sizeof v); }
void wire_f64(WireOut *o, double v) { wire_bytes(o, &v, sizeof v); }

static bool write_all(int fd, const void *p, size_t n)
{
    const char *at = p;
    while (n > 0) {
        ssize_t k = write(fd, at, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        at += k;
        n -= (size_t)k;
    }
    return true;
}

bool wire_send(int fd, const WireOut *o)
{
    uint64_t len = o->len;
    return write_all(fd, &len, sizeof len) && write_all(fd, o->data, o->len);
}

const void *wire_take(WireIn *in, size_t n)
{
    if (in->bad || n > in->len - in->at) {
        in->bad = true;
        return NULL;
    }
    const void *p = in->data + in->at;
    in->at += n;
    return p;
}

#define TAKE(type, name)                                  \
    type name(WireIn *in)                                 \
    {                                                     \
        type v = 0;                                       \
        const void *p = wire_take(in, sizeof v);          \
        if (p)                                            \
            memcpy(&v, p, sizeof v);                      \
        return v;                                         \
    }
TAKE(uint32_t, wire_take_u32)
TAKE(uint64_t, wire_take_u64)
TAKE(float, wire_take_f32)
TAKE(double, wire_take_f64)

/* n bytes into p; false when the stream ends first or wait says stop */
static bool read_all(int fd, void *p, size_t n, bool (*wait)(void))
{
    char *at = p;
    while (n > 0) {
        if (wait) {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int ready = poll(&pfd, 1, 100);
            if (ready < 0 && errno != EINTR)
                return false;
            if (ready <= 0) {
                if (!wait())
                    return false;
                continue;
            }
        }
        ssize_t k = read(fd, at, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        at += k;
        n -= (size_t)k;
    }
    return true;
}

int wire_receive(int fd, unsigned char **buf, size_t *cap, size_t *len, bool (*wait)(void))
{
    uint64_t n;
    if (!read_all(fd, &n, sizeof n, wait) || n > WIRE_MAX)
        return 0;
    if (n > *cap) {
        unsigned char *grown = realloc(*buf, n);
        if (!grown)
            return 0;
        *buf = grown;
        *cap = n;
    }
    if (!read_all(fd, *buf, n, wait))
        return 0;
    *len = n;
    return 1;
}
