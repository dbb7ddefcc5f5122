/*
 * devcache.h - the shim's bookkeeping for device buffers, free of any CUDA call so that
 * unit tests can drive it (tests/unit/test_devcache.c).
 *
 * nx_devcache: the device allocations this rank registered with nexard (one CUDA IPC
 * handle each), keyed by the driver's process-unique buffer id.  An entry goes stale
 * when its allocation is gone: freed (a sweep asks the driver, nx_devcache_sweep), or
 * its bytes reallocated (a lookup that finds another allocation over them); stale
 * entries are unregistered once no request in flight names them, and nexard's mapping,
 * which keeps the freed GPU memory alive, goes with them.  Entries are found by daemon
 * id for unref, so the array may move.
 *
 * nx_idpool: small integers handed out and returned (done words, events), lowest
 * free first, growing on demand up to a limit.
 */
#ifndef NX_DEVCACHE_H
#define NX_DEVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nx_devreg {
    uint64_t base, size, buffer_id;
    uint32_t id;       /* nexard's registration id */
    uint32_t refs;     /* requests in flight that name it */
    bool stale;        /* freed or replaced: unregister when refs reaches 0 */
    uint64_t last_use; /* for trimming */
};

struct nx_devcache {
    struct nx_devreg *v;
    size_t n, cap;
    uint64_t clock;
    size_t sweep_next; /* where the next sweep starts */
};

/* The live entry of allocation (base, size, buffer_id), or NULL.  Live entries that
 * overlap [base, base + size) but are another allocation become stale. */
struct nx_devreg *nx_devcache_find(struct nx_devcache *c, uint64_t base, uint64_t size,
                                   uint64_t buffer_id);
/* Adds a registration; NULL when out of memory.  The pointer is valid until the next
 * add or reap. */
struct nx_devreg *nx_devcache_add(struct nx_devcache *c, uint64_t base, uint64_t size,
                                  uint64_t buffer_id, uint32_t id);
/* Takes / drops a reference by registration id (no-op for an unknown id). */
void nx_devcache_ref(struct nx_devcache *c, uint32_t id);
void nx_devcache_unref(struct nx_devcache *c, uint32_t id);
/* Marks the least recently used unreferenced live entries stale until at most max
 * live entries remain. */
void nx_devcache_trim(struct nx_devcache *c, size_t max);
/* Whether the allocation of r still exists as r (the driver knows r->base as buffer
 * r->buffer_id).  False only when it surely does not. */
typedef bool (*nx_devcache_alive_fn)(void *arg, const struct nx_devreg *r);
/* Asks alive about at most max live entries that no request names, round robin from
 * where the last sweep stopped, and marks the ones that are gone stale.  Returns how
 * many it marked (nx_devcache_reap then has them). */
size_t nx_devcache_sweep(struct nx_devcache *c, nx_devcache_alive_fn alive, void *arg,
                         size_t max);
/* Removes stale entries without references and writes their ids to out (at most cap);
 * returns how many.  Call again while it returns cap. */
size_t nx_devcache_reap(struct nx_devcache *c, uint32_t *out, size_t cap);
/* Marks every entry stale (finalize: everything goes). */
void nx_devcache_drop_all(struct nx_devcache *c);
void nx_devcache_fini(struct nx_devcache *c);

struct nx_idpool {
    uint8_t *used;
    uint32_t cap, limit, inuse;
};

/* limit: the most ids ever handed out at once. */
void nx_idpool_init(struct nx_idpool *p, uint32_t limit);
/* The lowest free id, or -1 when limit ids are in use or memory ran out. */
int64_t nx_idpool_get(struct nx_idpool *p);
void nx_idpool_put(struct nx_idpool *p, uint32_t id);
void nx_idpool_fini(struct nx_idpool *p);

#endif
