/*
 * exec.c - running a matched device op on the GPU, and completing it when it is done.
 *
 * An op runs on one device, its root's (or rank 0's, or the receiver's): its stream
 * (below) waits for every rank's ready event, buffers on other devices are
 * copied into scratch memory there (cudaMallocAsync, stream-ordered), the node-local
 * algorithm of coll_local.c runs through the CUDA adapter bound to the stream, results
 * go back, and a host function at the end of the stream hands the op to the loop thread
 * (uv_async), which stores the done words and posts the completions.
 *
 * Nothing here waits for the GPU, not even on an error or at shutdown: the loop thread
 * must never block on GPU work, because GPU work can need the loop thread.  In
 * stream-ordered mode a rank's ready event for op k+1 sits on its stream behind a wait
 * on op k's done word, and only the loop thread writes done words.  So a failed op
 * completes like a good one, through a host function queued behind whatever it already
 * put on its stream (its mappings and scratch stay until then), and shutdown lets the
 * loop run on until the ops in flight complete, for at most nx_cuda_stop_grace_ms.
 * Where not even a host function can be queued, an event recorded on the stream is
 * polled from a timer of the loop.
 *
 * The same holds for CUDA calls that wait for the device by themselves: on a GPU,
 * cudaIpcCloseMemHandle waits for the work queued on this process's streams (test
 * gpu_nowait measures it), and that work may wait for a rank's ready event that the
 * rank's stream records only after a done word the loop thread writes.  So a mapping is
 * closed only while nexard has no work queued on its device, and else kept on a list
 * until the last ticket of the device ends (nx_cuda_exec_close_mem).  Every piece of
 * work queued here has a ticket behind it, so "no ticket" means "nothing queued".
 *
 * Deadline.  A stream-ordered op waits on the GPU for its ranks' ready events, and a rank
 * records one only after the work queued before the op on its stream.  When that work
 * waits for this op (every rank of a ring receives before it sends, each receive
 * waiting for a send queued behind its sender's receive), nothing ever moves.  So an op
 * whose work has not ended within its communicator's timeout fails with
 * NEXAR_ERR_TIMEOUT, and its communicator with it, as a host op's timeout fails it: its
 * ranks' done words are written, their streams go on, and the work
 * queued here then runs out (into buffers whose contents are unspecified); the ticket
 * and its mappings stay until it has.
 *
 * Streams: the collectives of a communicator run on its own stream per device, in
 * sequence order.  That order adds no wait a correct program lacks: every rank issues
 * op k before op k+1, so nothing op k waits for can wait for op k+1.  A send/recv pair
 * is matched in no such order (message k of one pair may match before message j of
 * another, while a rank issued them the other way round), and on a shared stream that
 * extra wait can close a cycle with rendezvous sends; so a message takes a stream with
 * no pending work from the device's pool (at most POOL_MAX, then the least recently
 * used one).  Either way the ranks' own order comes in through the ready events.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "coll_local.h"
#include "cuda_int.h"
#include "mem.h"
#include "nexar.h"
#include "registry.h"

#define MAX_DEVICES 64
#define POOL_MAX 64

struct pool {
    cudaStream_t s[POOL_MAX];
    uint64_t last_use[POOL_MAX];
    int n;
};

static struct pool pools[MAX_DEVICES];
static uint64_t use_clock;

/* A communicator's stream on one device, per lane: its ops, or one direction of its
 * staging copies. */
enum lane { LANE_OPS, LANE_D2H, LANE_H2D };

struct comm_stream {
    uint32_t comm_id;
    int device;
    enum lane lane;
    cudaStream_t s;
};

static struct comm_stream *cstreams;
static size_t ncstreams, cstreams_cap;

/* An op in flight: what its completion needs once the GPU is done. */
struct ticket {
    struct ticket *next;
    size_t nparts;
    struct nx_dev_part *parts; /* iov tables not kept */
    struct nx_reg **regs;      /* references held while the GPU uses them */
    size_t nregs, regs_cap;
    uint32_t status;           /* what every part completes with */
    char text[768];            /* its reason, when status is not NEXAR_OK */
    cudaEvent_t ev;            /* parked: recorded behind the op's work, polled */
    nx_dev_copy_done done;     /* a staging copy (nx_cuda_exec_copy): told instead */
    void *done_arg;
    /* Queued behind a host function: on the watched list (loop thread), with what the
     * watch needs to tell a broken GPU's ops (below). */
    struct ticket *wnext, **wprev;
    int dev;
    char what[256];
    uint64_t deadline;         /* uv_now() at which it fails with TIMEOUT; 0: never */
    uint32_t comm_id;
    bool queued;               /* counted in dev_tickets[dev] */
    uint32_t timeout_ms;
    bool abandoned;            /* told already (the GPU broke, or the deadline passed);
                                * only freed when its work ends */
};

unsigned nx_cuda_stop_grace_ms = 5000;

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ticket *done_head, **done_tail = &done_head;
static uv_async_t done_async;
static bool async_open;     /* under done_mu: a host function may signal the loop */
static struct ticket *parked; /* loop thread: tickets whose event is polled */
static uv_timer_t park_timer, grace_timer, watch_timer;
static struct ticket *watched;   /* loop thread: tickets whose host function is queued */
static struct ticket *abandoned; /* loop thread: told after their GPU broke, not yet ended */
static cudaStream_t probes[MAX_DEVICES]; /* the watch's idle stream per device */
static bool timers_open, stopping;
static void (*stop_idle)(void); /* told once nothing is in flight after a stop */
static uint64_t inflight;

/* Tickets whose work is queued on each device and has not ended (abandoned ones too). */
static uint64_t dev_tickets[MAX_DEVICES];

/* Mappings to close once their device has no ticket. */
struct pending_close {
    int dev;
    void *mapped;
};
static struct pending_close *closes;
static size_t ncloses, closes_cap;

/* ---- streams ------------------------------------------------------------------------- */

static cudaStream_t take_stream(int dev)
{
    struct pool *p = &pools[dev];
    int lru = -1;
    for (int i = 0; i < p->n; i++) {
        cudaError_t e = cudaStreamQuery(p->s[i]);
        if (e == cudaSuccess) {
            p->last_use[i] = ++use_clock;
            return p->s[i];
        }
        if (e != cudaErrorNotReady)
            cudaGetLastError();
        if (lru < 0 || p->last_use[i] < p->last_use[lru])
            lru = i;
    }
    if (p->n < POOL_MAX) {
        CU_TRY(cudaStreamCreateWithFlags(&p->s[p->n], cudaStreamNonBlocking), fail);
        p->last_use[p->n] = ++use_clock;
        return p->s[p->n++];
    }
fail:
    if (lru < 0)
        return NULL;
    p->last_use[lru] = ++use_clock;
    return p->s[lru];
}

static cudaStream_t comm_stream(uint32_t comm_id, int dev, enum lane lane)
{
    for (size_t i = 0; i < ncstreams; i++)
        if (cstreams[i].comm_id == comm_id && cstreams[i].device == dev &&
            cstreams[i].lane == lane)
            return cstreams[i].s;
    cudaStream_t s;
    CU_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), fail);
    nx_grow((void **)&cstreams, &cstreams_cap, ncstreams + 1, sizeof(*cstreams));
    cstreams[ncstreams++] =
        (struct comm_stream){.comm_id = comm_id, .device = dev, .lane = lane, .s = s};
    return s;
fail:
    return NULL;
}

/* ---- completion ------------------------------------------------------------------------ */

static void ticket_free(struct ticket *t)
{
    for (size_t i = 0; i < t->nregs; i++)
        nx_reg_unref(t->regs[i]);
    free(t->regs);
    free(t->parts);
    free(t);
}

static void list_push(struct ticket **head, struct ticket *t)
{
    t->wnext = *head;
    if (*head)
        (*head)->wprev = &t->wnext;
    *head = t;
    t->wprev = head;
}

/* Off the watched or the abandoned list. */
static void unwatch(struct ticket *t)
{
    if (!t->wprev)
        return;
    if (t->wnext)
        t->wnext->wprev = t->wprev;
    *t->wprev = t->wnext;
    t->wprev = NULL;
}

/* The op's parts (or the copy's caller) hear how it ended. */
static void ticket_tell(struct ticket *t)
{
    if (t->done)
        t->done(t->done_arg, t->status, t->status ? t->text : NULL);
    for (size_t i = 0; i < t->nparts; i++)
        nx_cuda_host->part_done(&t->parts[i], t->status, t->status ? t->text : NULL);
    inflight--;
}

static void close_now(int dev, void *mapped)
{
    cudaSetDevice(dev);
    cudaIpcCloseMemHandle(mapped);
    cudaGetLastError();
}

/* The device's last ticket ended: the closes it held back wait for nothing now. */
static void close_pending(int dev)
{
    for (size_t i = 0; i < ncloses;) {
        if (closes[i].dev != dev) {
            i++;
            continue;
        }
        close_now(dev, closes[i].mapped);
        closes[i] = closes[--ncloses];
    }
}

static void ticket_complete(struct ticket *t)
{
    unwatch(t);
    if (!t->abandoned)
        ticket_tell(t);
    bool last = t->queued && --dev_tickets[t->dev] == 0;
    int dev = t->dev;
    ticket_free(t); /* its own mappings close at once when it was the last */
    if (last)
        close_pending(dev);
}

void nx_cuda_exec_close_mem(int dev, void *mapped)
{
    if (dev < 0 || dev >= MAX_DEVICES || dev_tickets[dev] == 0) {
        close_now(dev, mapped);
        return;
    }
    nx_grow((void **)&closes, &closes_cap, ncloses + 1, sizeof(*closes));
    closes[ncloses++] = (struct pending_close){.dev = dev, .mapped = mapped};
}

bool nx_cuda_exec_idle(void)
{
    for (int d = 0; d < MAX_DEVICES; d++)
        if (dev_tickets[d])
            return false;
    return true;
}

/* Runs on a CUDA driver thread: no CUDA calls, only hand-over to the loop.  After
 * shutdown gave up on it the ticket stays on the list (exec_fini frees it). */
static void CUDART_CB host_done(void *arg)
{
    struct ticket *t = arg;
    pthread_mutex_lock(&done_mu);
    t->next = NULL;
    *done_tail = t;
    done_tail = &t->next;
    if (async_open)
        uv_async_send(&done_async);
    pthread_mutex_unlock(&done_mu);
}

static struct ticket *take_done(void)
{
    pthread_mutex_lock(&done_mu);
    struct ticket *t = done_head;
    done_head = NULL;
    done_tail = &done_head;
    pthread_mutex_unlock(&done_mu);
    return t;
}

static void drain_done(void)
{
    for (struct ticket *t = take_done(), *next; t; t = next) {
        next = t->next;
        ticket_complete(t);
    }
}

/* Closes the loop handles, so that the loop can end; host functions still to come only
 * queue their tickets. */
static void close_handles(void)
{
    pthread_mutex_lock(&done_mu);
    bool was_open = async_open;
    async_open = false;
    pthread_mutex_unlock(&done_mu);
    if (was_open)
        uv_close((uv_handle_t *)&done_async, NULL);
    if (timers_open) {
        uv_close((uv_handle_t *)&park_timer, NULL);
        uv_close((uv_handle_t *)&grace_timer, NULL);
        uv_close((uv_handle_t *)&watch_timer, NULL);
        timers_open = false;
    }
}

/* Shutting down and nothing left in flight (or the grace is over): the handles go, and
 * the daemon hears that no device work uses the ranks' buffers any more. */
static void stopped(void)
{
    close_handles();
    void (*idle)(void) = stop_idle;
    stop_idle = NULL;
    if (idle)
        idle();
}

static void stop_if_idle(void)
{
    if (stopping && inflight == 0)
        stopped();
}

static void on_done(uv_async_t *h)
{
    (void)h;
    drain_done();
    nx_cuda_host->flush();
    stop_if_idle();
}

/* Parked tickets: an event behind the op's work, polled (never waited for). */
static void on_park(uv_timer_t *h)
{
    (void)h;
    uint64_t now = uv_now(nx_cuda_host->loop);
    for (struct ticket **pp = &parked; *pp;) {
        struct ticket *t = *pp;
        if (cudaEventQuery(t->ev) == cudaErrorNotReady) {
            if (!t->abandoned && t->deadline && now >= t->deadline) {
                t->abandoned = true; /* told with its failure; freed when the event fires */
                ticket_tell(t);
            }
            pp = &t->next;
            continue;
        }
        cudaGetLastError(); /* an error also means: nothing more will run there */
        *pp = t->next;
        cudaEventDestroy(t->ev);
        ticket_complete(t);
    }
    if (!parked && timers_open)
        uv_timer_stop(&park_timer);
    nx_cuda_host->flush();
    stop_if_idle();
}

static void park(struct ticket *t, cudaStream_t s)
{
    if (cudaEventCreateWithFlags(&t->ev, cudaEventDisableTiming) == cudaSuccess) {
        if (cudaEventRecord(t->ev, s) == cudaSuccess) {
            t->next = parked;
            parked = t;
            if (timers_open && !uv_is_active((uv_handle_t *)&park_timer))
                uv_timer_start(&park_timer, on_park, 1, 1);
            return;
        }
        cudaEventDestroy(t->ev);
    }
    cudaGetLastError();
    /* Neither a host function nor an event can follow the op's work on its stream: the
     * stream or its context is broken.  Waiting is no option, so the parts complete now;
     * the mappings stay (a reference is leaked) in case the GPU still reads them. */
    NX_WARN("cuda", "nothing can be queued behind a failed op's work; completing it now and "
            "keeping its %zu mappings until exit", t->nregs);
    t->nregs = 0;
    ticket_complete(t);
}

/*
 * The watch.  A GPU that faults (an illegal address in a kernel, an uncorrectable ECC
 * error) leaves its context broken: the work queued on its streams never runs, and
 * neither do the host functions behind it, so the ops in flight would never end and
 * their ranks would wait for their deadline with no word of why.  While ops are queued
 * the loop asks each of their devices, every NX_CUDA_WATCH_MS, whether it failed, and
 * tells the ops of a broken one at once.  It asks an idle stream of its own
 * (cudaStreamQuery never waits, and a broken context answers every call with its
 * error): an op's own stream may be destroyed (nx_cuda_exec_comm_gone) while its work is
 * queued.  The tickets stay allocated, and their mappings with them, in case a host
 * function still runs after all.
 */
#define NX_CUDA_WATCH_MS 200

static bool sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
        return true;
    default:
        return false;
    }
}

/* Tells t's parts now, with the status and text already set; its work still runs. */
static void abandon(struct ticket *t)
{
    unwatch(t);
    list_push(&abandoned, t);
    t->abandoned = true;
    ticket_tell(t);
}

static void on_watch(uv_timer_t *h)
{
    (void)h;
    bool told = false;
    cudaError_t state[MAX_DEVICES];
    bool asked[MAX_DEVICES] = {false};
    uint64_t now = uv_now(nx_cuda_host->loop);
    for (struct ticket *t = watched, *next; t; t = next) {
        next = t->wnext;
        if (!asked[t->dev]) {
            asked[t->dev] = true;
            state[t->dev] = probes[t->dev] ? cudaStreamQuery(probes[t->dev]) : cudaSuccess;
        }
        cudaError_t e = state[t->dev];
        if (sticky(e)) {
            t->nregs = 0; /* the mappings stay: nothing can say the GPU is done with them */
            t->status = NEXAR_ERR_INTERNAL;
            snprintf(t->text, sizeof(t->text),
                     "%s on device %d: the GPU failed with the op queued (%s); nexard cannot "
                     "use the device until it restarts", t->what, t->dev,
                     cudaGetErrorString(e));
            NX_ERROR("cuda", "%s", t->text);
        } else if (t->deadline && now >= t->deadline) {
            t->status = NEXAR_ERR_TIMEOUT;
            snprintf(t->text, sizeof(t->text),
                     "%s on device %d: its GPU work did not end within %.0f s. It waits on "
                     "the GPU for its ranks' ready events, and a rank's stream records one "
                     "only after the work queued there before the op: " NX_DEV_CYCLE_HINT,
                     t->what, t->dev, t->timeout_ms / 1000.0);
            NX_WARN("cuda", "%s", t->text);
        } else {
            continue;
        }
        abandon(t);
        if (t->status == NEXAR_ERR_TIMEOUT && nx_cuda_host->comm_fail)
            nx_cuda_host->comm_fail(t->comm_id, t->status, t->text); /* as a host op's */
        told = true;
    }
    if (!watched && timers_open)
        uv_timer_stop(&watch_timer);
    if (told) {
        nx_cuda_host->flush();
        stop_if_idle();
    }
}

static void on_grace(uv_timer_t *h)
{
    (void)h;
    NX_WARN("cuda", "%llu device ops still in flight %u ms after shutdown began; nexard "
            "exits without them", (unsigned long long)inflight, nx_cuda_stop_grace_ms);
    stopped();
}

/* ---- resolving buffers ------------------------------------------------------------------- */

static int hold(struct ticket *t, struct nx_reg *r)
{
    nx_grow((void **)&t->regs, &t->regs_cap, t->nregs + 1, sizeof(*t->regs));
    t->regs[t->nregs++] = r;
    nx_reg_ref(r);
    return 0;
}

/* The daemon's pointer for buffer b of part p, its device in *dev; NULL if unknown. */
static uint8_t *resolve(struct ticket *t, const struct nx_dev_part *p,
                        const struct nx_dev_buf *b, int *dev)
{
    struct nx_reg *r = nx_cuda_reg_mem(p->client_id, b->mem);
    if (!r)
        return NULL;
    hold(t, r);
    *dev = r->device;
    return (uint8_t *)r->handle + b->off;
}

struct exec {
    const struct nx_dev_job *job;
    const char *what;
    struct ticket *t;
    int dev;
    cudaStream_t s;
    uint32_t es;
    void **scratch;
    size_t nscratch, scratch_cap;
    uint32_t timeout_ms; /* the op's deadline (0: none) */
    uint32_t status; /* on failure: the status and text for every rank */
    char why[200];
};

static void fail(struct exec *x, uint32_t status, const char *why)
{
    if (x->status)
        return;
    x->status = status;
    snprintf(x->why, sizeof(x->why), "%s", why);
}

static void *scratch_alloc(struct exec *x, uint64_t bytes)
{
    void *p = NULL;
    CU_TRY(cudaMallocAsync(&p, bytes ? bytes : 1, x->s), err);
    nx_grow((void **)&x->scratch, &x->scratch_cap, x->nscratch + 1, sizeof(*x->scratch));
    x->scratch[x->nscratch++] = p;
    return p;
err:
    fail(x, NEXAR_ERR_NOMEM, nx_cuda_last_error());
    return NULL;
}

static bool copy(struct exec *x, void *dst, const void *src, uint64_t bytes)
{
    if (bytes == 0 || dst == src)
        return true;
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, x->s), err);
    return true;
err:
    fail(x, NEXAR_ERR_INTERNAL, nx_cuda_last_error());
    return false;
}

/* The buffer of part p as a pointer on the op's device: itself when it lives there, a
 * scratch copy otherwise (filled when it is an input).  NULL on failure. */
static uint8_t *place(struct exec *x, const struct nx_dev_part *p, const struct nx_dev_buf *b,
                      uint64_t bytes, bool input, uint8_t **mapped)
{
    int dev;
    uint8_t *ptr = resolve(x->t, p, b, &dev);
    if (!ptr) {
        fail(x, NEXAR_ERR_INTERNAL, "a device registration vanished before the op ran");
        return NULL;
    }
    *mapped = ptr;
    if (dev == x->dev)
        return ptr;
    uint8_t *sc = scratch_alloc(x, bytes);
    if (sc && input && !copy(x, sc, ptr, bytes))
        return NULL;
    return sc;
}

/* Bucketed: the rank's iovs gathered into one scratch buffer (and scattered back). */
static uint8_t *gather_iov(struct exec *x, const struct nx_dev_part *p, bool back,
                           uint8_t *sc)
{
    uint64_t pos = 0;
    if (!sc && !(sc = scratch_alloc(x, x->job->count * x->es)))
        return NULL;
    for (uint32_t i = 0; i < p->rec.niov; i++) {
        const struct nx_dev_iov *v = &p->iov[i];
        uint64_t bytes = v->count * x->es;
        if (bytes == 0)
            continue;
        int dev;
        uint8_t *ptr = resolve(x->t, p, &v->buf, &dev);
        if (!ptr) {
            fail(x, NEXAR_ERR_INTERNAL, "a device registration vanished before the op ran");
            return NULL;
        }
        if (!(back ? copy(x, ptr, sc + pos, bytes) : copy(x, sc + pos, ptr, bytes)))
            return NULL;
        pos += bytes;
    }
    return sc;
}

static void run_coll(struct exec *x)
{
    const struct nx_dev_job *j = x->job;
    uint32_t P = j->size;
    struct nx_rank_io *io = nx_xcalloc(P, sizeof(*io));
    uint8_t **back = nx_xcalloc(P, sizeof(*back)); /* where io[r].out goes afterwards */
    uint64_t *back_bytes = nx_xcalloc(P, sizeof(*back_bytes));
    bool bucketed = j->kind == NX_K_ALL_REDUCE_BUCKETED;

    for (uint32_t r = 0; r < P && !x->status; r++) {
        const struct nx_dev_part *p = &j->parts[r];
        struct nx_shape sh;
        nx_kind_shape(j->kind, P, r, j->root, &sh);
        uint64_t ib = j->count * x->es * sh.in_mul, ob = j->count * x->es * sh.out_mul;
        uint8_t *mapped = NULL;
        io[r].in_stride = io[r].out_stride = j->count;
        if (bucketed) {
            io[r].in = io[r].out = gather_iov(x, p, false, NULL);
            continue;
        }
        if (sh.in_mul && !(io[r].in = place(x, p, &p->rec.in, ib, true, &mapped)))
            break;
        if (!sh.out_mul)
            continue;
        bool same = sh.in_mul && p->rec.out.mem == p->rec.in.mem && p->rec.out.off == p->rec.in.off;
        if (same) {
            io[r].out = io[r].in; /* in place: one buffer, or one scratch copy of it */
        } else if (!(io[r].out = place(x, p, &p->rec.out, ob, false, &mapped))) {
            break;
        }
        if (io[r].out != mapped) {
            back[r] = mapped;
            back_bytes[r] = ob;
        }
    }
    if (!x->status) {
        struct nx_chunk_job cj = {
            .kind = bucketed ? NX_K_ALL_REDUCE : j->kind,
            .dtype = j->dtype,
            .redop = j->redop,
            .root = j->root,
            .size = P,
            .n = j->count,
            .io = io,
        };
        void *prev = nx_adapter_cuda.use_stream(x->s);
        int rv = nx_coll_local_run(&nx_adapter_cuda, &cj);
        nx_adapter_cuda.use_stream(prev);
        if (rv == -E2BIG)
            fail(x, NEXAR_ERR_UNSUPPORTED, "more ranks than the GPU kernels take in one op (32)");
        else if (rv < 0)
            fail(x, NEXAR_ERR_INTERNAL, nx_cuda_last_error());
    }
    for (uint32_t r = 0; r < P && !x->status; r++) {
        if (bucketed)
            gather_iov(x, &j->parts[r], true, io[r].out);
        else if (back[r])
            copy(x, back[r], io[r].out, back_bytes[r]);
    }
    free(io);
    free(back);
    free(back_bytes);
}

static void run_send(struct exec *x)
{
    const struct nx_dev_job *j = x->job;
    int ds, dd;
    uint8_t *src = resolve(x->t, &j->parts[0], &j->parts[0].rec.in, &ds);
    uint8_t *dst = resolve(x->t, &j->parts[1], &j->parts[1].rec.out, &dd);
    if (!src || !dst)
        fail(x, NEXAR_ERR_INTERNAL, "a device registration vanished before the op ran");
    else
        copy(x, dst, src, j->count * x->es);
}

/* x's stream waits for ready event ev of a rank (0: none), which x holds until its end.
 * False after failing x. */
static bool wait_ready(struct exec *x, uint32_t client_id, uint32_t ev)
{
    struct nx_reg *reg = ev ? nx_cuda_reg_event(client_id, ev) : NULL;
    if (ev && !reg) {
        fail(x, NEXAR_ERR_INTERNAL, "a ready event vanished before the op ran");
        return false;
    }
    if (reg && (hold(x->t, reg), cudaStreamWaitEvent(x->s, reg->handle, 0)) != cudaSuccess) {
        fail(x, NEXAR_ERR_INTERNAL, "cudaStreamWaitEvent on a rank's ready event failed");
        return false;
    }
    return true;
}

/* The device the op runs on: the receiver's, the root's, or rank 0's. */
static int pick_device(const struct nx_dev_job *j)
{
    const struct nx_dev_part *p = &j->parts[j->kind == NX_K_SEND ? 1
                                            : nx_kind_has_root(j->kind) ? j->root : 0];
    const struct nx_dev_buf *b = p->rec.in.mem ? &p->rec.in : &p->rec.out;
    for (uint32_t i = 0; !b->mem && i < p->rec.niov; i++)
        b = &p->iov[i].buf;
    struct nx_reg *r = b->mem ? nx_cuda_reg_mem(p->client_id, b->mem) : NULL;
    return r ? r->device : -1;
}

/*
 * The op's end, success or failure: its scratch is freed and its completion queued behind
 * everything it put on its stream, so that the mappings, the scratch and the ranks' done
 * words outlive the GPU's use of them.  Nothing waits for the GPU.
 */
static void finish(struct exec *x)
{
    struct ticket *t = x->t;
    if (x->status) {
        t->status = x->status;
        snprintf(t->text, sizeof(t->text), "%s on device %d: %s", x->what, x->dev, x->why);
        NX_WARN("cuda", "%s", t->text);
    }
    if (!x->s) { /* nothing was queued */
        free(x->scratch);
        if (t->done)
            host_done(t); /* a copy's caller hears of it from the loop, never from within */
        else
            ticket_complete(t);
        return;
    }
    t->dev = x->dev;
    t->queued = true;
    dev_tickets[x->dev]++;
    t->timeout_ms = x->timeout_ms;
    t->comm_id = x->job ? x->job->comm_id : 0;
    t->deadline = x->timeout_ms ? uv_now(nx_cuda_host->loop) + x->timeout_ms : 0;
    for (size_t i = 0; i < x->nscratch; i++)
        if (cudaFreeAsync(x->scratch[i], x->s) != cudaSuccess)
            NX_WARN("cuda", "%s: scratch memory leaked: cudaFreeAsync failed",
                    x->what); /* never cudaFree: it waits for the device */
    free(x->scratch);
    cudaGetLastError();
    if (cudaLaunchHostFunc(x->s, host_done, t) == cudaSuccess) {
        if (!probes[x->dev] &&
            cudaStreamCreateWithFlags(&probes[x->dev], cudaStreamNonBlocking) != cudaSuccess) {
            cudaGetLastError();
            probes[x->dev] = NULL; /* unwatched: the op ends when its host function runs */
            return;
        }
        snprintf(t->what, sizeof(t->what), "%s", x->what);
        list_push(&watched, t);
        if (timers_open && !uv_is_active((uv_handle_t *)&watch_timer))
            uv_timer_start(&watch_timer, on_watch, NX_CUDA_WATCH_MS, NX_CUDA_WATCH_MS);
        return;
    }
    cudaGetLastError();
    if (!t->status) {
        t->status = NEXAR_ERR_INTERNAL;
        snprintf(t->text, sizeof(t->text), "%s on device %d: cudaLaunchHostFunc failed",
                 x->what, x->dev);
        NX_WARN("cuda", "%s", t->text);
    }
    park(t, x->s);
}

void nx_cuda_exec_run(const struct nx_dev_job *job)
{
    struct ticket *t = nx_xcalloc(1, sizeof(*t));
    struct exec x = {.job = job, .what = job->what, .t = t, .es = nx_dtype_size(job->dtype),
                     .timeout_ms = job->timeout_ms};
    t->nparts = job->size;
    t->parts = nx_xcalloc(job->size, sizeof(*t->parts));
    for (uint32_t r = 0; r < job->size; r++) {
        t->parts[r] = job->parts[r];
        t->parts[r].iov = NULL;
    }
    inflight++;
    x.dev = pick_device(job);
    if (x.dev < 0 || x.dev >= MAX_DEVICES || cudaSetDevice(x.dev) != cudaSuccess ||
        !(x.s = job->kind == NX_K_SEND ? take_stream(x.dev)
                                       : comm_stream(job->comm_id, x.dev, LANE_OPS))) {
        fail(&x, NEXAR_ERR_INTERNAL, "no stream on the op's device");
        x.s = NULL;
        finish(&x);
        return;
    }
    for (uint32_t r = 0; r < job->size && !x.status; r++)
        wait_ready(&x, job->parts[r].client_id, job->parts[r].rec.ready_event);
    if (!x.status) {
        if (job->kind == NX_K_SEND)
            run_send(&x);
        else
            run_coll(&x);
    }
    finish(&x);
}

/*
 * A staging copy of an op across nodes (device.h's copy): on the communicator's stream of
 * the first range's device for its direction, after the ranks' ready events, with the
 * end handed to the loop like an op's.  D2H and H2D have a stream each, so that the copy
 * engines move part i+1 in while part i-1 goes back out; nothing orders a D2H after an
 * H2D on the GPU, because devstage queues a part's copy back only once the copy in, and
 * so every ready event it waited for, has ended.  The host memory is pinned (hostmem.c),
 * so that cudaMemcpyAsync never waits on this thread.
 */
void nx_cuda_exec_copy(uint32_t comm_id, const struct nx_dev_copy *v, size_t n, int dir,
                       const char *what, nx_dev_copy_done done, void *arg)
{
    struct ticket *t = nx_xcalloc(1, sizeof(*t));
    struct exec x = {.what = what, .t = t, .dev = -1};
    t->done = done;
    t->done_arg = arg;
    inflight++;
    struct nx_reg *first = n ? nx_cuda_reg_mem(v[0].client_id, v[0].mem) : NULL;
    x.dev = first ? first->device : -1;
    if (n && !first) {
        fail(&x, NEXAR_ERR_INTERNAL, "a device registration vanished before the op ran");
    } else if (n && (x.dev < 0 || x.dev >= MAX_DEVICES || cudaSetDevice(x.dev) != cudaSuccess ||
                     !(x.s = comm_stream(comm_id, x.dev,
                                         dir == NX_DEV_D2H ? LANE_D2H : LANE_H2D)))) {
        fail(&x, NEXAR_ERR_INTERNAL, "no stream on the device of the op's buffers");
        x.s = NULL;
    }
    for (size_t i = 0; i < n && !x.status; i++) {
        struct nx_reg *r = nx_cuda_reg_mem(v[i].client_id, v[i].mem);
        if (!r) {
            fail(&x, NEXAR_ERR_INTERNAL, "a device registration vanished before the op ran");
            break;
        }
        hold(t, r);
        if (!wait_ready(&x, v[i].client_id, v[i].wait_event))
            break;
        uint8_t *d = (uint8_t *)r->handle + v[i].off;
        if (dir == NX_DEV_D2H)
            copy(&x, v[i].host, d, v[i].bytes);
        else
            copy(&x, d, v[i].host, v[i].bytes);
    }
    finish(&x);
}

void nx_cuda_exec_comm_gone(uint32_t comm_id)
{
    /* Work still queued on a stream finishes after cudaStreamDestroy; its completion
     * comes through the host function as usual. */
    for (size_t i = 0; i < ncstreams;) {
        if (cstreams[i].comm_id != comm_id) {
            i++;
            continue;
        }
        cudaSetDevice(cstreams[i].device);
        cudaStreamDestroy(cstreams[i].s);
        cstreams[i] = cstreams[--ncstreams];
    }
}

int nx_cuda_exec_init(void)
{
    int rv = uv_async_init(nx_cuda_host->loop, &done_async, on_done);
    if (rv < 0)
        return rv;
    uv_timer_init(nx_cuda_host->loop, &park_timer);
    uv_timer_init(nx_cuda_host->loop, &grace_timer);
    uv_timer_init(nx_cuda_host->loop, &watch_timer);
    pthread_mutex_lock(&done_mu);
    async_open = true;
    pthread_mutex_unlock(&done_mu);
    timers_open = true;
    stopping = false;
    return 0;
}

void nx_cuda_exec_stop(void (*idle)(void))
{
    /* Shutting down.  Waiting here for the queued work would be the deadlock this file
     * avoids (the work may need done words that only this thread writes), so the loop
     * runs on and the last completion closes the handles; the grace timer ends it if the
     * GPU never finishes. */
    stopping = true;
    stop_idle = idle;
    drain_done();
    if (inflight == 0) {
        stopped();
        return;
    }
    NX_INFO("cuda", "%llu device ops in flight at shutdown: completing them (at most %u ms)",
            (unsigned long long)inflight, nx_cuda_stop_grace_ms);
    if (timers_open)
        uv_timer_start(&grace_timer, on_grace, nx_cuda_stop_grace_ms, 0);
}

void nx_cuda_exec_fini(void)
{
    /* Tickets whose work ended after shutdown gave up on them, and parked ones: their
     * ranks are gone; only the memory goes. */
    for (struct ticket *t = take_done(), *next; t; t = next) {
        next = t->next;
        unwatch(t);
        if (!t->abandoned)
            inflight--;
        if (t->queued)
            dev_tickets[t->dev]--;
        ticket_free(t);
    }
    /* The GPU broke under these, or they passed their deadline and their work still
     * waits: no host function will come for them now.  Their mappings join the closes
     * held back (below). */
    while (abandoned) {
        struct ticket *t = abandoned;
        unwatch(t);
        ticket_free(t);
    }
    while (parked) {
        struct ticket *t = parked;
        parked = t->next;
        if (cudaEventQuery(t->ev) == cudaErrorNotReady)
            t->nregs = 0; /* the GPU may still use the mappings: they go with the process */
        else if (t->queued)
            dev_tickets[t->dev]--;
        cudaGetLastError();
        cudaEventDestroy(t->ev);
        if (!t->abandoned)
            inflight--;
        ticket_free(t);
    }
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (pools[d].n && cudaSetDevice(d) == cudaSuccess)
            for (int i = 0; i < pools[d].n; i++)
                cudaStreamDestroy(pools[d].s[i]);
        pools[d].n = 0;
    }
    for (size_t i = 0; i < ncstreams; i++) {
        cudaSetDevice(cstreams[i].device);
        cudaStreamDestroy(cstreams[i].s);
    }
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (probes[d] && cudaSetDevice(d) == cudaSuccess)
            cudaStreamDestroy(probes[d]);
        probes[d] = NULL;
    }
    free(cstreams);
    cstreams = NULL;
    ncstreams = cstreams_cap = 0;
    for (int d = 0; d < MAX_DEVICES; d++)
        if (dev_tickets[d] == 0)
            close_pending(d);
    if (ncloses)
        NX_WARN("cuda", "%zu mappings of the ranks' memory stay open until exit: work "
                "queued on their device never ended", ncloses);
    free(closes);
    closes = NULL;
    ncloses = closes_cap = 0;
    if (inflight)
        NX_WARN("cuda", "%llu device ops were still in flight at exit",
                (unsigned long long)inflight);
}
