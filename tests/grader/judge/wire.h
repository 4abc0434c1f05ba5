/*
 * wire.h - what the judge and the runner say to each other (grader.h tells
 * the two apart): frames, each a 64-bit length and that many bytes, made of
 * little pieces written and read in the same order on both sides.
 *
 * A call: the judge sends the memory its arguments point into (the
 * "regions": an input tensor's data, an output with its guard zones), then
 * the arguments, each a region and an offset where it is a pointer. The
 * runner rebuilds the regions, calls the learner's function, and sends back
 * every region as the function left it, then what the function returned.
 * A frame too long, cut short or not of the shape expected is "bad": the
 * judge then says the results did not come back, and never reads on.
 */
#ifndef WIRE_H
#define WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The first word of every frame. */
enum {
    WIRE_CALL = 0x43414c4cu,      /* judge -> runner: regions, then arguments */
    WIRE_REPLY = 0x52504c59u,     /* runner -> judge: not started?, regions, results */
    WIRE_READY = 0x52454459u,     /* runner -> judge, once, before the first call */
    WIRE_STACK = 0x5354434bu,     /* runner -> judge: a fault next to the stack */
};
/* The longest frame either side takes: 1 GiB. */
#define WIRE_MAX ((uint64_t)1 << 30)

typedef struct {
    unsigned char *data;
    size_t len, cap;
} WireOut;

typedef struct {
    const unsigned char *data;
    size_t len, at;
    bool bad;          /* something was read that was not there */
} WireIn;

void wire_reset(WireOut *o);
void wire_free(WireOut *o);
void wire_bytes(WireOut *o, const void *p, size_t n);
void wire_u32(WireOut *o, uint32_t v);
void wire_u64(WireOut *o, uint64_t v);
void wire_f32(WireOut *o, float v);
void wire_f64(WireOut *o, double v);
/* Writes o as one frame; false when the other side is gone. */
bool wire_send(int fd, const WireOut *o);

/* n bytes (NULL and in->bad when fewer are left). */
const void *wire_take(WireIn *in, size_t n);
uint32_t wire_take_u32(WireIn *in);
uint64_t wire_take_u64(WireIn *in);
float wire_take_f32(WireIn *in);
double wire_take_f64(WireIn *in);
/* The next frame into *buf (grown as needed): 1, or 0 when the stream ends
 * or a frame is cut short or too long. wait, when not NULL, is asked every
 * tenth of a second while nothing comes: false stops the reading (0). */
int wire_receive(int fd, unsigned char **buf, size_t *cap, size_t *len, bool (*wait)(void));

#endif
