/*
 * device.c - device (CUDA) buffers in the shim: detection, registration with nexard,
 * the op's record, and stream ordering.
 *
 * A device op travels as one NX_SQE_DEVICE descriptor whose record (shm_abi.h) names
 * the registered allocations, an interprocess "ready" event and, when stream-ordered, a
 * done word.  The shim records the ready event on the caller's stream at call time (on
 * the legacy default stream when the communicator has none, which orders the op after
 * work on every blocking stream, as cudaMemcpy is); nexard's stream waits for it on
 * the GPU before it touches the buffers.
 *
 * Stream order without blocking the CPU: the completion could be an event nexard
 * records, but a stream can only wait for an event that is already recorded, and
 * nexard records it long after the call returned.  So the caller's stream waits instead
 * for a 64-bit done word in this rank's (pinned, device-mapped) shared memory to reach
 * the op's ticket (cuStreamWaitValue64, >=); nexard stores the ticket when the op's
 * device work has finished - or failed, so that a stream never waits forever - and
 * then posts the completion that nexar_wait()/nexar_sync() see.  Tickets only grow, so
 * a word can serve the next op as soon as its request completed.
 *
 * A libnexarshim built with -Dcuda=disabled still recognizes device pointers (when the
 * process loaded libcuda) so that it can refuse them instead of reading device memory
 * on the CPU.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudrv.h"
#include "devcache.h"
#include "frame.h"
#include "shim.h"

#ifndef NX_SHIM_CUDA
#define NX_SHIM_CUDA 1
#endif

#define MAX_REGS 1024         /* live allocation registrations before trimming */
#define SWEEP_PER_OP 16       /* cached allocations checked for a cudaFree per device op */
#define WORD_PAGE 4096u       /* the done words: one pinned page */
#define NWORDS (WORD_PAGE / 8u)
#define MAX_EVENTS 4096u      /* ready events per context: device ops in flight */
#define PCI_LEN 32

struct nx_devev {
    nx_cu_event ev;
    uint32_t id; /* nexard's registration */
};

/* Per CUDA context: its device and its pool of interprocess events. */
struct nx_devctx {
    nx_cu_ctx ctx;
    char pci[PCI_LEN];
    struct nx_devev *ev; /* ev_cap entries, indexed by pool id */
    uint32_t ev_cap;
    struct nx_idpool pool;
    struct nx_devctx *next;
};

struct nx_devstate {
    struct nx_devcache cache;
    struct nx_devctx *ctxs;
    void *word_blk;      /* arena block holding the page of done words */
    uint64_t *words;     /* page-aligned inside it; pinned and device-mapped */
    bool words_pinned;
    nx_cu_ctx words_ctx; /* the context that pinned them */
    struct nx_idpool word_ids;
    uint64_t ticket;     /* last done value handed out */
};

struct nx_dev_req {
    void *rec;            /* arena block: struct nx_dev_op + iovs */
    uint32_t *mems;       /* registrations it names (references held) */
    size_t nmems;
    struct nx_devctx *dc; /* where its event lives */
    uint32_t ev;          /* index in dc's pool */
    int64_t word;         /* done word index, -1: not stream-ordered */
    uint64_t done_value;
    nx_cu_stream stream;
};

/* What the driver says about one pointer. */
struct ptrinfo {
    bool device;
    nx_cu_ctx ctx;
    uint64_t buffer_id, base, size;
};

static const struct nx_cudrv *D;

/* ---- driver helpers -------------------------------------------------------------- */

static nx_cu_result push(nx_cu_ctx ctx)
{
    return D->CtxPushCurrent(ctx);
}

static void pop(void)
{
    nx_cu_ctx dummy;
    D->CtxPopCurrent(&dummy);
}

/* Host memory, managed memory and anything the driver does not know read as host. */
static int classify(const void *p, uint64_t bytes, struct ptrinfo *pi)
{
    unsigned mtype = 0, managed = 0;
    nx_cu_ctx ctx = NULL;
    unsigned long long bid = 0;
    int attrs[4] = {NX_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, NX_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    NX_CU_POINTER_ATTRIBUTE_CONTEXT, NX_CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *data[4] = {&mtype, &managed, &ctx, &bid};
    memset(pi, 0, sizeof(*pi));
    if (D->PointerGetAttributes(4, attrs, data, (nx_cu_devptr)(uintptr_t)p) !=
            NX_CUDA_SUCCESS ||
        mtype != NX_CU_MEMORYTYPE_DEVICE || managed || !ctx)
        return 0;
    pi->device = true;
    pi->ctx = ctx;
    pi->buffer_id = bid;
    if (!NX_SHIM_CUDA)
        return 0;
    nx_cu_devptr base = 0;
    size_t size = 0;
    nx_cu_result rc = push(ctx);
    if (rc == NX_CUDA_SUCCESS) {
        rc = D->MemGetAddressRange(&base, &size, (nx_cu_devptr)(uintptr_t)p);
        pop();
    }
    if (rc != NX_CUDA_SUCCESS)
        return -(int)rc;
    pi->base = base;
    pi->size = size;
    (void)bytes;
    return 0;
}

static nexar_status_t cu_fail(const char *fn, const char *what, nx_cu_result rc)
{
    return nx_fail(NEXAR_ERR_INTERNAL, "%s: %s failed: %s", fn, what, nx_cudrv_errstr(rc));
}

/* ---- state ------------------------------------------------------------------------- */

static struct nx_devstate *state(void)
{
    if (!nx_S.dev) {
        nx_S.dev = calloc(1, sizeof(*nx_S.dev));
        if (nx_S.dev)
            nx_idpool_init(&nx_S.dev->word_ids, NWORDS);
    }
    return nx_S.dev;
}

static struct nx_devctx *devctx(const char *fn, nx_cu_ctx ctx, nexar_status_t *s)
{
    struct nx_devstate *st = nx_S.dev;
    for (struct nx_devctx *d = st->ctxs; d; d = d->next)
        if (d->ctx == ctx)
            return d;
    struct nx_devctx *d = calloc(1, sizeof(*d));
    if (!d) {
        *s = nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        return NULL;
    }
    nx_cu_device dev = 0;
    nx_cu_result rc = push(ctx);
    if (rc == NX_CUDA_SUCCESS) {
        rc = D->CtxGetDevice(&dev);
        if (rc == NX_CUDA_SUCCESS)
            rc = D->DeviceGetPCIBusId(d->pci, PCI_LEN, dev);
        pop();
    }
    if (rc != NX_CUDA_SUCCESS) {
        free(d);
        *s = cu_fail(fn, "finding the device of a CUDA context", rc);
        return NULL;
    }
    d->ctx = ctx;
    nx_idpool_init(&d->pool, MAX_EVENTS);
    d->next = st->ctxs;
    st->ctxs = d;
    return d;
}

/* ---- registrations ----------------------------------------------------------------- */

static void unregister_stale(void)
{
    uint32_t ids[64];
    size_t n;
    while ((n = nx_devcache_reap(&nx_S.dev->cache, ids, 64)) > 0 && !nx_S.dead)
        if (nx_control_dev_unregister(ids, n) != NEXAR_OK || n < 64)
            break;
}

/*
 * Freed allocations.  nexard's IPC mapping of an allocation keeps its GPU memory alive
 * after the rank frees it, so a freed allocation must be unregistered soon, not when a
 * later registration happens to overlap its addresses.  CUDA tells nobody about a
 * cudaFree (a hook would mean interposing cudaFree from this library, which exports
 * nexar_* only, and misses a statically linked cudart), so each device op asks the
 * driver about a few cached allocations, round robin: one cuPointerGetAttributes each,
 * whose buffer id at the base changes (or reads 0) once the allocation is gone.  A rank
 * with up to SWEEP_PER_OP allocations has every freed one unregistered at its next device
 * op; with more, within n / SWEEP_PER_OP ops.
 */
static bool alloc_alive(void *arg, const struct nx_devreg *r)
{
    unsigned mtype = 0;
    unsigned long long bid = 0;
    int attrs[2] = {NX_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, NX_CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *data[2] = {&mtype, &bid};
    (void)arg;
    if (D->PointerGetAttributes(2, attrs, data, (nx_cu_devptr)r->base) != NX_CUDA_SUCCESS)
        return true; /* no answer: keep it */
    return mtype == NX_CU_MEMORYTYPE_DEVICE && bid == r->buffer_id;
}

static void sweep_freed(void)
{
    if (nx_devcache_sweep(&nx_S.dev->cache, alloc_alive, NULL, SWEEP_PER_OP) > 0)
        unregister_stale();
}

/* The registration id of the allocation holding pi, registering it when new. */
static nexar_status_t reg_mem(const char *fn, struct nx_devctx *dc, const struct ptrinfo *pi,
                              uint32_t *id)
{
    struct nx_devcache *c = &nx_S.dev->cache;
    struct nx_devreg *r = nx_devcache_find(c, pi->base, pi->size, pi->buffer_id);
    if (r) {
        *id = r->id;
        return NEXAR_OK;
    }
    nx_devcache_trim(c, MAX_REGS);
    unregister_stale();
    nx_cu_ipc_handle h;
    nx_cu_result rc = push(pi->ctx);
    if (rc == NX_CUDA_SUCCESS) {
        rc = D->IpcGetMemHandle(&h, pi->base);
        pop();
    }
    if (rc != NX_CUDA_SUCCESS)
        return nx_fail(NEXAR_ERR_UNSUPPORTED,
                       "%s: the device allocation at 0x%llx (%llu bytes) cannot be shared "
                       "with nexard through CUDA IPC (%s); allocate it with cudaMalloc",
                       fn, (unsigned long long)pi->base, (unsigned long long)pi->size,
                       nx_cudrv_errstr(rc));
    nexar_status_t s = nx_control_dev_register(1, &h, pi->base, pi->size, dc->pci, id);
    if (s != NEXAR_OK)
        return s;
    if (!nx_devcache_add(c, pi->base, pi->size, pi->buffer_id, *id)) {
        nx_control_dev_unregister(id, 1);
        return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
    }
    return NEXAR_OK;
}

/* A free ready event of dc, created and registered when the pool has none. */
static nexar_status_t take_event(const char *fn, struct nx_devctx *dc, uint32_t *index)
{
    int64_t i = nx_idpool_get(&dc->pool);
    if (i < 0)
        return nx_fail(NEXAR_ERR_NOMEM, "%s: more than %u device ops in flight on one device",
                       fn, MAX_EVENTS);
    if ((uint32_t)i >= dc->ev_cap) {
        struct nx_devev *ev = realloc(dc->ev, dc->pool.cap * sizeof(*ev));
        if (!ev) {
            nx_idpool_put(&dc->pool, (uint32_t)i);
            return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        }
        memset(ev + dc->ev_cap, 0, (dc->pool.cap - dc->ev_cap) * sizeof(*ev));
        dc->ev = ev;
        dc->ev_cap = dc->pool.cap;
    }
    if (dc->ev[i].ev == NULL) {
        nx_cu_ipc_handle h;
        nx_cu_event e = NULL;
        nx_cu_result rc = push(dc->ctx);
        if (rc == NX_CUDA_SUCCESS) {
            rc = D->EventCreate(&e, NX_CU_EVENT_INTERPROCESS | NX_CU_EVENT_DISABLE_TIMING);
            if (rc == NX_CUDA_SUCCESS && (rc = D->IpcGetEventHandle(&h, e)) != NX_CUDA_SUCCESS)
                D->EventDestroy(e);
            pop();
        }
        if (rc != NX_CUDA_SUCCESS) {
            nx_idpool_put(&dc->pool, (uint32_t)i);
            return cu_fail(fn, "creating an interprocess event", rc);
        }
        uint32_t id;
        nexar_status_t s = nx_control_dev_register(2, &h, 0, 0, dc->pci, &id);
        if (s != NEXAR_OK) {
            D->EventDestroy(e);
            nx_idpool_put(&dc->pool, (uint32_t)i);
            return s;
        }
        dc->ev[i] = (struct nx_devev){.ev = e, .id = id};
    }
    *index = (uint32_t)i;
    return NEXAR_OK;
}

/*
 * The records of device ops and the done words live in this rank's shared heap, where
 * nexard reads them (the slots belong to staged host data).  heap_bytes = 0 leaves no
 * room for them: every device op and nexar_comm_set_stream fail, and the text says why.
 */
static nexar_status_t no_heap(const char *fn, const char *what, uint64_t bytes)
{
    if (nx_S.hdr.heap_bytes == 0)
        return nx_fail(NEXAR_ERR_NOMEM,
                       "%s: device ops need room for %s in this rank's shared heap, and "
                       "nexard at %s gives ranks none (heap_bytes = 0); set heap_bytes in "
                       "nexard.conf (or nexard --heap-bytes) to 1 MiB or more",
                       fn, what, nx_S.env.socket);
    return nx_fail(NEXAR_ERR_NOMEM,
                   "%s: no room for %s (%llu bytes) in this rank's shared heap (heap_bytes = "
                   "%llu, taken by nexar_alloc() buffers and device ops in flight); free "
                   "arena buffers or raise heap_bytes",
                   fn, what, (unsigned long long)bytes,
                   (unsigned long long)nx_S.hdr.heap_bytes);
}

/* The page of done words, pinned and mapped for the GPU the first time it is needed. */
static nexar_status_t words_ready(const char *fn, nx_cu_ctx ctx)
{
    struct nx_devstate *st = nx_S.dev;
    if (st->words_pinned)
        return NEXAR_OK;
    if (!st->word_blk) {
        st->word_blk = nx_arena_get(2 * WORD_PAGE);
        if (!st->word_blk)
            return no_heap(fn, "the done words of stream-ordered ops", 2 * WORD_PAGE);
        uintptr_t p = ((uintptr_t)st->word_blk + WORD_PAGE - 1) & ~(uintptr_t)(WORD_PAGE - 1);
        st->words = (uint64_t *)p;
        memset(st->words, 0, WORD_PAGE);
    }
    nx_cu_result rc = push(ctx);
    if (rc == NX_CUDA_SUCCESS) {
        rc = D->MemHostRegister(st->words, WORD_PAGE,
                                NX_CU_MEMHOSTREGISTER_PORTABLE | NX_CU_MEMHOSTREGISTER_DEVICEMAP);
        if (rc == NX_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
            rc = NX_CUDA_SUCCESS;
        pop();
    }
    if (rc != NX_CUDA_SUCCESS)
        return cu_fail(fn, "pinning the done words (cuMemHostRegister)", rc);
    st->words_pinned = true;
    st->words_ctx = ctx;
    return NEXAR_OK;
}

/* ---- preparing an op --------------------------------------------------------------- */

static void req_free(struct nx_dev_req *d)
{
    if (!d)
        return;
    if (nx_S.dev) {
        for (size_t i = 0; i < d->nmems; i++)
            nx_devcache_unref(&nx_S.dev->cache, d->mems[i]);
        if (d->word >= 0)
            nx_idpool_put(&nx_S.dev->word_ids, (uint32_t)d->word);
    }
    if (d->dc)
        nx_idpool_put(&d->dc->pool, d->ev);
    nx_arena_put(d->rec);
    free(d->mems);
    free(d);
}

/* Classification of every buffer the op's shape uses, and the check that they agree. */
struct scan {
    const char *fn;
    const struct nexar_comm *c;
    size_t ndev, nhost;
    nx_cu_ctx ctx;
    const void *first_dev, *first_host;
};

static nexar_status_t scan_one(struct scan *sc, const void *p, uint64_t bytes,
                               struct ptrinfo *pi)
{
    if (!p || bytes == 0) {
        memset(pi, 0, sizeof(*pi));
        return NEXAR_OK;
    }
    int rv = classify(p, bytes, pi);
    if (rv < 0)
        return nx_fail(NEXAR_ERR_INVALID, "%s: cannot find the device allocation holding %p: %s",
                       sc->fn, p, nx_cudrv_errstr(-rv));
    if (!pi->device) {
        sc->nhost++;
        if (!sc->first_host)
            sc->first_host = p;
        return NEXAR_OK;
    }
    sc->ndev++;
    if (!sc->first_dev)
        sc->first_dev = p;
    if (sc->ctx && sc->ctx != pi->ctx)
        return nx_fail(NEXAR_ERR_UNSUPPORTED,
                       "%s: the device buffers of one op live in different CUDA contexts "
                       "(devices); use buffers of one device (rank %d, comm %u)",
                       sc->fn, sc->c->rank, sc->c->id);
    sc->ctx = pi->ctx;
    if (!NX_SHIM_CUDA)
        return NEXAR_OK;
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a + bytes < a || a + bytes > pi->base + pi->size)
        return nx_fail(NEXAR_ERR_INVALID,
                       "%s: the device buffer at %p (%llu bytes) runs past the end of its "
                       "allocation (0x%llx, %llu bytes)",
                       sc->fn, p, (unsigned long long)bytes, (unsigned long long)pi->base,
                       (unsigned long long)pi->size);
    return NEXAR_OK;
}

static nexar_status_t refuse(const struct scan *sc)
{
    const char *why = NULL;
    if (!NX_SHIM_CUDA)
        return nx_fail(NEXAR_ERR_UNSUPPORTED,
                       "%s: %p is device memory, and this libnexarshim was built without "
                       "CUDA support (-Dcuda=disabled); pass host memory",
                       sc->fn, sc->first_dev);
    if (sc->nhost)
        return nx_fail(NEXAR_ERR_UNSUPPORTED,
                       "%s: %p is device memory but %p host memory; one op takes device "
                       "buffers only or host buffers only (rank %d, comm %u)",
                       sc->fn, sc->first_dev, sc->first_host, sc->c->rank, sc->c->id);
    if (!(nx_S.features & NX_FEATURE_DEVICE))
        return nx_fail(NEXAR_ERR_UNSUPPORTED,
                       "%s: %p is device memory, but nexard at %s has no device support: %s",
                       sc->fn, sc->first_dev, nx_S.env.socket, nx_S.device_note);
    if (!nx_cudrv_get(false, &why))
        return nx_fail(NEXAR_ERR_UNSUPPORTED, "%s: %s", sc->fn, why);
    return NEXAR_OK;
}

static nexar_status_t add_mem(struct nx_dev_req *d, uint32_t id)
{
    for (size_t i = 0; i < d->nmems; i++)
        if (d->mems[i] == id)
            return NEXAR_OK;
    uint32_t *m = realloc(d->mems, (d->nmems + 1) * sizeof(*m));
    if (!m)
        return NEXAR_ERR_NOMEM;
    d->mems = m;
    d->mems[d->nmems++] = id;
    nx_devcache_ref(&nx_S.dev->cache, id);
    return NEXAR_OK;
}

/* The record's buffer for pointer p of the op (already classified as pi). */
static nexar_status_t fill_buf(const char *fn, struct nx_dev_req *d, struct nx_devctx *dc,
                               const void *p, const struct ptrinfo *pi, uint32_t esize,
                               struct nx_dev_buf *b)
{
    uint32_t id;
    nexar_status_t s;
    uint64_t off = (uint64_t)(uintptr_t)p - pi->base;
    if (off % esize)
        return nx_fail(NEXAR_ERR_INVALID,
                       "%s: the device buffer at %p is not aligned to its element size (%u)",
                       fn, p, esize);
    if ((s = reg_mem(fn, dc, pi, &id)) != NEXAR_OK)
        return s;
    if (add_mem(d, id) != NEXAR_OK)
        return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
    *b = (struct nx_dev_buf){.mem = id, .off = off};
    return NEXAR_OK;
}

static nexar_status_t build(const char *fn, struct nexar_comm *c, struct nx_call *op,
                            struct nx_dev_req *d, const struct nx_shape *sh,
                            const struct ptrinfo *pin, const struct ptrinfo *pout,
                            const struct ptrinfo *piov, nx_cu_ctx ctx)
{
    nexar_status_t s;
    uint32_t es = nx_dtype_size(op->dtype);
    uint64_t rec_bytes;
    if (!nx_dev_op_bytes((uint32_t)op->niov, &rec_bytes) || op->niov > NX_DEV_MAX_IOV)
        return nx_fail(NEXAR_ERR_UNSUPPORTED, "%s: more than %u device iovs in one op", fn,
                       NX_DEV_MAX_IOV);
    struct nx_devctx *dc = devctx(fn, ctx, &s);
    if (!dc)
        return s;
    d->rec = nx_arena_get(rec_bytes);
    if (!d->rec)
        return no_heap(fn, "the op's record", rec_bytes);
    struct nx_dev_op rec = {.magic = NX_DEV_OP_MAGIC, .done_off = NX_DEV_NO_DONE};
    struct nx_dev_iov *iov = (struct nx_dev_iov *)(void *)((uint8_t *)d->rec + sizeof(rec));
    if (op->kind == NX_K_ALL_REDUCE_BUCKETED) {
        rec.niov = (uint32_t)op->niov;
        for (size_t i = 0; i < op->niov; i++) {
            struct nx_dev_iov v = {.count = op->iov[i].count};
            if (v.count && (s = fill_buf(fn, d, dc, op->iov[i].ptr, &piov[i], es, &v.buf)))
                return s;
            memcpy(&iov[i], &v, sizeof(v));
        }
    } else {
        if (sh->in_mul && (s = fill_buf(fn, d, dc, op->in, pin, es, &rec.in)))
            return s;
        if (sh->out_mul && (s = fill_buf(fn, d, dc, op->out, pout, es, &rec.out)))
            return s;
    }
    if ((s = take_event(fn, dc, &d->ev)) != NEXAR_OK)
        return s;
    d->dc = dc;
    rec.ready_event = dc->ev[d->ev].id;
    if (c->stream) {
        if ((s = words_ready(fn, ctx)) != NEXAR_OK)
            return s;
        d->word = nx_idpool_get(&nx_S.dev->word_ids);
        if (d->word < 0)
            return nx_fail(NEXAR_ERR_NOMEM, "%s: more than %u stream-ordered ops in flight",
                           fn, NWORDS);
        d->done_value = ++nx_S.dev->ticket;
        d->stream = c->stream;
        rec.done_off = nx_arena_off(&nx_S.dev->words[d->word]);
        rec.done_value = d->done_value;
    }
    /* Last, when nothing can fail any more: the event marks the caller's stream now. */
    nx_cu_result rc = push(ctx);
    if (rc == NX_CUDA_SUCCESS) {
        rc = D->EventRecord(dc->ev[d->ev].ev, c->stream ? c->stream : NX_CU_STREAM_LEGACY);
        pop();
    }
    if (rc != NX_CUDA_SUCCESS)
        return cu_fail(fn, "recording the ready event on the stream", rc);
    memcpy(d->rec, &rec, sizeof(rec));
    return NEXAR_OK;
}

nexar_status_t nx_dev_prepare(const char *fn, struct nexar_comm *c, struct nx_call *op)
{
    struct nx_shape sh;
    op->dev = NULL;
    if (op->count == 0 || !(D = nx_cudrv_get(true, NULL)))
        return NEXAR_OK; /* no libcuda in this process: no device memory either */
    nx_kind_shape(op->kind, (uint32_t)c->size, (uint32_t)c->rank,
                  nx_kind_has_root(op->kind) ? op->peer : 0, &sh);
    uint64_t n = op->count * nx_dtype_size(op->dtype); /* checked by the caller */
    struct scan sc = {.fn = fn, .c = c};
    struct ptrinfo pin, pout, *piov = NULL;
    nexar_status_t s = NEXAR_OK;

    if (op->kind == NX_K_ALL_REDUCE_BUCKETED) {
        piov = calloc(op->niov ? op->niov : 1, sizeof(*piov));
        if (!piov)
            return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        for (size_t i = 0; i < op->niov && s == NEXAR_OK; i++)
            s = scan_one(&sc, op->iov[i].ptr, op->iov[i].count * nx_dtype_size(op->dtype),
                         &piov[i]);
    } else {
        s = scan_one(&sc, sh.in_mul ? op->in : NULL, n * sh.in_mul, &pin);
        if (s == NEXAR_OK)
            s = scan_one(&sc, sh.out_mul ? op->out : NULL, n * sh.out_mul, &pout);
    }
    if (s != NEXAR_OK || sc.ndev == 0 || (s = refuse(&sc)) != NEXAR_OK)
        goto out;
    if (c->stream && c->stream_ctx != sc.ctx) {
        s = nx_fail(NEXAR_ERR_INVALID,
                    "%s: the device buffers and the communicator's stream "
                    "(nexar_comm_set_stream) belong to different CUDA contexts (rank %d, "
                    "comm %u)", fn, c->rank, c->id);
        goto out;
    }
    struct nx_dev_req *d = calloc(1, sizeof(*d));
    if (!d || !state()) {
        free(d);
        s = nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        goto out;
    }
    d->word = -1;
    sweep_freed();
    if ((s = build(fn, c, op, d, &sh, &pin, &pout, piov, sc.ctx)) != NEXAR_OK) {
        req_free(d);
        goto out;
    }
    op->dev = d;
out:
    free(piov);
    return s;
}

void nx_dev_discard(struct nx_dev_req *d)
{
    req_free(d);
}

uint64_t nx_dev_rec_off(const struct nx_dev_req *d)
{
    return nx_arena_off(d->rec);
}

bool nx_dev_ordered(const struct nx_dev_req *d)
{
    return d && d->word >= 0;
}

/*
 * A stream-ordered op's descriptor must be in nexard's ring before the call returns.  The
 * caller's stream now waits for the op; a descriptor still queued here (the ring full, or
 * an earlier op of the communicator still being staged through the slots) would go out
 * only in a later nexar call, and a program that next blocks on its stream
 * (cudaStreamSynchronize, nexar_event_synchronize) would wait forever.  Usually it went
 * out in nx_req_start and this returns at once; otherwise it makes progress until it
 * goes, for at most the shim's safety deadline, and fails everything if nexard goes
 * away meanwhile.
 */
static void submit_now(struct nexar_request *r)
{
    uint64_t t0 = nx_now_ns();
    bool owned = r->owned;
    r->owned = true; /* the lock is let go below: nexar_sync elsewhere must leave r alone */
    while (r->submitting && !r->complete && !nx_S.dead) {
        if (nx_now_ns() - t0 > nx_S.safety_ns) {
            char text[NX_ERR_TEXT_BYTES];
            snprintf(text, sizeof(text),
                     "a stream-ordered %s on comm %u could not be handed to nexard in %llu s; "
                     "the library stopped using nexard", nx_kind_name(r->tmpl.kind),
                     r->comm->id, (unsigned long long)(nx_S.safety_ns / 1000000000ull));
            nx_shim_die(NEXAR_ERR_TIMEOUT, text);
            break;
        }
        struct pollfd p = {.fd = nx_S.sock, .events = POLLIN};
        nx_unlock();
        poll(&p, 1, 1); /* ring space comes as nexard drains it: no doorbell for that */
        nx_lock();
        if (!nx_S.inited)
            return; /* finalized by another thread meanwhile: r is gone */
        p.revents = 0;
        if (poll(&p, 1, 0) > 0 && p.revents) { /* still there under the lock */
            nx_shim_gone("nexard went away while a stream-ordered op waited to be submitted");
            break;
        }
        nx_progress();
    }
    r->owned = owned;
}

nexar_status_t nx_dev_started(struct nexar_request *r)
{
    struct nx_dev_req *d = r->dev;
    if (!nx_dev_ordered(d))
        return NEXAR_ERR_INVALID; /* not stream-ordered: the caller waits */
    nx_cu_devptr w = 0;
    nx_cu_result rc = push(d->dc->ctx);
    if (rc == NX_CUDA_SUCCESS) {
        rc = D->MemHostGetDevicePointer(&w, &nx_S.dev->words[d->word], 0);
        if (rc == NX_CUDA_SUCCESS)
            rc = D->StreamWaitValue64(d->stream, w, d->done_value, NX_CU_STREAM_WAIT_VALUE_GEQ);
        pop();
    }
    if (rc != NX_CUDA_SUCCESS)
        return cu_fail(nx_kind_name(r->tmpl.kind), "making the stream wait (cuStreamWaitValue64)",
                       rc);
    submit_now(r);
    return NEXAR_OK;
}

void nx_dev_complete(struct nexar_request *r)
{
    struct nx_dev_req *d = r->dev;
    if (!d)
        return;
    r->dev = NULL;
    /* nexard stores it too; whichever is first, the stream goes on. */
    if (d->word >= 0)
        __atomic_store_n(&nx_S.dev->words[d->word], d->done_value, __ATOMIC_RELEASE);
    req_free(d);
}

/* ---- streams and teardown ------------------------------------------------------------ */

nexar_status_t nexar_comm_set_stream(nexar_comm_t *c, void *cuda_stream)
{
    const char *fn = "nexar_comm_set_stream", *why = NULL;
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "%s: comm is NULL", fn);
    nx_lock();
    nexar_status_t s;
    nx_cu_ctx ctx = NULL;
    nx_cu_device dev = 0;
    int memops = 0;
    if ((s = nx_shim_check(fn)) != NEXAR_OK || (s = nx_comm_check(c, fn)) != NEXAR_OK)
        goto out;
    if (!cuda_stream) { /* back to unordered: always possible */
        c->stream = c->stream_ctx = NULL;
        goto out;
    }
    if (!NX_SHIM_CUDA) {
        s = nx_fail(NEXAR_ERR_UNSUPPORTED,
                    "%s: this libnexarshim was built without CUDA support (-Dcuda=disabled)",
                    fn);
        goto out;
    }
    if (!(D = nx_cudrv_get(false, &why))) {
        s = nx_fail(NEXAR_ERR_UNSUPPORTED, "%s: this libnexarshim has no CUDA (%s)", fn, why);
        goto out;
    }
    if (!(nx_S.features & NX_FEATURE_DEVICE)) {
        s = nx_fail(NEXAR_ERR_UNSUPPORTED, "%s: nexard at %s has no device support: %s", fn,
                    nx_S.env.socket, nx_S.device_note);
        goto out;
    }
    nx_cu_result rc = D->StreamGetCtx((nx_cu_stream)cuda_stream, &ctx);
    if (rc == NX_CUDA_SUCCESS && (rc = push(ctx)) == NX_CUDA_SUCCESS) {
        rc = D->CtxGetDevice(&dev);
        if (rc == NX_CUDA_SUCCESS)
            rc = D->DeviceGetAttribute(&memops, NX_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                       dev);
        pop();
    }
    if (rc != NX_CUDA_SUCCESS) {
        s = nx_fail(NEXAR_ERR_INVALID, "%s: %p is not a usable CUDA stream: %s", fn,
                    cuda_stream, nx_cudrv_errstr(rc));
        goto out;
    }
    if (!memops) {
        s = nx_fail(NEXAR_ERR_UNSUPPORTED,
                    "%s: device %d cannot make a stream wait on a 64-bit value in memory "
                    "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS), which stream-ordered "
                    "collectives need", fn, dev);
        goto out;
    }
    if (!state()) {
        s = nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        goto out;
    }
    if ((s = words_ready(fn, ctx)) != NEXAR_OK)
        goto out;
    c->stream = cuda_stream;
    c->stream_ctx = ctx;
out:
    nx_unlock();
    return s;
}

void nx_dev_fini(void)
{
    struct nx_devstate *st = nx_S.dev;
    if (!st)
        return;
    if (!nx_S.dead) {
        nx_devcache_drop_all(&st->cache);
        unregister_stale();
        for (struct nx_devctx *d = st->ctxs; d && !nx_S.dead; d = d->next) {
            uint32_t *ids = calloc(d->ev_cap ? d->ev_cap : 1, sizeof(*ids)), n = 0;
            for (uint32_t i = 0; ids && i < d->ev_cap; i++)
                if (d->ev[i].ev)
                    ids[n++] = d->ev[i].id;
            if (n)
                nx_control_dev_unregister(ids, n);
            free(ids);
        }
    }
    /* Only after nexard let go of them: destroying an event it still holds is undefined. */
    while (st->ctxs) {
        struct nx_devctx *d = st->ctxs;
        st->ctxs = d->next;
        bool pushed = push(d->ctx) == NX_CUDA_SUCCESS;
        for (uint32_t i = 0; i < d->ev_cap; i++)
            if (d->ev[i].ev)
                D->EventDestroy(d->ev[i].ev);
        if (pushed)
            pop();
        nx_idpool_fini(&d->pool);
        free(d->ev);
        free(d);
    }
    if (st->words_pinned) {
        bool pushed = push(st->words_ctx) == NX_CUDA_SUCCESS;
        D->MemHostUnregister(st->words);
        if (pushed)
            pop();
    }
    nx_arena_put(st->word_blk);
    nx_idpool_fini(&st->word_ids);
    nx_devcache_fini(&st->cache);
    free(st);
    nx_S.dev = NULL;
}
