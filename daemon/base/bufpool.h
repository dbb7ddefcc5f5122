/*
 * bufpool.h - a few large buffers kept for reuse.
 *
 * Messages of a megabyte and more are copied once on each side of the transport (send()
 * copies, the receiver reassembles).  glibc serves such sizes with fresh mmaps beyond its
 * threshold, so every message would pay its pages' faults and zeroing again: about as
 * much as the copy itself.  Keeping a handful of freed buffers (bounded in count and
 * bytes) makes a steady bulk transfer fault-free.  Small buffers go to malloc as usual.
 *
 * A QUIC endpoint keeps a pool of its own; QUIC lanes share one locked pool between their
 * threads, as a send buffer is taken on the loop thread and given back on a lane once
 * acknowledged, and a received one the other way round.
 */
#ifndef NX_BUFPOOL_H
#define NX_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>

#define NX_BUFPOOL_MIN (512u << 10) /* smaller buffers come and go through malloc */
#define NX_BUFPOOL_SLOTS 32         /* the most any pool keeps */

struct nx_bufpool {
    pthread_mutex_t mu; /* taken only when locked */
    int locked;
    int keep;           /* at most this many buffers kept (<= NX_BUFPOOL_SLOTS) */
    size_t max_bytes;   /* and at most this many bytes */
    int n;
    size_t bytes;
    void *ptr[NX_BUFPOOL_SLOTS];
    size_t cap[NX_BUFPOOL_SLOTS];
};

/* locked: get and put may come from several threads at once. */
void nx_bufpool_init(struct nx_bufpool *bp, int keep, size_t max_bytes, int locked);
/* A buffer of at least len bytes; *cap is its real size, to hand back to put.  The
 * smallest kept buffer that fits, unless it is over twice len; else malloc (which ends
 * the process when out of memory, as nx_xmalloc does). */
void *nx_bufpool_get(struct nx_bufpool *bp, size_t len, size_t *cap);
/* Keeps p for reuse or frees it (p may be NULL).  A full pool makes room by freeing its
 * smallest buffer, when p is larger: the large messages are the ones that fault most. */
void nx_bufpool_put(struct nx_bufpool *bp, void *p, size_t cap);
/* Frees what is kept. */
void nx_bufpool_fini(struct nx_bufpool *bp);

#endif
