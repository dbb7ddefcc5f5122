/*
 * fake_cuda.c - a stand-in for libcuda.so.1 (its SONAME) on hosts without a GPU, so that
 * the shim's device path can be tested: a test loads it by path, as a CUDA program has
 * the real one loaded, and names address ranges of its own (host) memory that the fake
 * then reports as device allocations.  The symbol names are those the shim resolves
 * (cudrv.c).  It runs no kernels; what it models is what the shim's logic depends on:
 *
 *   - allocations: each range has its own buffer id; nx_fake_cuda_free() makes it unknown
 *     to the driver, as cudaFree does.  nx_fake_cuda_shared() allocates in a POSIX shm
 *     object that the test nexard maps through the IPC handle, so that its copies move
 *     real data (the path across nodes, node/devstage.h);
 *   - IPC handles that name the allocation (tests/integration/fakedev_backend.c, the fake
 *     device backend of a test nexard, reads them);
 *   - streams as lists of conditions: cuStreamWaitValue64 adds "word >= value", an event
 *     recorded on a stream completes when the stream's conditions at that moment hold, and
 *     cuStreamWaitEvent adds the event's conditions to a stream.  A watcher thread notes
 *     when each wait is released (nx_fake_cuda_waits), and cuMemHostUnregister of memory
 *     a stream still waits on is recorded as the violation it is (on a GPU: a fault).
 *
 * tests/integration/test_device_api.c loads it against a nexard without device support
 * (every device op is refused before any of this is reached); test_device_fake.c and
 * test_device_events.c against the test nexard with the fake backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"

#define API __attribute__((visibility("default")))
#define FAIL 999           /* CUDA_ERROR_UNKNOWN */
#define INVALID_VALUE 1    /* CUDA_ERROR_INVALID_VALUE */
#define INVALID_HANDLE 400 /* CUDA_ERROR_INVALID_HANDLE */
#define NOT_READY 600      /* CUDA_ERROR_NOT_READY */

#define MAX_ALLOCS 256
#define MAX_WAITS 4096
#define MAX_STREAMS 64
#define MAX_CONDS 256 /* per stream or event */
#define MAX_PINNED 16

typedef unsigned long long devptr;

/* The IPC handles (64 bytes) the fake hands out; fakedev_backend.c reads them. */
struct fake_ipc {
    char magic[8]; /* "NXFKMEM" or "NXFKEVT" */
    uint64_t base, size, buffer_id;
    uint64_t event;
    char shm[64 - 40]; /* memory from nx_fake_cuda_shared: its POSIX shm name; else "" */
};
_Static_assert(sizeof(struct fake_ipc) == 64, "an IPC handle is 64 bytes");

struct alloc {
    uintptr_t lo, hi;
    uint64_t bid;
    int freed;
    char shm[24]; /* nx_fake_cuda_shared: unlinked and unmapped when freed */
};

/* One cuStreamWaitValue64. */
struct wait {
    const volatile uint64_t *addr;
    uint64_t value;
    uint64_t t_enq_ns, t_rel_ns; /* released: when the word was first seen >= value */
    int dropped;                 /* its memory was unregistered while it still waited */
};

struct conds {
    int idx[MAX_CONDS]; /* indices into waits[] */
    int n;
};

struct stream {
    const void *key;
    struct conds c;
};

struct event {
    uint32_t magic;
    unsigned flags;
    struct conds c;
};
#define EVENT_MAGIC 0x4e58ef01u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc allocs[MAX_ALLOCS];
static int nallocs;
static uint64_t next_bid = 42;
static struct wait waits[MAX_WAITS];
static int nwaits;
static struct stream streams[MAX_STREAMS];
static int nstreams;
static struct {
    uintptr_t lo, hi;
} pinned[MAX_PINNED];
static int npinned;
static pthread_t watcher;
static int watcher_on;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the test's handles -------------------------------------------------------------- */

/* Locked: a slot for a new allocation (a freed one's when all are taken), or NULL. */
static struct alloc *alloc_slot(void)
{
    if (nallocs < MAX_ALLOCS)
        return &allocs[nallocs++];
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].freed && !allocs[i].shm[0])
            return &allocs[i];
    return NULL;
}

/* [p, p + n) is a device allocation from now on (a new buffer id). */
API void nx_fake_cuda_device_range(void *p, size_t n);
void nx_fake_cuda_device_range(void *p, size_t n)
{
    pthread_mutex_lock(&mu);
    struct alloc *a = alloc_slot();
    if (a)
        *a = (struct alloc){.lo = (uintptr_t)p, .hi = (uintptr_t)p + n, .bid = next_bid++};
    pthread_mutex_unlock(&mu);
}

/*
 * n bytes of "device" memory that the fake device backend of a test nexard maps too (a
 * POSIX shm object named in the IPC handle), so that its ops move real data; NULL on
 * failure.  Freed with nx_fake_cuda_free.
 */
API void *nx_fake_cuda_shared(size_t n);
void *nx_fake_cuda_shared(size_t n)
{
    static unsigned seq;
    char name[24];
    pthread_mutex_lock(&mu);
    int pre = nx_fake_cuda_shm_prefix(name, sizeof(name), (int)getpid());
    snprintf(name + pre, sizeof(name) - (size_t)pre, "%u", seq++ % 1000000);
    struct alloc *a = alloc_slot();
    int fd = a ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600) : -1;
    if (fd < 0 && a && errno == EEXIST) {
        /* Left by a dead process that had our pid (a rank killed before it freed): no
         * live process makes this name but us, and a nexard that mapped the old object
         * keeps its mapping. */
        shm_unlink(name);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    void *p = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)(n ? n : 1)) == 0)
        p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    if (p == MAP_FAILED) {
        if (fd >= 0)
            shm_unlink(name);
        if (a)
            *a = (struct alloc){.freed = 1};
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    *a = (struct alloc){.lo = (uintptr_t)p, .hi = (uintptr_t)p + n, .bid = next_bid++};
    snprintf(a->shm, sizeof(a->shm), "%s", name);
    pthread_mutex_unlock(&mu);
    return p;
}

/* The allocation holding p is freed (cudaFree): the driver no longer knows it. */
API void nx_fake_cuda_free(void *p);
void nx_fake_cuda_free(void *p)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nallocs; i++) {
        struct alloc *a = &allocs[i];
        if (a->freed || (uintptr_t)p < a->lo || (uintptr_t)p >= a->hi)
            continue;
        a->freed = 1;
        if (a->shm[0]) { /* a nexard that mapped it keeps its mapping until it unmaps */
            shm_unlink(a->shm);
            munmap((void *)a->lo, a->hi > a->lo ? a->hi - a->lo : 1);
            a->shm[0] = '\0';
        }
    }
    pthread_mutex_unlock(&mu);
}

/* At exit the names go: a nexard keeps what it mapped, and /dev/shm does not fill with
 * the segments of every rank that never freed its memory. */
__attribute__((destructor)) static void unlink_all(void)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].shm[0]) {
            shm_unlink(allocs[i].shm);
            allocs[i].shm[0] = '\0';
        }
    pthread_mutex_unlock(&mu);
}

/* A fresh stream handle (never the legacy stream, 0x1). */
API void *nx_fake_cuda_stream(void);
void *nx_fake_cuda_stream(void)
{
    static char tokens[MAX_STREAMS];
    static int n;
    pthread_mutex_lock(&mu);
    void *s = n < MAX_STREAMS ? &tokens[n++] : NULL;
    pthread_mutex_unlock(&mu);
    return s;
}

/* A handle the fake calls invalid (CUDA_ERROR_INVALID_HANDLE) wherever a stream goes. */
#define BAD_STREAM ((const void *)0xbad0)

/* Copies out up to cap waits, in the order they were queued; returns how many exist. */
API int nx_fake_cuda_waits(struct nx_fake_wait *out, int cap);

/* ---- conditions ------------------------------------------------------------------------ */

/* Locked.  True when wait i is released (looking at its word now). */
static int released(int i)
{
    struct wait *w = &waits[i];
    if (w->t_rel_ns || w->dropped)
        return !w->dropped;
    if (__atomic_load_n(w->addr, __ATOMIC_ACQUIRE) >= w->value) {
        w->t_rel_ns = now_ns();
        return 1;
    }
    return 0;
}

static int all_released(const struct conds *c)
{
    int ok = 1;
    for (int k = 0; k < c->n; k++)
        ok &= released(c->idx[k]);
    return ok;
}

static void add_cond(struct conds *c, int i)
{
    if (c->n < MAX_CONDS)
        c->idx[c->n++] = i;
}

/* Locked.  The conditions a stream still has (released ones are dropped). */
static struct stream *stream_of(const void *key)
{
    for (int i = 0; i < nstreams; i++)
        if (streams[i].key == key)
            return &streams[i];
    if (nstreams == MAX_STREAMS)
        return NULL;
    streams[nstreams] = (struct stream){.key = key};
    return &streams[nstreams++];
}

static void prune(struct conds *c)
{
    int j = 0;
    for (int k = 0; k < c->n; k++)
        if (!released(c->idx[k]) && !waits[c->idx[k]].dropped)
            c->idx[j++] = c->idx[k];
    c->n = j;
}

static void *watch(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        for (int i = 0; i < nwaits; i++)
            released(i);
        pthread_mutex_unlock(&mu);
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int nx_fake_cuda_waits(struct nx_fake_wait *out, int cap)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nwaits && i < cap; i++) {
        released(i);
        out[i] = (struct nx_fake_wait){.value = waits[i].value, .t_enq_ns = waits[i].t_enq_ns,
                                       .t_rel_ns = waits[i].t_rel_ns,
                                       .dropped = waits[i].dropped};
    }
    int n = nwaits;
    pthread_mutex_unlock(&mu);
    return n;
}

/* ---- the driver API ------------------------------------------------------------------- */

API int cuGetErrorString(int rc, const char **s);
int cuGetErrorString(int rc, const char **s)
{
    switch (rc) {
    case FAIL: *s = "the fake libcuda of the tests does not do that"; break;
    case INVALID_HANDLE: *s = "invalid resource handle (fake)"; break;
    case NOT_READY: *s = "device not ready (fake)"; break;
    case INVALID_VALUE: *s = "invalid argument (fake)"; break;
    default: *s = "fake error"; break;
    }
    return 0;
}

API int cuDriverGetVersion(int *v);
int cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}

/* Locked: the live allocation holding p, or NULL. */
static struct alloc *alloc_of(devptr p)
{
    for (int i = 0; i < nallocs; i++)
        if (!allocs[i].freed && p >= allocs[i].lo && p < allocs[i].hi)
            return &allocs[i];
    return NULL;
}

/* MEMORY_TYPE 2 (device), IS_MANAGED 8, CONTEXT 1, BUFFER_ID 7 (cudrv.h).  Like the
 * real one, an unknown pointer is no error: its attributes read 0. */
API int cuPointerGetAttributes(unsigned n, int *attrs, void **data, devptr p);
int cuPointerGetAttributes(unsigned n, int *attrs, void **data, devptr p)
{
    pthread_mutex_lock(&mu);
    const struct alloc *a = alloc_of(p);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case 2: *(unsigned *)data[i] = a ? 2 : 0; break;
        case 8: *(unsigned *)data[i] = 0; break;
        case 1: *(void **)data[i] = a ? (void *)0x1 : NULL; break;
        case 7: *(unsigned long long *)data[i] = a ? a->bid : 0; break;
        default: break;
        }
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

API int cuMemGetAddressRange_v2(devptr *base, size_t *size, devptr p);
int cuMemGetAddressRange_v2(devptr *base, size_t *size, devptr p)
{
    pthread_mutex_lock(&mu);
    const struct alloc *a = alloc_of(p);
    if (a) {
        *base = a->lo;
        *size = a->hi - a->lo;
    }
    pthread_mutex_unlock(&mu);
    return a ? 0 : INVALID_VALUE;
}

API int cuIpcGetMemHandle(struct fake_ipc *h, devptr p);
int cuIpcGetMemHandle(struct fake_ipc *h, devptr p)
{
    pthread_mutex_lock(&mu);
    const struct alloc *a = alloc_of(p);
    if (a && a->lo == p)
    {
        *h = (struct fake_ipc){.magic = "NXFKMEM", .base = a->lo, .size = a->hi - a->lo,
                               .buffer_id = a->bid};
        memcpy(h->shm, a->shm, sizeof(h->shm));
    }
    pthread_mutex_unlock(&mu);
    return a && a->lo == p ? 0 : INVALID_VALUE;
}

API int cuEventCreate(struct event **e, unsigned flags);
int cuEventCreate(struct event **e, unsigned flags)
{
    *e = calloc(1, sizeof(**e));
    if (!*e)
        return FAIL;
    (*e)->magic = EVENT_MAGIC;
    (*e)->flags = flags;
    return 0;
}

API int cuEventDestroy_v2(struct event *e);
int cuEventDestroy_v2(struct event *e)
{
    if (!e || e->magic != EVENT_MAGIC)
        return INVALID_HANDLE;
    e->magic = 0;
    free(e);
    return 0;
}

API int cuIpcGetEventHandle(struct fake_ipc *h, struct event *e);
int cuIpcGetEventHandle(struct fake_ipc *h, struct event *e)
{
    if (!e || e->magic != EVENT_MAGIC || !(e->flags & 0x4)) /* CU_EVENT_INTERPROCESS */
        return INVALID_HANDLE;
    *h = (struct fake_ipc){.magic = "NXFKEVT", .event = (uint64_t)(uintptr_t)e};
    return 0;
}

/* The legacy stream (0x1) and NULL are streams too. */
API int cuEventRecord(struct event *e, const void *stream);
int cuEventRecord(struct event *e, const void *stream)
{
    if (!e || e->magic != EVENT_MAGIC || stream == BAD_STREAM)
        return INVALID_HANDLE;
    pthread_mutex_lock(&mu);
    struct stream *s = stream_of(stream);
    if (s) {
        prune(&s->c);
        e->c = s->c;
    }
    pthread_mutex_unlock(&mu);
    return s ? 0 : FAIL;
}

API int cuEventQuery(struct event *e);
int cuEventQuery(struct event *e)
{
    if (!e || e->magic != EVENT_MAGIC)
        return INVALID_HANDLE;
    pthread_mutex_lock(&mu);
    int done = all_released(&e->c);
    pthread_mutex_unlock(&mu);
    return done ? 0 : NOT_READY;
}

/* Waits at most 15 s: a test that would hang fails instead (CUDA_ERROR_UNKNOWN). */
API int cuEventSynchronize(struct event *e);
int cuEventSynchronize(struct event *e)
{
    uint64_t t0 = now_ns();
    int rc;
    while ((rc = cuEventQuery(e)) == NOT_READY && now_ns() - t0 < 15000000000ull) {
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
    return rc == NOT_READY ? FAIL : rc;
}

API int cuStreamWaitEvent(const void *stream, struct event *e, unsigned flags);
int cuStreamWaitEvent(const void *stream, struct event *e, unsigned flags)
{
    (void)flags;
    if (!e || e->magic != EVENT_MAGIC || stream == BAD_STREAM)
        return INVALID_HANDLE;
    pthread_mutex_lock(&mu);
    struct stream *s = stream_of(stream);
    for (int k = 0; s && k < e->c.n; k++)
        add_cond(&s->c, e->c.idx[k]);
    pthread_mutex_unlock(&mu);
    return s ? 0 : FAIL;
}

API int cuStreamGetCtx(const void *stream, void **ctx);
int cuStreamGetCtx(const void *stream, void **ctx)
{
    if (!stream || stream == BAD_STREAM)
        return INVALID_HANDLE;
    *ctx = (void *)0x1;
    return 0;
}

API int cuStreamWaitValue64_v2(const void *stream, devptr addr, uint64_t value, unsigned flags);
int cuStreamWaitValue64_v2(const void *stream, devptr addr, uint64_t value, unsigned flags)
{
    if (stream == BAD_STREAM || flags != 0) /* GEQ only */
        return INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct stream *s = stream_of(stream);
    int rc = FAIL;
    if (s && nwaits < MAX_WAITS) {
        waits[nwaits] = (struct wait){.addr = (const volatile uint64_t *)(uintptr_t)addr,
                                      .value = value, .t_enq_ns = now_ns()};
        add_cond(&s->c, nwaits++);
        if (!watcher_on && pthread_create(&watcher, NULL, watch, NULL) == 0) {
            pthread_detach(watcher);
            watcher_on = 1;
        }
        rc = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

API int cuCtxPushCurrent_v2(void *ctx);
int cuCtxPushCurrent_v2(void *ctx)
{
    return ctx == (void *)0x1 ? 0 : INVALID_HANDLE;
}

API int cuCtxPopCurrent_v2(void **ctx);
int cuCtxPopCurrent_v2(void **ctx)
{
    *ctx = NULL;
    return 0;
}

API int cuCtxGetDevice(int *dev);
int cuCtxGetDevice(int *dev)
{
    *dev = 0;
    return 0;
}

API int cuDeviceGetPCIBusId(char *pci, int len, int dev);
int cuDeviceGetPCIBusId(char *pci, int len, int dev)
{
    snprintf(pci, (size_t)len, "0000:%02x:00.0", dev + 1);
    return 0;
}

/* CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS (122): yes. */
API int cuDeviceGetAttribute(int *v, int attr, int dev);
int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    *v = attr == 122;
    return 0;
}

API int cuMemHostRegister_v2(void *p, size_t n, unsigned flags);
int cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    (void)flags;
    pthread_mutex_lock(&mu);
    int rc = FAIL;
    if (npinned < MAX_PINNED) {
        pinned[npinned].lo = (uintptr_t)p;
        pinned[npinned++].hi = (uintptr_t)p + n;
        rc = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* A wait still pending on the memory is the shim's bug: on a GPU it would read memory
 * that is no longer there.  It is recorded (dropped) and no longer watched. */
API int cuMemHostUnregister(void *p);
int cuMemHostUnregister(void *p)
{
    pthread_mutex_lock(&mu);
    int rc = INVALID_VALUE;
    for (int i = 0; i < npinned; i++) {
        if (pinned[i].lo != (uintptr_t)p)
            continue;
        for (int k = 0; k < nwaits; k++) {
            uintptr_t a = (uintptr_t)waits[k].addr;
            if (a >= pinned[i].lo && a < pinned[i].hi && !released(k))
                waits[k].dropped = 1;
        }
        pinned[i] = pinned[--npinned];
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

API int cuMemHostGetDevicePointer_v2(devptr *d, void *p, unsigned flags);
int cuMemHostGetDevicePointer_v2(devptr *d, void *p, unsigned flags)
{
    (void)flags;
    *d = (devptr)(uintptr_t)p;
    return 0;
}
