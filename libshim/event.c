/*
 * event.c - the public event API: ordering a communicator's stream (the one given to
 * nexar_comm_set_stream) against the caller's compute streams, as numr's StreamSyncOps
 * do, and nexar_comm_stream_synchronize (their sync_comm_stream).  Thin wrappers over
 * the driver's events, so that a program orders compute and communication without CUDA
 * headers of its own.  Each call makes the event's context current for its duration
 * and leaves the caller's current context as it was.  A call that blocks (synchronize)
 * lets go of the library's lock first, so that other threads go on using nexar.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cudrv.h"
#include "shim.h"

#ifndef NX_SHIM_CUDA
#define NX_SHIM_CUDA 1
#endif

struct nexar_event {
    nx_cu_event ev;
    nx_cu_ctx ctx;
};

static const struct nx_cudrv *D;

/* The driver, or UNSUPPORTED with the reason. */
static nexar_status_t driver(const char *fn)
{
    const char *why = NULL;
    if (!NX_SHIM_CUDA)
        return nx_fail(NEXAR_ERR_UNSUPPORTED,
                       "%s: this libnexarshim was built without CUDA support (-Dcuda=disabled)",
                       fn);
    if (!(D = nx_cudrv_get(false, &why)))
        return nx_fail(NEXAR_ERR_UNSUPPORTED, "%s: this libnexarshim has no CUDA (%s)", fn, why);
    return NEXAR_OK;
}

static nexar_status_t cu(const char *fn, nx_cu_result rc)
{
    if (rc == NX_CUDA_SUCCESS)
        return NEXAR_OK;
    return nx_fail(NEXAR_ERR_INVALID, "%s: %s", fn, nx_cudrv_errstr(rc));
}

static void pop(void)
{
    nx_cu_ctx dummy;
    D->CtxPopCurrent(&dummy);
}

/* The communicator's stream, or INVALID when it has none. */
static nexar_status_t comm_stream(const char *fn, const nexar_comm_t *c)
{
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "%s: comm is NULL", fn);
    if (!c->stream)
        return nx_fail(NEXAR_ERR_INVALID,
                       "%s: communicator %u has no stream; call nexar_comm_set_stream() first",
                       fn, c->id);
    return NEXAR_OK;
}

nexar_status_t nexar_event_create(nexar_comm_t *c, nexar_event_t **out)
{
    const char *fn = "nexar_event_create";
    if (!out)
        return nx_fail(NEXAR_ERR_INVALID, "%s: out is NULL", fn);
    *out = NULL;
    nx_lock();
    nexar_status_t s;
    struct nexar_event *e = NULL;
    if ((s = driver(fn)) || (s = comm_stream(fn, c)))
        goto out;
    if (!(e = calloc(1, sizeof(*e)))) {
        s = nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        goto out;
    }
    e->ctx = c->stream_ctx;
    if ((s = cu(fn, D->CtxPushCurrent(e->ctx))) == NEXAR_OK) {
        s = cu(fn, D->EventCreate(&e->ev, NX_CU_EVENT_DISABLE_TIMING));
        pop();
    }
    if (s == NEXAR_OK) {
        *out = e;
        e = NULL;
    }
out:
    free(e);
    nx_unlock();
    return s;
}

nexar_status_t nexar_event_destroy(nexar_event_t *e)
{
    if (!e)
        return NEXAR_OK;
    nx_lock();
    nexar_status_t s = driver("nexar_event_destroy");
    if (s == NEXAR_OK) {
        D->EventDestroy(e->ev);
        free(e);
    }
    nx_unlock();
    return s;
}

/* Records e on stream, or makes stream wait for e (wait). */
static nexar_status_t on_stream(const char *fn, nexar_event_t *e, void *stream, bool wait)
{
    nexar_status_t s;
    if (!e)
        return nx_fail(NEXAR_ERR_INVALID, "%s: event is NULL", fn);
    if ((s = cu(fn, D->CtxPushCurrent(e->ctx))) != NEXAR_OK)
        return s;
    if (wait)
        s = cu(fn, D->StreamWaitEvent((nx_cu_stream)stream, e->ev, 0));
    else
        s = cu(fn, D->EventRecord(e->ev, (nx_cu_stream)stream));
    pop();
    return s;
}

nexar_status_t nexar_event_record(nexar_event_t *e, void *cuda_stream)
{
    const char *fn = "nexar_event_record";
    nx_lock();
    nexar_status_t s = driver(fn);
    if (s == NEXAR_OK)
        s = on_stream(fn, e, cuda_stream, false);
    nx_unlock();
    return s;
}

nexar_status_t nexar_event_record_comm(nexar_comm_t *c, nexar_event_t *e)
{
    const char *fn = "nexar_event_record_comm";
    nx_lock();
    nexar_status_t s = driver(fn);
    if (s == NEXAR_OK && (s = comm_stream(fn, c)) == NEXAR_OK)
        s = on_stream(fn, e, c->stream, false);
    nx_unlock();
    return s;
}

nexar_status_t nexar_stream_wait_event(void *cuda_stream, nexar_event_t *e)
{
    const char *fn = "nexar_stream_wait_event";
    nx_lock();
    nexar_status_t s = driver(fn);
    if (s == NEXAR_OK)
        s = on_stream(fn, e, cuda_stream, true);
    nx_unlock();
    return s;
}

nexar_status_t nexar_comm_wait_event(nexar_comm_t *c, nexar_event_t *e)
{
    const char *fn = "nexar_comm_wait_event";
    nx_lock();
    nexar_status_t s = driver(fn);
    if (s == NEXAR_OK && (s = comm_stream(fn, c)) == NEXAR_OK)
        s = on_stream(fn, e, c->stream, true);
    nx_unlock();
    return s;
}

nexar_status_t nexar_event_synchronize(nexar_event_t *e)
{
    const char *fn = "nexar_event_synchronize";
    nx_lock();
    nexar_status_t s = driver(fn);
    nx_unlock();
    if (s != NEXAR_OK)
        return s;
    if (!e)
        return nx_fail(NEXAR_ERR_INVALID, "%s: event is NULL", fn);
    /* Without the lock: other threads keep using nexar while this one blocks. */
    if ((s = cu(fn, D->CtxPushCurrent(e->ctx))) != NEXAR_OK)
        return s;
    s = cu(fn, D->EventSynchronize(e->ev));
    pop();
    return s;
}

nexar_status_t nexar_event_query(nexar_event_t *e, int *done)
{
    const char *fn = "nexar_event_query";
    if (!done)
        return nx_fail(NEXAR_ERR_INVALID, "%s: done is NULL", fn);
    *done = 0;
    nx_lock();
    nexar_status_t s = driver(fn);
    if (s == NEXAR_OK && !e)
        s = nx_fail(NEXAR_ERR_INVALID, "%s: event is NULL", fn);
    if (s == NEXAR_OK && (s = cu(fn, D->CtxPushCurrent(e->ctx))) == NEXAR_OK) {
        nx_cu_result rc = D->EventQuery(e->ev);
        pop();
        if (rc == NX_CUDA_SUCCESS)
            *done = 1;
        else if (rc != NX_CUDA_ERROR_NOT_READY)
            s = cu(fn, rc);
    }
    nx_unlock();
    return s;
}

nexar_status_t nexar_comm_stream_synchronize(nexar_comm_t *c)
{
    const char *fn = "nexar_comm_stream_synchronize";
    char text[NX_ERR_TEXT_BYTES] = "";
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "%s: comm is NULL", fn);
    nx_lock();
    if (!nx_S.inited) {
        nx_unlock();
        return nx_fail(NEXAR_ERR_INVALID, "%s: nexar_init() has not been called", fn);
    }
    nexar_status_t s = nx_fork_check(fn);
    if (s != NEXAR_OK) {
        nx_unlock();
        return s;
    }
    /* First c's ops, as nexar_sync: each is with nexard and done, so every done word the
     * stream waits for is set (or will be by nexard, never by a later call of ours). */
    s = nx_comm_drain(c, c->req_serial);
    if (s != NEXAR_OK)
        snprintf(text, sizeof(text), "%s", nexar_last_error());
    void *stream = c->stream;
    nx_cu_ctx ctx = c->stream_ctx;
    nexar_status_t ds = stream ? driver(fn) : NEXAR_OK;
    nx_unlock();
    if (!stream || ds != NEXAR_OK)
        return s != NEXAR_OK ? nx_fail_text(s, text) : ds;
    /* Then the stream, without the lock: an event recorded now completes when all the
     * work queued on it so far has. */
    nx_cu_event ev = NULL;
    nexar_status_t cs = cu(fn, D->CtxPushCurrent(ctx));
    if (cs == NEXAR_OK) {
        cs = cu(fn, D->EventCreate(&ev, NX_CU_EVENT_DISABLE_TIMING));
        if (cs == NEXAR_OK) {
            if ((cs = cu(fn, D->EventRecord(ev, (nx_cu_stream)stream))) == NEXAR_OK)
                cs = cu(fn, D->EventSynchronize(ev));
            D->EventDestroy(ev);
        }
        pop();
    }
    return s != NEXAR_OK ? nx_fail_text(s, text) : cs;
}
