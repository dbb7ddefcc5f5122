/* fake_cudart.c - see fake_cudart.h.  One lock and one condition variable for all. */
#include "fake_cudart.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int fk_failures;
const char *volatile fk_case = "start";

static int cases_argc;
static char **cases_argv;

void fk_cases(int argc, char **argv)
{
    cases_argc = argc;
    cases_argv = argv;
}

bool fk_want_case(const char *name)
{
    for (int i = 1; i < cases_argc; i++)
        if (strcmp(cases_argv[i], name) == 0)
            return true;
    return cases_argc <= 1;
}

struct fk_fail fk_fail;
static unsigned copy_delay_us[5]; /* by cudaMemcpyKind */
static struct fk_copy copy_log[FK_COPY_LOG];
static int ncopies;

enum kind { K_WAIT_EVENT, K_RECORD, K_HOST_FN, K_MEMCPY, K_FREE, K_CALL, K_WAIT_VALUE };

struct item {
    struct item *next;
    enum kind kind;
    struct CUevent_st *ev;
    uint64_t seq;
    void (*fn)(void *);
    void *arg;
    void *dst;
    const void *src;
    size_t n;
    const uint64_t *word;
    enum cudaMemcpyKind copy_kind;
    int log; /* index in copy_log, or -1 */
};

struct CUstream_st {
    struct CUstream_st *all_next;
    struct item *head, **tail;
    bool busy, destroyed, done;
    pthread_t thread;
};

struct CUevent_st {
    struct CUevent_st *all_next;
    uint64_t recorded, fired;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool ctx_faulted; /* a copy faulted: no stream runs anything, every call fails */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct CUstream_st *streams;
static struct CUevent_st *events;
static int nstreams;

static double fk_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fk_sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* Unlocked, on the stream's thread: the copy, after its delay; false when it faulted. */
static bool run_copy(struct item *it)
{
    pthread_mutex_lock(&mu);
    bool fault = fk_fail.copy_fault > 0;
    if (fault)
        fk_fail.copy_fault--;
    unsigned us = copy_delay_us[it->copy_kind < 5 ? it->copy_kind : 0];
    double t0 = fk_now();
    if (it->log >= 0)
        copy_log[it->log].t_start = t0;
    pthread_mutex_unlock(&mu);
    if (!fault)
        memmove(it->dst, it->src, it->n);
    fk_sleep_until(t0 + us * 1e-6); /* the delay includes the memmove; a fault comes at its end */
    pthread_mutex_lock(&mu);
    if (it->log >= 0 && !fault)
        copy_log[it->log].t_end = fk_now();
    pthread_mutex_unlock(&mu);
    return !fault;
}

static void timed_wait(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&cv, &mu, &ts);
}

/* Locked: the item at the head may run now. */
static bool ready(const struct item *it)
{
    if (it->kind == K_WAIT_EVENT)
        return it->ev->fired >= it->seq;
    if (it->kind == K_WAIT_VALUE)
        return __atomic_load_n(it->word, __ATOMIC_ACQUIRE) >= it->seq;
    return true;
}

static void *worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        if (!s->head) {
            if (s->destroyed)
                break;
            pthread_cond_wait(&cv, &mu);
            continue;
        }
        struct item *it = s->head;
        if (!ctx_faulted && !ready(it)) {
            timed_wait(); /* a word is plain memory: look again */
            continue;
        }
        s->busy = true;
        bool faulted = ctx_faulted;
        pthread_mutex_unlock(&mu);
        switch (faulted ? K_WAIT_EVENT : it->kind) { /* a faulted stream runs nothing */
        case K_HOST_FN: it->fn(it->arg); break;
        case K_CALL: it->fn(it->arg); free(it->arg); break;
        case K_MEMCPY: faulted = !run_copy(it); break;
        case K_FREE: free(it->dst); break;
        default: break;
        }
        pthread_mutex_lock(&mu);
        ctx_faulted |= faulted;
        if (it->kind == K_RECORD && it->ev->fired < it->seq && !ctx_faulted)
            it->ev->fired = it->seq;
        s->head = it->next;
        if (!s->head)
            s->tail = &s->head;
        s->busy = false;
        free(it);
        pthread_cond_broadcast(&cv);
    }
    s->done = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void push(struct CUstream_st *s, struct item it)
{
    struct item *p = malloc(sizeof(*p));
    *p = it;
    p->next = NULL;
    pthread_mutex_lock(&mu);
    *s->tail = p;
    s->tail = &p->next;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* ---- streams -------------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    (void)flags;
    struct CUstream_st *s = calloc(1, sizeof(*s));
    s->tail = &s->head;
    pthread_mutex_lock(&mu);
    s->all_next = streams;
    streams = s;
    nstreams++;
    pthread_mutex_unlock(&mu);
    pthread_create(&s->thread, NULL, worker, s);
    *out = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    s->destroyed = true; /* queued work still runs, as with CUDA */
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    bool idle = !s->head && !s->busy, faulted = ctx_faulted;
    pthread_mutex_unlock(&mu);
    return faulted ? cudaErrorIllegalAddress : idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    while (s->head || s->busy)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&mu);
    uint64_t seq = ev->recorded; /* the last record at this moment; none: no wait */
    pthread_mutex_unlock(&mu);
    if (seq)
        push(s, (struct item){.kind = K_WAIT_EVENT, .ev = ev, .seq = seq});
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
    if (fk_fail.launch_host_func > 0) {
        fk_fail.launch_host_func--;
        return cudaErrorInvalidResourceHandle;
    }
    pthread_mutex_lock(&mu);
    bool faulted = ctx_faulted;
    pthread_mutex_unlock(&mu);
    if (faulted)
        return cudaErrorIllegalAddress;
    push(s, (struct item){.kind = K_HOST_FN, .fn = fn, .arg = arg});
    return cudaSuccess;
}

void fk_wait_value(cudaStream_t s, const uint64_t *word, uint64_t value)
{
    push(s, (struct item){.kind = K_WAIT_VALUE, .word = word, .seq = value});
}

void fk_call(cudaStream_t s, void (*fn)(void *), void *arg)
{
    push(s, (struct item){.kind = K_CALL, .fn = fn, .arg = arg});
}

int fk_streams_created(void)
{
    pthread_mutex_lock(&mu);
    int n = nstreams;
    pthread_mutex_unlock(&mu);
    return n;
}

/* ---- events ----------------------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
    (void)flags;
    struct CUevent_st *e = calloc(1, sizeof(*e));
    pthread_mutex_lock(&mu);
    e->all_next = events;
    events = e;
    pthread_mutex_unlock(&mu);
    *out = e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    if (fk_fail.event_record > 0) {
        fk_fail.event_record--;
        pthread_mutex_unlock(&mu);
        return cudaErrorInvalidResourceHandle;
    }
    if (ctx_faulted) {
        pthread_mutex_unlock(&mu);
        return cudaErrorIllegalAddress;
    }
    uint64_t seq = ++ev->recorded;
    pthread_mutex_unlock(&mu);
    push(s, (struct item){.kind = K_RECORD, .ev = ev, .seq = seq});
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    pthread_mutex_lock(&mu);
    cudaError_t e = ev->fired >= ev->recorded ? cudaSuccess : cudaErrorNotReady;
    pthread_mutex_unlock(&mu);
    return e;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    pthread_mutex_lock(&mu);
    while (ev->fired < ev->recorded)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

bool fk_event_done(cudaEvent_t ev)
{
    pthread_mutex_lock(&mu);
    bool done = ev->fired >= ev->recorded;
    pthread_mutex_unlock(&mu);
    return done;
}

/* Freed at fk_shutdown: a record may still be queued, which CUDA allows. */
cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    (void)ev;
    return cudaSuccess;
}

/* ---- memory ------------------------------------------------------------------------------ */

cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    if (fk_fail.malloc_async > 0) {
        fk_fail.malloc_async--;
        return cudaErrorMemoryAllocation;
    }
    *p = calloc(1, n);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    push(s, (struct item){.kind = K_FREE, .dst = p});
    return cudaSuccess;
}

/* On a GPU it waits for the work queued on every stream of the process (test gpu_nowait
 * measures that), so here it waits until every stream ran dry. */
static int ipc_closes;

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    (void)p;
    pthread_mutex_lock(&mu);
    for (;;) {
        bool idle = true;
        for (struct CUstream_st *s = streams; s && idle; s = s->all_next)
            idle = !s->head && !s->busy;
        if (idle || ctx_faulted)
            break;
        pthread_cond_wait(&cv, &mu);
    }
    ipc_closes++;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

int fk_ipc_closes(void)
{
    pthread_mutex_lock(&mu);
    int n = ipc_closes;
    pthread_mutex_unlock(&mu);
    return n;
}

cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    if (fk_fail.memcpy_async > 0) {
        fk_fail.memcpy_async--;
        pthread_mutex_unlock(&mu);
        return cudaErrorInvalidValue;
    }
    if (ctx_faulted) {
        pthread_mutex_unlock(&mu);
        return cudaErrorIllegalAddress;
    }
    int log = -1;
    if (ncopies < FK_COPY_LOG) {
        log = ncopies++;
        copy_log[log] = (struct fk_copy){.kind = kind, .dst = dst, .src = src, .n = n,
                                         .t_queued = fk_now()};
    }
    pthread_mutex_unlock(&mu);
    push(s, (struct item){.kind = K_MEMCPY, .dst = dst, .src = src, .n = n, .copy_kind = kind,
                          .log = log});
    return cudaSuccess;
}

void fk_set_copy_delay(enum cudaMemcpyKind kind, unsigned us)
{
    pthread_mutex_lock(&mu);
    copy_delay_us[kind < 5 ? kind : 0] = us;
    pthread_mutex_unlock(&mu);
}

int fk_copies(struct fk_copy *out, int max)
{
    pthread_mutex_lock(&mu);
    int n = ncopies < max ? ncopies : max;
    memcpy(out, copy_log, sizeof(*out) * (size_t)n);
    pthread_mutex_unlock(&mu);
    return n;
}

void fk_reset(void)
{
    pthread_mutex_lock(&mu);
    memset(copy_delay_us, 0, sizeof(copy_delay_us));
    memset(&fk_fail, 0, sizeof(fk_fail));
    ctx_faulted = false; /* a new context, as after a restart */
    ncopies = 0;
    pthread_mutex_unlock(&mu);
}

/* ---- the rest ------------------------------------------------------------------------------ */

cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
    static __thread char buf[48];
    snprintf(buf, sizeof(buf), "fake CUDA error %d", (int)e);
    return buf;
}

void fk_shutdown(void)
{
    pthread_mutex_lock(&mu);
    for (struct CUstream_st *s = streams; s; s = s->all_next)
        s->destroyed = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    while (streams) {
        struct CUstream_st *s = streams;
        streams = s->all_next;
        pthread_join(s->thread, NULL);
        free(s);
    }
    while (events) {
        struct CUevent_st *e = events;
        events = e->all_next;
        free(e);
    }
    nstreams = 0;
}
