/*
 * quic_buf.c - a few large buffers kept for reuse.
 *
 * Messages of a megabyte and more are copied once on each side (send() copies, the
 * receiver reassembles).  glibc serves such sizes with fresh mmaps beyond its threshold,
 * so every message would pay its pages' faults and zeroing again: about as much as the
 * copy itself.  Keeping a handful of freed buffers per endpoint (bounded in count and
 * bytes) makes a steady bulk transfer fault-free.  Small buffers go to malloc as usual.
 */
#include <stdlib.h>

#include "mem.h"
#include "quic_int.h"

void *nx_qbuf_get(struct nx_quic *q, size_t len, size_t *cap)
{
    if (q->conf.bufs)
        return q->conf.bufs->get(q->conf.bufs->arg, len, cap);
    struct nx_qbufpool *bp = &q->bufs;
    int best = -1;
    if (len >= NX_QBUF_MIN) {
        /* The smallest kept buffer that fits, unless it is wastefully large. */
        for (int i = 0; i < bp->n; i++)
            if (bp->cap[i] >= len && bp->cap[i] <= 2 * len &&
                (best < 0 || bp->cap[i] < bp->cap[best]))
                best = i;
    }
    if (best < 0) {
        *cap = len;
        return nx_xmalloc(len ? len : 1);
    }
    void *p = bp->ptr[best];
    *cap = bp->cap[best];
    bp->bytes -= bp->cap[best];
    bp->n--;
    bp->ptr[best] = bp->ptr[bp->n];
    bp->cap[best] = bp->cap[bp->n];
    return p;
}

void nx_qbuf_put(struct nx_quic *q, void *p, size_t cap)
{
    if (q->conf.bufs) {
        if (p)
            q->conf.bufs->put(q->conf.bufs->arg, p, cap);
        return;
    }
    struct nx_qbufpool *bp = &q->bufs;
    if (!p)
        return;
    if (cap < NX_QBUF_MIN || bp->bytes + cap > NX_QBUF_BYTES) {
        free(p);
        return;
    }
    if (bp->n == NX_QBUF_KEEP) { /* make room: drop the smallest */
        int s = 0;
        for (int i = 1; i < bp->n; i++)
            if (bp->cap[i] < bp->cap[s])
                s = i;
        if (bp->cap[s] >= cap) {
            free(p);
            return;
        }
        free(bp->ptr[s]);
        bp->bytes -= bp->cap[s];
        bp->ptr[s] = bp->ptr[--bp->n];
        bp->cap[s] = bp->cap[bp->n];
    }
    bp->ptr[bp->n] = p;
    bp->cap[bp->n++] = cap;
    bp->bytes += cap;
}

void nx_qbuf_fini(struct nx_quic *q)
{
    struct nx_qbufpool *bp = &q->bufs;
    for (int i = 0; i < bp->n; i++)
        free(bp->ptr[i]);
    bp->n = 0;
    bp->bytes = 0;
}
