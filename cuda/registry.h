/*
 * registry.h - one client's device registrations in nexard: the CUDA IPC mappings of its
 * allocations and its interprocess events, by id.  Plain C with the closing of a
 * mapping left to a callback, so that unit tests drive it without a GPU
 * (tests/unit/test_registry.c).
 *
 * Lifetime: a registration is referenced by every queued op that uses it.  Removing it
 * (DEV_UNREGISTER) or the client going away only marks it dead; the mapping is closed
 * when the last reference goes, because the GPU may still be reading through it.  A
 * table whose client is gone frees itself with its last registration.
 */
#ifndef NX_CUDA_REGISTRY_H
#define NX_CUDA_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nx_regtab;

struct nx_reg {
    struct nx_regtab *tab;
    uint32_t id;
    int kind;      /* NX_DEV_MEMORY or NX_DEV_EVENT (device.h) */
    int device;    /* CUDA ordinal in this process */
    void *handle;  /* memory: the mapped base; event: the cudaEvent_t */
    uint64_t size; /* memory: bytes mapped */
    uint32_t refs;
    bool dead;
};

/* Closes what handle maps (cudaIpcCloseMemHandle / cudaEventDestroy). */
typedef void (*nx_reg_close_fn)(struct nx_reg *r);

struct nx_regtab {
    struct nx_reg **v; /* live and dead-but-referenced entries */
    size_t n, cap;
    uint32_t next_id;
    bool orphan; /* the client is gone */
    nx_reg_close_fn close;
};

/* A new table; NULL when out of memory. */
struct nx_regtab *nx_regtab_new(nx_reg_close_fn close);
/* Adds a registration with a fresh id (never 0); NULL when out of memory. */
struct nx_reg *nx_regtab_add(struct nx_regtab *t, int kind, int device, void *handle,
                             uint64_t size);
/* The live registration id of kind, or NULL. */
struct nx_reg *nx_regtab_get(struct nx_regtab *t, uint32_t id, int kind);
/* Marks id dead (closed now when unreferenced).  False for an unknown or dead id. */
bool nx_regtab_remove(struct nx_regtab *t, uint32_t id);
void nx_reg_ref(struct nx_reg *r);
/* Drops a reference; the last one of a dead registration closes and frees it, and may
 * free an orphaned table. */
void nx_reg_unref(struct nx_reg *r);
/* The client is gone: every registration dies; the table goes with the last of them
 * (at once when none is referenced). */
void nx_regtab_orphan(struct nx_regtab *t);
/* Registrations still held (live or referenced). */
size_t nx_regtab_count(const struct nx_regtab *t);

#endif
