/*
 * bufpool.c - a few large buffers kept for reuse (bufpool.h says why).
 */
#include <stdlib.h>

#include "bufpool.h"
#include "mem.h"

void nx_bufpool_init(struct nx_bufpool *bp, int keep, size_t max_bytes, int locked)
{
    bp->locked = locked;
    if (locked)
        pthread_mutex_init(&bp->mu, NULL);
    bp->keep = keep < 1 ? 1 : keep > NX_BUFPOOL_SLOTS ? NX_BUFPOOL_SLOTS : keep;
    bp->max_bytes = max_bytes;
    bp->n = 0;
    bp->bytes = 0;
}

static void lock(struct nx_bufpool *bp)
{
    if (bp->locked)
        pthread_mutex_lock(&bp->mu);
}

static void unlock(struct nx_bufpool *bp)
{
    if (bp->locked)
        pthread_mutex_unlock(&bp->mu);
}

static void drop(struct nx_bufpool *bp, int i)
{
    bp->bytes -= bp->cap[i];
    bp->n--;
    bp->ptr[i] = bp->ptr[bp->n];
    bp->cap[i] = bp->cap[bp->n];
}

void *nx_bufpool_get(struct nx_bufpool *bp, size_t len, size_t *cap)
{
    void *p = NULL;
    if (len >= NX_BUFPOOL_MIN) {
        lock(bp);
        int best = -1;
        for (int i = 0; i < bp->n; i++)
            if (bp->cap[i] >= len && bp->cap[i] <= 2 * len &&
                (best < 0 || bp->cap[i] < bp->cap[best]))
                best = i;
        if (best >= 0) {
            p = bp->ptr[best];
            *cap = bp->cap[best];
            drop(bp, best);
        }
        unlock(bp);
    }
    if (p)
        return p;
    *cap = len;
    return nx_xmalloc(len ? len : 1);
}

void nx_bufpool_put(struct nx_bufpool *bp, void *p, size_t cap)
{
    if (!p)
        return;
    void *evicted = NULL;
    if (cap >= NX_BUFPOOL_MIN) {
        lock(bp);
        int s = -1; /* full: the smallest, given up for p if p is larger */
        if (bp->n == bp->keep) {
            s = 0;
            for (int i = 1; i < bp->n; i++)
                if (bp->cap[i] < bp->cap[s])
                    s = i;
        }
        if ((s < 0 || bp->cap[s] < cap) &&
            bp->bytes - (s < 0 ? 0 : bp->cap[s]) + cap <= bp->max_bytes) {
            if (s >= 0) {
                evicted = bp->ptr[s];
                drop(bp, s);
            }
            bp->ptr[bp->n] = p;
            bp->cap[bp->n++] = cap;
            bp->bytes += cap;
            p = NULL;
        }
        unlock(bp);
    }
    free(evicted);
    free(p);
}

void nx_bufpool_fini(struct nx_bufpool *bp)
{
    for (int i = 0; i < bp->n; i++)
        free(bp->ptr[i]);
    bp->n = 0;
    bp->bytes = 0;
    if (bp->locked)
        pthread_mutex_destroy(&bp->mu);
}
