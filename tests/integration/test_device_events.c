/*
 * test_device_events.c - the event functions and nexar_comm_stream_synchronize without
 * a GPU: what each does with bad arguments, without CUDA, and, against the fake
 * libcuda (fake_cuda.c) and the test nexard with the fake device backend
 * (fakedev_backend.c), the ordering they promise, as far as a stand-in can model it:
 *
 *   1. no libcuda in the process (real nexard): every event function says
 *      NEXAR_ERR_UNSUPPORTED after checking its out-parameter, nexar_event_destroy(NULL)
 *      is fine, and nexar_comm_stream_synchronize is nexar_sync (host-only): it completes
 *      the communicator's outstanding ops and reports their status; NULL and no init are
 *      NEXAR_ERR_INVALID.
 *   2. the fake libcuda (ops take 500 ms in nexard): NULL events, communicators and a
 *      communicator without a stream are NEXAR_ERR_INVALID; a CUDA error is
 *      NEXAR_ERR_INVALID with the driver's text; nexar_event_record / _query /
 *      _synchronize, nexar_stream_wait_event and nexar_comm_wait_event order and report
 *      as the fake's streams say; nexar_comm_stream_synchronize returns only when the
 *      communicator's ops are done and its stream holds no wait.
 *
 * Real streams and events are suite gpu's (tests/gpu/test_gpu_events.c).  Where this
 * host has a real libcuda.so.1 part 1 is skipped; with -Dcuda=disabled part 2 is; with
 * both the test exits 77.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include "fake_cuda.h"
#include "itest.h"

#define DELAY_MS 500

static int expect_st(int *fails, const char *what, nexar_status_t want, nexar_status_t st,
                     const char *needle)
{
    if (tl_check_status(what, want, st) ||
        (needle && tl_check_contains(what, nexar_last_error(), needle))) {
        (*fails)++;
        return -1;
    }
    return 0;
}

/* ---- 1. no CUDA ---------------------------------------------------------------------------- */

static int rank_no_cuda(struct hx_rank *r)
{
    int fails = 0;
    (void)r;
    /* Before nexar_init. */
    expect_st(&fails, "nexar_comm_stream_synchronize before nexar_init", NEXAR_ERR_INVALID,
              nexar_comm_stream_synchronize((nexar_comm_t *)0x10), "nexar_init");
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);

    nexar_event_t *bogus = (nexar_event_t *)0x1;
    int done = 7;
    expect_st(&fails, "nexar_event_create(c, NULL)", NEXAR_ERR_INVALID,
              nexar_event_create(w, NULL), "NULL");
    expect_st(&fails, "nexar_event_record without libcuda", NEXAR_ERR_UNSUPPORTED,
              nexar_event_record(NULL, (void *)0x1234), "CUDA");
    expect_st(&fails, "nexar_event_record on a stream, without libcuda", NEXAR_ERR_UNSUPPORTED,
              nexar_event_record(bogus, (void *)0x1234), "CUDA");
    expect_st(&fails, "nexar_comm_wait_event without libcuda", NEXAR_ERR_UNSUPPORTED,
              nexar_comm_wait_event(w, NULL), "CUDA");
    expect_st(&fails, "nexar_event_synchronize without libcuda", NEXAR_ERR_UNSUPPORTED,
              nexar_event_synchronize(NULL), "CUDA");
    expect_st(&fails, "nexar_event_query(ev, NULL)", NEXAR_ERR_INVALID,
              nexar_event_query(NULL, NULL), "done is NULL");
    expect_st(&fails, "nexar_event_query without libcuda", NEXAR_ERR_UNSUPPORTED,
              nexar_event_query(bogus, &done), "CUDA");
    EXPECT_TRUE(fails, done == 0, "nexar_event_query left *done = %d on failure", done);
    EXPECT_OK(fails, "nexar_event_destroy(NULL)", nexar_event_destroy(NULL));

    /* Host-only: nexar_comm_stream_synchronize is nexar_sync. */
    expect_st(&fails, "nexar_comm_stream_synchronize(NULL)", NEXAR_ERR_INVALID,
              nexar_comm_stream_synchronize(NULL), "comm is NULL");
    EXPECT_OK(fails, "nexar_comm_stream_synchronize with nothing outstanding",
              nexar_comm_stream_synchronize(w));
    int32_t v[3][64];
    nexar_request_t *req[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 64; i++)
            v[k][i] = me + k + i;
        EXPECT_OK(fails, "host iall_reduce",
                  nexar_iall_reduce(w, v[k], 64, NEXAR_I32, NEXAR_SUM, &req[k]));
    }
    EXPECT_OK(fails, "nexar_comm_stream_synchronize with 3 host ops outstanding (no stream)",
              nexar_comm_stream_synchronize(w));
    int bad = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 64; i++)
            bad += v[k][i] != size * (size - 1) / 2 + size * (k + i);
    EXPECT_TRUE(fails, bad == 0, "%d wrong sums after nexar_comm_stream_synchronize", bad);
    /* A failed op is reported, as by nexar_sync: count 3 against 4 is a mismatch. */
    nexar_comm_t *c2 = NULL;
    if (!EXPECT_OK(fails, "nexar_comm_split", nexar_comm_split(w, 0, me, &c2))) {
        nexar_request_t *rq = NULL;
        EXPECT_OK(fails, "a mismatched iall_reduce",
                  nexar_iall_reduce(c2, v[0], (size_t)(3 + me), NEXAR_I32, NEXAR_SUM, &rq));
        nexar_status_t st = nexar_comm_stream_synchronize(c2);
        if (size > 1)
            expect_st(&fails, "nexar_comm_stream_synchronize after a mismatch",
                      NEXAR_ERR_MISMATCH, st, NULL);
        nexar_comm_free(c2);
    }
    if (!fails && me == 0)
        tl_log("ok: without CUDA the event functions refuse, and "
               "nexar_comm_stream_synchronize is nexar_sync");
    nexar_finalize();
    return fails ? 1 : 0;
}

/* ---- 2. the fake libcuda --------------------------------------------------------------------- */

static double ms_since(double t0)
{
    return (tl_now() - t0) * 1e3;
}

static int rank_fake(struct hx_rank *r)
{
    (void)r;
    int fails = 0;
    struct nx_fake_cuda f;
    char err[512];
    if (nx_fake_cuda_load(&f, err, sizeof(err))) {
        tl_log("FAIL: %s", err);
        return 1;
    }
    void (*mark)(void *, size_t) = f.mark;
    void *(*new_stream)(void) = f.stream;
    int (*waits)(struct nx_fake_wait *, int) = f.waits;
    nexar_comm_t *w = NULL, *c2 = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    static float a[64] __attribute__((aligned(64)));
    mark(a, sizeof(a));
    void *s = new_stream(), *s2 = new_stream(), *compute = new_stream();
    void *bad_stream = (void *)0xbad0; /* the fake calls it an invalid handle */
    if (EXPECT_OK(fails, "nexar_comm_split", nexar_comm_split(w, 0, 0, &c2)))
        return 1;

    /* Arguments. */
    nexar_event_t *ev = (nexar_event_t *)0x1, *eb = NULL, *ec = NULL, *ed = NULL;
    expect_st(&fails, "nexar_event_create on a communicator without a stream",
              NEXAR_ERR_INVALID, nexar_event_create(w, &ev), "nexar_comm_set_stream");
    EXPECT_TRUE(fails, ev == NULL, "a refused nexar_event_create left *ev set");
    expect_st(&fails, "nexar_event_create(NULL comm)", NEXAR_ERR_INVALID,
              nexar_event_create(NULL, &ev), "comm is NULL");
    if (EXPECT_OK(fails, "nexar_comm_set_stream", nexar_comm_set_stream(w, s)) ||
        EXPECT_OK(fails, "nexar_event_create", nexar_event_create(w, &ev)))
        return 1;
    int done = 7;
    expect_st(&fails, "nexar_event_record(NULL event)", NEXAR_ERR_INVALID,
              nexar_event_record(NULL, compute), "event is NULL");
    expect_st(&fails, "nexar_event_synchronize(NULL)", NEXAR_ERR_INVALID,
              nexar_event_synchronize(NULL), "event is NULL");
    expect_st(&fails, "nexar_event_query(NULL event)", NEXAR_ERR_INVALID,
              nexar_event_query(NULL, &done), "event is NULL");
    EXPECT_TRUE(fails, done == 0, "nexar_event_query left *done = %d on failure", done);
    expect_st(&fails, "nexar_comm_wait_event(NULL comm)", NEXAR_ERR_INVALID,
              nexar_comm_wait_event(NULL, ev), "comm is NULL");
    expect_st(&fails, "nexar_comm_wait_event on a communicator without a stream",
              NEXAR_ERR_INVALID, nexar_comm_wait_event(c2, ev), "no stream");
    expect_st(&fails, "nexar_comm_wait_event(NULL event)", NEXAR_ERR_INVALID,
              nexar_comm_wait_event(w, NULL), "event is NULL");
    expect_st(&fails, "nexar_event_record on an invalid stream", NEXAR_ERR_INVALID,
              nexar_event_record(ev, bad_stream), "invalid resource handle");
    expect_st(&fails, "nexar_stream_wait_event on an invalid stream", NEXAR_ERR_INVALID,
              nexar_stream_wait_event(bad_stream, ev), "invalid resource handle");
    expect_st(&fails, "nexar_comm_stream_synchronize(NULL)", NEXAR_ERR_INVALID,
              nexar_comm_stream_synchronize(NULL), "comm is NULL");

    /* An event on an idle compute stream is complete at once. */
    EXPECT_OK(fails, "nexar_event_record on an idle stream", nexar_event_record(ev, compute));
    EXPECT_OK(fails, "nexar_event_query", nexar_event_query(ev, &done));
    EXPECT_TRUE(fails, done == 1, "an event recorded on an idle stream reads not done");

    /* comm stream -> compute stream: the compute stream waits for the allreduce. */
    double t0 = tl_now();
    EXPECT_OK(fails, "stream-ordered all_reduce (500 ms in nexard)",
              nexar_all_reduce(w, a, 16, NEXAR_F32, NEXAR_SUM));
    EXPECT_OK(fails, "nexar_event_create", nexar_event_create(w, &eb));
    EXPECT_OK(fails, "nexar_event_create", nexar_event_create(w, &ec));
    EXPECT_OK(fails, "nexar_event_record_comm", nexar_event_record_comm(w, eb));
    EXPECT_OK(fails, "nexar_stream_wait_event(compute, comm's event)",
              nexar_stream_wait_event(compute, eb));
    EXPECT_OK(fails, "nexar_event_record(compute)", nexar_event_record(ec, compute));
    done = 7;
    EXPECT_OK(fails, "nexar_event_query (comm)", nexar_event_query(eb, &done));
    EXPECT_TRUE(fails, done == 0, "the comm stream's event reads done while its op runs");
    EXPECT_OK(fails, "nexar_event_query (compute)", nexar_event_query(ec, &done));
    EXPECT_TRUE(fails, done == 0, "the compute stream did not wait for the comm's event");
    EXPECT_OK(fails, "nexar_event_synchronize (compute)", nexar_event_synchronize(ec));
    double dt = ms_since(t0);
    EXPECT_TRUE(fails, dt >= 0.9 * DELAY_MS,
                "nexar_event_synchronize returned after %.0f ms, before the op (%d ms)", dt,
                DELAY_MS);
    EXPECT_OK(fails, "nexar_event_query (comm, after)", nexar_event_query(eb, &done));
    EXPECT_TRUE(fails, done == 1, "the comm's event is not done after the compute's");

    /* compute stream -> another comm's stream, then nexar_comm_stream_synchronize. */
    EXPECT_OK(fails, "nexar_comm_set_stream (second comm)", nexar_comm_set_stream(c2, s2));
    EXPECT_OK(fails, "nexar_event_create", nexar_event_create(w, &ed));
    t0 = tl_now();
    EXPECT_OK(fails, "stream-ordered all_reduce on the first comm",
              nexar_all_reduce(w, a, 16, NEXAR_F32, NEXAR_SUM));
    EXPECT_OK(fails, "nexar_event_record_comm", nexar_event_record_comm(w, ed));
    EXPECT_OK(fails, "nexar_comm_wait_event(second comm)", nexar_comm_wait_event(c2, ed));
    EXPECT_OK(fails, "nexar_comm_stream_synchronize (second comm: no ops, a wait)",
              nexar_comm_stream_synchronize(c2));
    dt = ms_since(t0);
    EXPECT_TRUE(fails, dt >= 0.9 * DELAY_MS,
                "nexar_comm_stream_synchronize returned after %.0f ms, before the work its "
                "stream waits for (%d ms)", dt, DELAY_MS);

    /* nexar_comm_stream_synchronize on the comm's own ops. */
    t0 = tl_now();
    for (int k = 0; k < 3; k++)
        EXPECT_OK(fails, "stream-ordered all_reduce", nexar_all_reduce(w, a, 16, NEXAR_F32,
                                                                        NEXAR_SUM));
    EXPECT_OK(fails, "nexar_comm_stream_synchronize", nexar_comm_stream_synchronize(w));
    dt = ms_since(t0);
    struct nx_fake_wait wv[64];
    int n = waits(wv, 64), pending = 0;
    for (int i = 0; i < n && i < 64; i++)
        pending += wv[i].t_rel_ns == 0;
    EXPECT_TRUE(fails, pending == 0,
                "%d stream waits still pending after nexar_comm_stream_synchronize", pending);
    EXPECT_TRUE(fails, dt >= 0.9 * DELAY_MS, "nexar_comm_stream_synchronize took %.0f ms", dt);
    EXPECT_OK(fails, "nexar_sync", nexar_sync(w));

    nexar_event_t *all[] = {ev, eb, ec, ed};
    for (int i = 0; i < 4; i++)
        EXPECT_OK(fails, "nexar_event_destroy", nexar_event_destroy(all[i]));
    if (!fails)
        tl_log("ok: events and nexar_comm_stream_synchronize order and report as promised "
               "(fake streams)");
    nexar_comm_free(c2);
    nexar_finalize();
    return fails ? 1 : 0;
}

int main(void)
{
    hx_require_nexard();
    const char *real_nexard = hx_nexard_path(), *fakedev = getenv("NX_FAKEDEV_NEXARD");
    const char *shim_cuda = getenv("NX_SHIM_CUDA");
    void *real = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    int ran = 0, rv = 0;
    struct hx_daemon d;
    if (real) {
        tl_log("note: this host has a libcuda.so.1; the no-CUDA part is skipped");
    } else {
        tl_log("--- without CUDA (nexard %s)", real_nexard);
        if (hx_daemon_start(&d, NULL) < 0)
            return 1;
        rv |= itest_run(&d, 2, rank_no_cuda, NULL, 30, 120) != 0;
        if (hx_daemon_stop(&d) < 0)
            rv = 1;
        ran++;
    }
    if (shim_cuda && strcmp(shim_cuda, "0") == 0) {
        tl_log("note: libnexarshim built with -Dcuda=disabled; the fake-CUDA part is skipped");
    } else if (!fakedev || !getenv("NX_FAKE_CUDA")) {
        tl_log("note: NX_FAKEDEV_NEXARD or NX_FAKE_CUDA unset; the fake-CUDA part is skipped");
    } else {
        char delay[64];
        snprintf(delay, sizeof(delay), "NX_FAKEDEV_DELAY_MS=%d", DELAY_MS);
        const char *env[] = {delay, NULL};
        tl_log("--- the fake libcuda (nexard with the fake device backend)");
        setenv("NEXARD", fakedev, 1);
        if (hx_daemon_start_env(&d, NULL, env) < 0)
            return 1;
        rv |= itest_run(&d, 1, rank_fake, NULL, 30, 120) != 0;
        if (hx_daemon_stop(&d) < 0)
            rv = 1;
        ran++;
    }
    if (!ran) {
        tl_log("SKIP: nothing here to test without a GPU");
        return HX_SKIP;
    }
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv;
}
