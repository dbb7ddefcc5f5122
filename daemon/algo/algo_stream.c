/*
 * algo_stream.c - streamed receives: a step's message applied to its regions piece by
 * piece as the packets bring it, instead of gathered whole first (algo.h).
 *
 * A message may only stream into the step its piece waits in, with nothing of that step
 * lent: then nothing else writes the regions it goes to until it is in (the step cannot
 * end without it, and a step sends before it receives).  The regions are elementwise
 * (copy, reduce), so applying a message's elements in any grouping gives what applying it
 * whole does.  Pieces cut elements anywhere: a cut element waits in the stream's carry.
 * A piece lies wherever its packet put it; the reduce kernels read a source at any
 * address (reduce.h), and a half type, which wants two bytes, never streams a reduction.
 */
#include <stdint.h>
#include <string.h>

#include "algo_int.h"
#include "nexar.h"

/* Applies payload bytes [at, at + n) of f's message (whole elements, at any address) to
 * its regions; 0, or -1 when that failed the op. */
static int apply(struct nx_xop *x, struct nx_xslot *sl, const struct nx_xfer *f, uint64_t at,
                 const uint8_t *d, size_t n)
{
    const struct nx_adapter *ad = x->d.ad;
    uint64_t off = 0, end = at + n;
    for (uint32_t i = f->reg0; i < f->reg0 + f->nreg && off < end; i++) {
        const struct nx_xreg *r = &sl->plan.reg[i];
        uint64_t rlen = r->n * x->es;
        uint64_t lo = off > at ? off : at, hi = off + rlen < end ? off + rlen : end;
        if (lo < hi) {
            uint8_t *dst = nx_xbuf_at(x, &sl->pc, r->buf, r->off) + (lo - off);
            const uint8_t *src = d + (lo - at);
            int rv;
            switch (r->act) {
            case XA_COPY:
                rv = ad->receive_to_device(dst, src, hi - lo);
                break;
            case XA_REDUCE:
                rv = ad->reduce_inplace(dst, src, (hi - lo) / x->es, x->d.dtype, x->d.redop);
                break;
            default:
                rv = nx_xreduce_first(x, dst, src, (hi - lo) / x->es);
                break;
            }
            if (rv < 0) {
                nx_xop_fail_adapter(x, r->act == XA_COPY ? "receive" : "reduce", rv);
                return -1;
            }
        }
        if (!r->keep)
            off += rlen;
    }
    return 0;
}

bool nx_xrun_stream_begin(struct nx_xop *x, uint32_t src, uint32_t step, uint64_t offset,
                          size_t len, struct nx_xstream *s)
{
    uint64_t pbytes = x->piece_elems * x->es;
    uint64_t p = offset / pbytes;
    if (offset % pbytes != 0 || p >= x->npieces || p < x->lo || p >= x->lo + x->window ||
        step >= x->nsteps || x->es > sizeof(s->carry))
        return false;
    struct nx_xslot *sl = nx_xrun_slot(x, p);
    if (sl->phase != XP_RECV || sl->pc.idx != p || sl->step != step || sl->lent)
        return false;
    struct nx_xfer *f = nx_xrun_recv_of(&sl->plan, src);
    if (!f || f->done || f->streamed || f->bytes != len || len == 0)
        return false;
    f->streamed = true;
    *s = (struct nx_xstream){.piece = p, .len = len, .src = src, .step = step};
    return true;
}

/* The receive s feeds, while its piece still waits in that step for it. */
static struct nx_xfer *stream_recv(struct nx_xop *x, const struct nx_xstream *s,
                                   struct nx_xslot **slp)
{
    struct nx_xslot *sl = nx_xrun_slot(x, s->piece);
    if (sl->phase != XP_RECV || sl->pc.idx != s->piece || sl->step != s->step)
        return NULL;
    struct nx_xfer *f = nx_xrun_recv_of(&sl->plan, s->src);
    if (!f || !f->streamed || f->done || f->torn)
        return NULL;
    *slp = sl;
    return f;
}

void nx_xrun_stream_data(struct nx_xop *x, struct nx_xstream *s, const uint8_t *d, size_t n)
{
    struct nx_xslot *sl;
    struct nx_xfer *f = stream_recv(x, s, &sl);
    if (!f)
        return;
    if (n > s->len - s->got - s->ncarry)
        return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                           "node %u's message for step %u of piece %llu ran past its %llu "
                           "bytes", s->src, s->step, (unsigned long long)s->piece,
                           (unsigned long long)s->len);
    const uint32_t es = x->es;
    while (n > 0 && x->state == XS_RUNNING) {
        if (s->ncarry || n < es) {
            size_t t = es - s->ncarry < n ? es - s->ncarry : n;
            memcpy(s->carry.b + s->ncarry, d, t);
            s->ncarry += (uint32_t)t, d += t, n -= t;
            if (s->ncarry == es) {
                if (apply(x, sl, f, s->got, s->carry.b, es) < 0)
                    return;
                s->got += es;
                s->ncarry = 0;
            }
            continue;
        }
        size_t whole = n - n % es;
        if (apply(x, sl, f, s->got, d, whole) < 0)
            return;
        s->got += whole, d += whole, n -= whole;
    }
    if (x->state != XS_RUNNING || s->got < s->len)
        return;
    f->done = true;
    x->st.msgs_recv++;
    x->st.msgs_streamed++;
    x->st.bytes_recv += f->bytes;
    sl->recv_left--;
    nx_xrun_progress(x);
}

void nx_xrun_stream_broken(struct nx_xop *x, const struct nx_xstream *s)
{
    struct nx_xslot *sl;
    struct nx_xfer *f = stream_recv(x, s, &sl);
    if (f)
        f->torn = true;
}
