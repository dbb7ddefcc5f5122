/*
 * lanes_pool.c - large buffers kept for reuse, shared by the loop thread and the lanes.
 *
 * quic_buf.c keeps a few per endpoint for the same reason (a fresh mmap per megabyte
 * message faults and zeroes as much as the copy costs).  With lanes a send buffer is taken
 * on the loop thread and freed on the lane once acknowledged, and a received one the other
 * way round, so the pool must be one and locked.
 */
#include <stdlib.h>

#include "lanes_int.h"
#include "mem.h"

static void *pool_get(void *arg, size_t len, size_t *cap)
{
    struct nx_lpool *bp = arg;
    int best = -1;
    void *p = NULL;
    if (len >= NX_LPOOL_MIN) {
        pthread_mutex_lock(&bp->mu);
        for (int i = 0; i < bp->n; i++)
            if (bp->cap[i] >= len && bp->cap[i] <= 2 * len &&
                (best < 0 || bp->cap[i] < bp->cap[best]))
                best = i;
        if (best >= 0) {
            p = bp->ptr[best];
            *cap = bp->cap[best];
            bp->bytes -= bp->cap[best];
            bp->n--;
            bp->ptr[best] = bp->ptr[bp->n];
            bp->cap[best] = bp->cap[bp->n];
        }
        pthread_mutex_unlock(&bp->mu);
    }
    if (p)
        return p;
    *cap = len;
    return nx_xmalloc(len ? len : 1);
}

static void pool_put(void *arg, void *p, size_t cap)
{
    struct nx_lpool *bp = arg;
    if (!p)
        return;
    if (cap >= NX_LPOOL_MIN) {
        pthread_mutex_lock(&bp->mu);
        if (bp->n < NX_LPOOL_KEEP && bp->bytes + cap <= NX_LPOOL_BYTES) {
            bp->ptr[bp->n] = p;
            bp->cap[bp->n++] = cap;
            bp->bytes += cap;
            p = NULL;
        }
        pthread_mutex_unlock(&bp->mu);
    }
    free(p);
}

void nx_lpool_init(struct nx_lpool *bp)
{
    pthread_mutex_init(&bp->mu, NULL);
    bp->n = 0;
    bp->bytes = 0;
    bp->ops = (struct nx_quic_bufs){pool_get, pool_put, bp};
}

void nx_lpool_fini(struct nx_lpool *bp)
{
    for (int i = 0; i < bp->n; i++)
        free(bp->ptr[i]);
    bp->n = 0;
    pthread_mutex_destroy(&bp->mu);
}
